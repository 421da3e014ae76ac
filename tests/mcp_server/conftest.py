from __future__ import annotations

import pytest

from engram_core.es.schema import MemoryType, alias_name
from mcp_server.handlers import Caller
from memory_app.usage import usage_flush
from tenants.models import Tenant
from tenants.services.tokens import agent_token_create

EVERY_SCOPE = ("memory:read", "memory:write", "memory:forget")


@pytest.fixture
def memory(es_prefix, invalidate_minted_keys):
    """Fresh memory indices; background use-count bumps finished before the keys go."""
    yield es_prefix
    usage_flush()


@pytest.fixture
def acme(db) -> Tenant:
    return Tenant.objects.create(slug="acme", name="Acme")


@pytest.fixture
def globex(db) -> Tenant:
    return Tenant.objects.create(slug="globex", name="Globex")


@pytest.fixture
def make_caller():
    """A Caller for a new agent token of ``tenant``, optionally pinned to one end-user (as by the URL)."""
    def make(tenant: Tenant, *, scopes=EVERY_SCOPE, subject: str | None = None) -> Caller:
        token, _plaintext = agent_token_create(tenant=tenant, name="agent", scopes=scopes, actor="test")
        return Caller(token=token, subject=subject)

    return make


@pytest.fixture
def count_docs(es_admin):
    """How many memory documents the indices hold (refreshed first): proves what was written."""
    def count() -> int:
        index = ",".join(alias_name(t) for t in MemoryType)
        es_admin.indices.refresh(index=index)
        return es_admin.count(index=index)["count"]

    return count
