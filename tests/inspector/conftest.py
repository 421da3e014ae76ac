from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from memory_app.usage import usage_flush
from tenants.models import Membership, Tenant
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes


@pytest.fixture
def memory(es_prefix, invalidate_minted_keys):
    yield es_prefix
    # No time limit: a bump still running when the test's database closes fails the next test's
    # database access (each bump ends by the Elasticsearch client's own timeout).
    usage_flush(timeout=None)


@pytest.fixture
def tenants(db):
    return Tenant.objects.create(slug="acme", name="Acme"), Tenant.objects.create(slug="globex", name="Globex")


@pytest.fixture
def staff(tenants):
    """One staff user per role in tenant acme (and a superuser with no membership)."""
    acme, _globex = tenants
    User = get_user_model()
    users = {}
    for role in Membership.Role.values:
        users[role] = User.objects.create_user(username=role, password="pw", is_staff=True)
        Membership.objects.create(user=users[role], tenant=acme, role=role)
    users["superuser"] = User.objects.create_superuser("root", "", "pw")
    return users


@pytest.fixture
def subjects(memory, tenants):
    acme, globex = tenants
    alice = subject_get_or_create(tenant=acme, external_id="alice@example.com", display_name="Alice",
                                  lifetimes=KeyLifetimes.from_settings())
    mallory = subject_get_or_create(tenant=globex, external_id="mallory@example.com",
                                    lifetimes=KeyLifetimes.from_settings())
    return alice, mallory
