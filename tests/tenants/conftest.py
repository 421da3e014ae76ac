"""Fixtures for tenants tests: tenants, end-users and staff, and clean-up of minted API keys.

Keys minted by a test live in Elasticsearch, outside the test database's rollback, so each
test invalidates what it minted and drops the in-process key cache afterwards.
"""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from tenants import audit_triggers
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


@pytest.fixture
def as_dba():
    """Run SQL as the table's owner would, past the triggers that refuse the application's UPDATE
    and DELETE of audit events: what an attacker holding the database can do."""

    def run(sql: str, params: list) -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE waits for no deferred check
                cursor.execute("ALTER TABLE tenants_auditevent DISABLE TRIGGER USER")
                cursor.execute(sql, params)
                cursor.execute("ALTER TABLE tenants_auditevent ENABLE TRIGGER USER")
            else:
                for statement in audit_triggers.SQLITE_DROP:
                    cursor.execute(statement)
                cursor.execute(sql, params)
                for statement in audit_triggers.SQLITE_CREATE:
                    cursor.execute(statement)

    return run
