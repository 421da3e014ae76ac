"""Health of Engram's dependencies: Elasticsearch (with its capabilities and our indices), the broker
and the shared cache."""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.core.cache import cache
from elasticsearch import ApiError, TransportError
from kombu import Connection
from redis.exceptions import RedisError

from engram_core.es.capabilities import probe_capabilities
from engram_core.es.client import monitor_client
from engram_core.es.schema import indices_present, vector_spaces
from memory_app.providers import get_embedder
from memory_app.outbox import outbox_backlog


def broker_status(*, timeout: float = 2.0) -> dict:
    url = settings.CELERY_BROKER_URL
    transport = url.split("://", 1)[0]
    try:
        with Connection(url, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS,
                        connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"; we report it, not swallow it
        return {"transport": transport, "reachable": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"transport": transport, "reachable": True}


def cache_status() -> tuple[dict, str | None]:
    """The shared cache (ENGRAM_CACHE_URL): its backend, whether it answers, and why not. Without
    it Engram degrades rather than fails: reads refresh the end-user's indices themselves and rate
    limits count per process (memory_app.freshness, api.auth)."""
    client = getattr(cache, "redis_client", None)
    if client is None:
        return {"backend": "local", "reachable": True}, None
    try:
        client().ping()
    except RedisError as exc:
        return {"backend": "redis", "reachable": False}, f"{type(exc).__name__}: {exc}"
    return {"backend": "redis", "reachable": True}, None


_cache_lock = threading.Lock()
_cached: tuple[float, tuple[bool, dict]] | None = None


def health_report_cached(*, cache_seconds: float, outbox_stale_seconds: float) -> tuple[bool, dict]:
    """``health_report``, reused for ``cache_seconds`` (ENGRAM_HEALTH_CACHE_SECONDS, read by the
    view): /healthz is unauthenticated, and a flood of it must not become a flood of cluster and
    broker probes. One probe at a time."""
    global _cached
    with _cache_lock:
        now = time.monotonic()
        if _cached is None or now - _cached[0] >= cache_seconds:
            _cached = (now, health_report(outbox_stale_seconds=outbox_stale_seconds))
        return _cached[1]


def health_cache_clear() -> None:
    global _cached
    with _cache_lock:
        _cached = None


def health_report(*, outbox_stale_seconds: float) -> tuple[bool, dict]:
    """(healthy, report). Healthy means: ES reachable, DLS enforceable, every index present and holding
    vectors of this process's embedder, broker up, and no outbox backlog older than
    ``outbox_stale_seconds`` (ENGRAM_OUTBOX_STALE_SECONDS). An unreachable shared cache leaves it healthy, ``degraded``."""
    caps = probe_capabilities()
    reasons = list(caps.errors)
    indices: dict[str, bool] = {}
    spaces: dict[str, str] = {}
    space = get_embedder().space
    if caps.reachable:
        es = monitor_client().options(request_timeout=3, max_retries=0)
        try:
            indices = indices_present(es=es)
            spaces = vector_spaces(es=es)
        except (ApiError, TransportError) as exc:
            reasons.append(f"could not list indices: {exc}")
        missing = [name for name, ok in indices.items() if not ok]
        if missing:
            reasons.append(f"indices missing: {', '.join(missing)} (run `manage.py es_setup`)")
        # Vectors of another embedder in an index would be compared with this process's query
        # vectors (and joined by its writes' vectors): recall degrades without an error.
        if other := sorted({s for s in spaces.values() if s != space}):
            reasons.append(f"indices hold vectors of {', '.join(map(repr, other))} and this process embeds with "
                           f"{space!r}: run `manage.py es_setup` to compute them again, or configure the embedder "
                           "that wrote them (ENGRAM_EMBEDDER, ENGRAM_EMBEDDER_RUNTIME)")
    broker = broker_status()
    if not broker["reachable"]:
        reasons.append(f"broker unreachable ({broker['transport']}): {broker['error']}")
    # Writes accepted during an outage wait in the outbox; a backlog that does not drain means
    # the cluster is still down or no Celery worker/beat is replaying it.
    outbox = outbox_backlog()
    age = outbox["oldest_pending_seconds"]
    if age is not None and age > outbox_stale_seconds:
        reasons.append(f"outbox backlog: {outbox['pending']} acknowledged writes waiting, the oldest for {age:.0f} s "
                       "(is Elasticsearch reachable and the Celery worker and beat running?)")
    shared_cache, cache_error = cache_status()
    # Not reasons to take the server out of rotation: it serves, only less cheaply, or an operator
    # has failed writes to look at.
    degraded = [f"cache unreachable: {cache_error}; every read refreshes the end-user's indices itself and rate "
                "limits are counted per process"] if cache_error else []
    if outbox["failed"]:
        degraded.append(f"outbox: {outbox['failed']} writes ended failed (see `manage.py outbox list`; retry or "
                        "discard each)")
    report = {
        "status": "unhealthy" if reasons else "degraded" if degraded else "ok",
        "elasticsearch": {
            "reachable": caps.reachable,
            "version": caps.version,
            "licence": caps.licence,
            "licence_status": caps.licence_status,
            "security": caps.security,
            "document_level_security": caps.dls,
        },
        "indices": indices,
        "vectors": {"embedder": space, "indices": spaces},
        "broker": broker,
        "cache": shared_cache,
        "outbox": outbox,
        "reasons": reasons,
        "degraded": degraded,
    }
    return not reasons, report
