"""The one place Elasticsearch clients come from.

A lazily built, cached base client carries the connection settings (URL, TLS, timeouts) and
no credential; callers derive a client per credential with ``.options()``, which shares the
base client's connection pool.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import orjson
from django.conf import settings
from elastic_transport import NodePool
from elasticsearch import Elasticsearch
from elasticsearch.serializer import JsonSerializer, NdjsonSerializer

from engram_core.observability.es import CountingNode, CountingTransport


class _OrjsonFirst:
    """orjson for bodies, falling back to the standard library's json for a body orjson refuses (a
    whole number beyond 64 bits, a lone surrogate: what the client wrote before orjson, so such a
    body meets Elasticsearch's answer as it did then, not a serialisation error that reads as an
    outage). Responses are read by orjson."""

    def json_dumps(self, data: Any) -> bytes:
        try:
            return orjson.dumps(data, default=self.default, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:  # orjson.JSONEncodeError is one
            return JsonSerializer.json_dumps(self, data)

    def json_loads(self, data: bytes) -> Any:
        return orjson.loads(data)


class OrjsonJsonSerializer(_OrjsonFirst, JsonSerializer):
    """JSON bodies written by orjson (as elasticsearch's OrjsonSerializer), see _OrjsonFirst."""


class OrjsonNdjsonSerializer(_OrjsonFirst, NdjsonSerializer):
    """``_bulk`` and ``_msearch`` bodies written line by line by orjson, see _OrjsonFirst."""


# Bodies carry vectors (384 floats per document or query): the standard library's json takes
# ~0.35 ms per vector to write them, orjson ~0.02 ms (the import's bulk requests, every recall's
# kNN legs). The client uses these for the compatibility mimetypes it sends as well.
SERIALIZERS = {"application/json": OrjsonJsonSerializer(), "application/x-ndjson": OrjsonNdjsonSerializer()}


def es_hosts(url: str) -> list[str]:
    """The nodes ``ES_URL`` names: one URL, or several separated by commas. The client spreads
    requests over them and sends a request that found its node gone to the next one."""
    return [part.strip() for part in url.split(",") if part.strip()]


class LockedNodePool(NodePool):
    """elastic-transport's pool, with one lock over choosing a node and marking one dead or alive:
    the library reads its live nodes while another thread may change them, and with a node lost
    under load a request failed with "dictionary changed size during iteration". Nothing waits on
    the network under the lock (a log line at most)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pool_lock = threading.RLock()  # get() resurrects under it

    def get(self):
        with self._pool_lock:
            return super().get()

    def resurrect(self, force: bool = False):
        with self._pool_lock:
            return super().resurrect(force)

    def mark_dead(self, node, _now: float | None = None) -> None:
        with self._pool_lock:
            super().mark_dead(node, _now)

    def mark_live(self, node) -> None:
        with self._pool_lock:
            super().mark_live(node)


@functools.cache
def base_client() -> Elasticsearch:
    return Elasticsearch(
        es_hosts(settings.ES_URL),
        node_pool_class=LockedNodePool,
        # Attempts, errors and retries counted for /metrics (engram_core.observability.es).
        node_class=CountingNode,
        transport_class=CountingTransport,
        serializers=SERIALIZERS,
        ca_certs=settings.ES_CA_CERTS,
        verify_certs=settings.ES_VERIFY_CERTS,
        request_timeout=request_timeout(),
        connections_per_node=settings.ES_CONNECTIONS_PER_NODE,
        retry_on_timeout=True,
        max_retries=2,
    )


@functools.cache
def request_timeout() -> float:
    """Seconds a request of this process's clients may take (``base_client``'s timeout, fixed for
    the process as the client is): a caller waiting for another's request (a refresh in flight,
    ``memory_app.freshness``) waits no longer."""
    return settings.ES_REQUEST_TIMEOUT


def admin_client() -> Elasticsearch:
    """The dedicated admin credential: schema setup and key upgrades, never a request path (keys
    are minted by ``keys_client``)."""
    return base_client().options(basic_auth=(settings.ES_ADMIN_USERNAME, settings.ES_ADMIN_PASSWORD))


def keys_client() -> Elasticsearch:
    """The keys credential: mints end-user and writer keys (on a request path: an end-user's first
    key) and shortens or invalidates the keys it minted. It can grant nothing beyond its own role
    (an API key is limited by its owner's privileges); unset, the admin credential does it."""
    if settings.ES_KEYS_USERNAME:
        return base_client().options(basic_auth=(settings.ES_KEYS_USERNAME, settings.ES_KEYS_PASSWORD))
    return admin_client()


def monitor_client() -> Elasticsearch:
    """The monitor-only credential: health and capability probes (cheap, read-only cluster state)."""
    if settings.ES_MONITOR_USERNAME:
        return base_client().options(basic_auth=(settings.ES_MONITOR_USERNAME, settings.ES_MONITOR_PASSWORD))
    return admin_client()


def audit_client() -> Elasticsearch | None:
    """The checkpoint credential: it may only create documents in the audit checkpoint index (no
    overwrite, update or delete), so what it wrote stays as it was. None when unconfigured."""
    if not settings.ES_AUDIT_USERNAME:
        return None
    return base_client().options(basic_auth=(settings.ES_AUDIT_USERNAME, settings.ES_AUDIT_PASSWORD))


def api_key_client(encoded_api_key: str) -> Elasticsearch:
    """A client acting as an API key (e.g. an end-user's document-level-security key)."""
    return base_client().options(api_key=encoded_api_key)


def reset_clients() -> None:
    """Drop the cached base client (settings changed, e.g. in tests)."""
    if base_client.cache_info().currsize:
        base_client().close()
    base_client.cache_clear()
    request_timeout.cache_clear()


# A forked process (a Celery pool's, say) must not share its parent's sockets: it builds its own client.
os.register_at_fork(after_in_child=base_client.cache_clear)


# Answers that mean "Elasticsearch cannot take this request now", as opposed to a refusal of it:
# overloaded or behind a failing gateway; 401, which a restarted node gives every credential until
# its security index is available again; and 403 cluster_block_exception, an index whose writes
# es_setup blocks while it copies it into its next version (``engram_core.es.schema``).
_BUSY = {429, 502, 503, 504}


def unavailable_answer(status: int, error_type: str | None) -> bool:
    """Whether an answer (a whole request's, or one bulk item's) means the cluster cannot take it now."""
    return status == 401 or status in _BUSY or (status == 403 and error_type == "cluster_block_exception")

