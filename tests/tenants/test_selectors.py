"""Reads about tenants and end-users."""

from __future__ import annotations

import pytest
from elasticsearch import AuthorizationException

from engram_core.es.schema import all_aliases
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes


def test_memory_scope_comes_from_the_subject_alone(es_prefix, tenant, other_tenant):
    alice = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    mallory = subject_get_or_create(tenant=other_tenant, external_id="mallory", lifetimes=KeyLifetimes.from_settings())
    tampered = {"text": "hello", **memory_scope(subject=mallory)}

    stamped = {**tampered, **memory_scope(subject=alice)}

    assert memory_scope(subject=alice) == {"tenant_id": "acme", "user_id": str(alice.user_id)}
    assert stamped == {"text": "hello", "tenant_id": "acme", "user_id": str(alice.user_id)}
    # Even a stale in-memory copy cannot move the subject: the scope follows the stored tenant.
    alice.tenant = other_tenant
    assert memory_scope(subject=Subject.objects.get(pk=alice.pk))["tenant_id"] == "acme"
    # And a subject key refuses the tampered body outright: subject keys cannot write at all.
    with pytest.raises(AuthorizationException):
        subject_es_client(subject=alice).index(index=all_aliases()[0], document=tampered)
