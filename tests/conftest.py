"""Shared fixtures: the real Elasticsearch node started by scripts/test, isolated per test.

Every test that touches Elasticsearch gets its own index prefix, set up through the same
schema code as production and dropped afterwards, so tests never see each other's documents.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from engram_core.es.capabilities import probe_capabilities
from engram_core.es.client import admin_client, base_client
from engram_core.es.schema import audit_checkpoints_ensure, drop_indices, ensure_indices
from tenants import audit_triggers
from tenants.es_keys import invalidate_keys
from tenants.models import SubjectKey, WriterKey
from tenants.services.clients import clear_caches

# The Hypothesis profile, the run's seed and the tally of bad inputs tried (tests/fuzzing.py).
pytest_plugins = ["tests.fuzzing"]


# `scripts/test --fast` runs the tests that need no service (marked `fast`, and the `properties`)
# with none started: a test that reaches for one fails, saying so, instead of waiting on a node.
FAST = os.environ.get("ENGRAM_TEST_FAST") == "1"


@pytest.fixture(scope="session")
def es_admin():
    if FAST:
        pytest.fail("this test needs Elasticsearch: it is no `fast` test (scripts/test --fast starts no service)")
    caps = probe_capabilities(timeout=10)
    if not caps.reachable:
        pytest.exit(f"the tests need the Elasticsearch node started by scripts/test: {caps.errors}", returncode=3)
    return admin_client()


@pytest.fixture
def es_prefix(es_admin, settings):
    """A fresh set of memory indices under a unique prefix, dropped after the test."""
    prefix = f"{settings.ES_INDEX_PREFIX}-{uuid.uuid4().hex[:8]}"
    settings.ES_INDEX_PREFIX = prefix
    ensure_indices(es=es_admin)
    yield prefix
    drop_indices(es=es_admin, prefix=prefix)


@pytest.fixture
def invalidate_minted_keys(db):
    """Keys a test mints live in Elasticsearch, outside the database rollback: invalidate them
    afterwards and drop the in-process key cache."""
    clear_caches()
    yield
    ids = list(SubjectKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
    ids += list(WriterKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
    invalidate_keys(key_ids=ids)
    clear_caches()


@pytest.fixture
def monitor_headers(settings) -> dict[str, str]:
    """What a monitor sends /healthz for the whole report (anyone else gets ok or unavailable)."""
    return {"Authorization": f"Bearer {settings.ENGRAM_MONITOR_TOKEN}"}


@pytest.fixture
def make_staff_user(db):
    """A staff user of no tenant."""
    from django.contrib.auth import get_user_model

    def make(username: str = "staffer"):
        return get_user_model().objects.create_user(username=username, password="pw", is_staff=True)

    return make


@pytest.fixture
def checkpoint_store(es_prefix, es_admin, monkeypatch):
    """The audit checkpoint index of the test's prefix, created as es_setup creates it. No
    credential of Engram's may delete it: the run's clean-up drops it as the node's superuser.
    The test's transaction never commits, so what the audit log does on commit (pin a new chain's
    keying event by its first checkpoint) runs at once (tests/tenants/services/test_audit.py
    checks it happens on commit)."""
    audit_checkpoints_ensure(es=es_admin)
    monkeypatch.setattr("tenants.services.audit.after_commit", lambda fn: fn())
    return es_prefix


def _superuser_client():
    """The node's `elastic` superuser, from the secret scripts/stack.py keeps (None without one)."""
    instance = os.environ.get("ENGRAM_STACK_INSTANCE")
    path = Path(settings.BASE_DIR) / ".engram" / "secrets" / f"es-{instance}-elastic-password"
    if not instance or not path.exists():
        return None
    return base_client().options(basic_auth=("elastic", path.read_text().strip()))


@pytest.fixture(scope="session", autouse=True)
def _drop_run_indices(request):
    yield
    if FAST or all(item.get_closest_marker("properties") for item in request.session.items):
        return  # `-m properties` and `--fast` run without any service
    try:
        drop_indices(es=admin_client(), prefix=settings.ES_INDEX_PREFIX)
        if (superuser := _superuser_client()) is not None:  # what admin may not drop: checkpoint stores
            drop_indices(es=superuser, prefix=settings.ES_INDEX_PREFIX)
    except Exception:  # noqa: BLE001 - best effort: the node may be down after a failed test
        pass


@pytest.fixture(scope="session", autouse=True)
def _sqlite_flush_past_audit_triggers(django_db_blocker):
    """A transactional test ends with a flush, which SQLite runs as DELETE: past the triggers that
    refuse it on audit events (PostgreSQL truncates, which they do not meet)."""
    from django.db import connection

    if connection.vendor != "sqlite":
        yield
        return
    flush = connection.ops.sql_flush

    def sql_flush(style, tables, **kwargs):
        statements = flush(style, tables, **kwargs)
        if audit_triggers.TABLE not in tables:
            return statements
        return [*audit_triggers.SQLITE_DROP, *statements, *audit_triggers.SQLITE_CREATE]

    connection.ops.sql_flush = sql_flush
    yield
    connection.ops.sql_flush = flush


# The fast tier (`scripts/test --fast`, marker `fast`): in these modules, every test that asks for
# no service fixture; anywhere, the properties of pure functions. A test here that reaches a
# service without asking fails in that run (no service is started), so the list cannot drift.
FAST_MODULES = (
    "tests/language/", "tests/embeddings/", "tests/engram_core/test_validation.py",
    "tests/engram_core/test_threads.py", "tests/config/test_serving.py", "tests/config/test_cache.py",
    "tests/tenants/test_audit_chain.py", "tests/tenants/test_crypto.py", "tests/memory_app/test_validation.py",
    "tests/memory_app/recall/test_rank.py", "tests/memory_app/recall/test_legs.py",
    "tests/memory_app/recall/test_read.py", "tests/memory_app/recall/test_options.py",
    "tests/memory_app/recall/test_explain.py", "tests/memory_app/recall/test_layers.py",
    "tests/memory_app/test_timing.py", "tests/memory_app/test_providers.py", "tests/consolidation/test_rules.py",
    "tests/consolidation/test_speech.py", "tests/api/test_parsers.py", "tests/test_layers.py", "tests/test_docs.py",
    "tests/engram_eval/test_durable_cv.py",
)
SERVICE_FIXTURES = frozenset({"es_admin", "shared_redis_cache", "live_server"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = item.nodeid.split("::")[0]
        if item.get_closest_marker("properties") is not None or (
                path.startswith(FAST_MODULES) and not SERVICE_FIXTURES.intersection(item.fixturenames)):
            item.add_marker(pytest.mark.fast)
    # Tests that stop or restart services run last, so a slow restart delays nobody else.
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


@pytest.fixture
def shared_redis_cache():
    """The shared Redis cache the product runs with (``config.cache``), on the Redis
    scripts/test starts (its database 4); skipped without one. Tests of this process's default
    cache get the same code paths with a process-local cache instead."""
    import os

    from django.core.cache import CacheHandler

    broker = os.environ.get("CELERY_BROKER_URL", "")
    if FAST:
        pytest.fail("this test needs Redis: it is no `fast` test (scripts/test --fast starts no service)")
    if not broker.startswith("redis://"):
        pytest.skip("no Redis: scripts/test starts one")
    return CacheHandler({"default": {"BACKEND": "config.cache.SharedRedisCache",
                                     "LOCATION": broker.rsplit("/", 1)[0] + "/4"}})["default"]
