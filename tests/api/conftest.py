"""API test fixtures: one set of memory indices per test module (creating them costs seconds),
a fresh tenant per test (catalog entries are tenant-wide), tokens with chosen scopes, and the
typed client talking to the application in-process through httpx's WSGI transport."""

from __future__ import annotations

import itertools
import uuid
from contextlib import contextmanager

import httpx
import pytest
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.core.wsgi import get_wsgi_application
from django.test import override_settings
from rest_framework.test import APIClient

from engram_client import EngramClient
from engram_core.es.client import base_client
from engram_core.es.schema import MemoryType, alias_name, drop_indices, ensure_indices
from memory_app.usage import usage_flush
from tenants.models import AgentToken, Tenant
from tenants.services.clients import clear_caches
from tenants.services.tokens import agent_token_create

ALL_SCOPES = [s.value for s in AgentToken.Scope]
_seq = itertools.count()


@pytest.fixture(scope="module")
def module_indices(es_admin):
    from django.conf import settings

    prefix = f"{settings.ES_INDEX_PREFIX}-api-{uuid.uuid4().hex[:8]}"
    with override_settings(ES_INDEX_PREFIX=prefix):
        ensure_indices(es=es_admin)
        yield prefix
    drop_indices(es=es_admin, prefix=prefix)


@pytest.fixture
def memory(module_indices, invalidate_minted_keys):
    cache.clear()  # throttle counters
    yield module_indices
    # No time limit: a bump still running when the test's database closes fails the next test's
    # database access (each bump ends by the Elasticsearch client's own timeout).
    usage_flush(timeout=None)


@pytest.fixture
def tenant(memory) -> Tenant:
    n = next(_seq)
    return Tenant.objects.create(slug=f"t{n}-{uuid.uuid4().hex[:6]}", name=f"Tenant {n}")


@pytest.fixture
def make_token(tenant):
    def make(*scopes: str, of: Tenant | None = None) -> str:
        _, raw = agent_token_create(tenant=of or tenant, name="test agent",
                                    scopes=scopes or ALL_SCOPES, actor="tests")
        return raw

    return make


@pytest.fixture
def api(make_token) -> APIClient:
    """DRF's test client with an all-scopes token of ``tenant``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token()}")
    return client


def in_process_app():
    """Django's WSGI app for in-process requests that, as Django's test client does, never close
    the test's database connection (on PostgreSQL that would end the test transaction; SQLite in
    memory ignores it). The signal is detached per request, because Django's own test client
    re-attaches it after each of its requests."""
    inner = get_wsgi_application()

    def app(environ, start_response):
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            result = inner(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()  # sends request_finished, while detached
            return [body]
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    return app


@pytest.fixture
def make_client(make_token):
    """The typed client, in-process (WSGI transport: same thread, same test transaction)."""
    app = in_process_app()
    clients = []

    def make(*scopes: str, of: Tenant | None = None, retries: int = 0) -> EngramClient:
        client = EngramClient("http://testserver", make_token(*scopes, of=of), retries=retries,
                              transport=httpx.WSGITransport(app=app))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def engram(make_client) -> EngramClient:
    return make_client()


@pytest.fixture
def es_down(settings):
    """Elasticsearch unreachable (a closed port) until ``restore()``; restored at teardown anyway."""
    url = settings.ES_URL

    class Outage:
        def __init__(self):
            self.down = False

        def start(self):
            settings.ES_URL = "http://127.0.0.1:9"
            self._reset()
            self.down = True

        def restore(self):
            settings.ES_URL = url
            self._reset()
            self.down = False

        @staticmethod
        def _reset():
            # Not reset_clients(): closing the cached client would close the session's es_admin too.
            base_client.cache_clear()
            clear_caches()

    outage = Outage()
    yield outage
    if outage.down:
        outage.restore()


@pytest.fixture
def docs(es_admin):
    """The documents of one subject in a memory index, oldest first (via the admin credential)."""
    def read(memory_type: MemoryType, *, user_id=None) -> list[dict]:
        index = alias_name(memory_type)
        es_admin.indices.refresh(index=index)
        query = {"term": {"user_id": str(user_id)}} if user_id else {"match_all": {}}
        hits = es_admin.search(index=index, query=query, size=1000, sort=[{"created_at": "asc"}],
                               source_excludes=["embedding"])["hits"]["hits"]
        return [{"id": h["_id"], **h["_source"]} for h in hits]

    return read


@contextmanager
def slow_refresh(es_admin):
    """Only an explicit refresh makes a write searchable while inside (refresh interval 60 s; every
    type's alias leads to the one index). Restored to the configured interval."""
    from django.conf import settings as django_settings

    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": "60s"})
    try:
        yield index
    finally:
        es_admin.indices.put_settings(index=index,
                                      settings={"index.refresh_interval": django_settings.ES_REFRESH_INTERVAL})
