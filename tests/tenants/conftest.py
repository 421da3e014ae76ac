"""Fixtures for tenants tests: tenants, end-users and staff, and clean-up of minted API keys.

Keys minted by a test live in Elasticsearch, outside the test database's rollback, so each
test invalidates what it minted and drops the in-process key cache afterwards.
"""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

from tenants.models import Membership, Tenant

_seq = itertools.count()


@pytest.fixture(autouse=True)
def _invalidate_minted_keys(invalidate_minted_keys):
    yield


@pytest.fixture
def make_tenant():
    def make(slug: str | None = None) -> Tenant:
        slug = slug or f"tenant-{next(_seq)}"
        return Tenant.objects.create(slug=slug, name=slug.title())

    return make


@pytest.fixture
def tenant(make_tenant) -> Tenant:
    return make_tenant("acme")


@pytest.fixture
def other_tenant(make_tenant) -> Tenant:
    return make_tenant("globex")


@pytest.fixture
def make_staff():
    def make(username: str, *memberships: tuple[Tenant, str], superuser: bool = False):
        user = get_user_model().objects.create_user(username=username, password="pw", is_staff=True,
                                                    is_superuser=superuser)
        for tenant, role in memberships:
            Membership.objects.create(user=user, tenant=tenant, role=role)
        return user

    return make
