from __future__ import annotations

import itertools

import pytest

from engram_core.es.schema import MemoryType, alias_name
from memory_app.usage import usage_flush
from tenants.models import Tenant
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes

_seq = itertools.count()


@pytest.fixture
def memory(es_prefix, invalidate_minted_keys):
    """Fresh memory indices; background use-count bumps finished before the keys go."""
    yield es_prefix
    usage_flush()


@pytest.fixture
def make_subject(memory):
    tenants: dict[str, Tenant] = {}

    def make(external_id: str | None = None, *, tenant: str = "acme"):
        if tenant not in tenants:
            tenants[tenant] = Tenant.objects.create(slug=tenant, name=tenant.title())
        return subject_get_or_create(tenant=tenants[tenant],
                                     external_id=external_id or f"user-{next(_seq)}",
                                     lifetimes=KeyLifetimes.from_settings())

    return make


@pytest.fixture
def subject(make_subject):
    return make_subject("alice")


@pytest.fixture
def count_docs(es_admin):
    """How many documents a memory type's index holds (refreshed first): proves what was written."""
    def count(memory_type: MemoryType = None) -> int:
        index = alias_name(memory_type) if memory_type else ",".join(alias_name(t) for t in MemoryType)
        es_admin.indices.refresh(index=index)
        return es_admin.count(index=index)["count"]

    return count
