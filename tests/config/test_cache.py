"""One Redis client per process for the shared cache, whatever the number of requests."""

from __future__ import annotations

import os
import threading

import pytest
from asgiref.local import Local
from django.core.cache import CacheHandler

from config.cache import SharedRedisCache

BROKER = os.environ.get("CELERY_BROKER_URL", "")
pytestmark = pytest.mark.skipif(not BROKER.startswith("redis://"), reason="scripts/test starts Redis")


def test_every_request_context_uses_the_same_client_and_connection():
    location = BROKER.rsplit("/", 1)[0] + "/3"
    handler = CacheHandler({"default": {"BACKEND": "config.cache.SharedRedisCache", "LOCATION": location}})
    caches, clients = [], []

    def request(n: int) -> None:
        # A thread per request, as Django's ASGI handler ran sync views: each gets its own cache object.
        handler._connections = Local(handler.thread_critical)
        cache = handler["default"]
        cache.set(f"engram-test-{n}", n)
        assert cache.get(f"engram-test-{n}") == n
        caches.append(cache)
        clients.append(cache._cache)

    for n in range(5):
        thread = threading.Thread(target=request, args=(n,))
        thread.start()
        thread.join()
    assert len({id(c) for c in caches}) == 5  # Django's per-context objects
    assert len({id(c) for c in clients}) == 1  # one client, one pool
    pool = clients[0]._get_connection_pool(write=True)
    assert len(pool._available_connections) + len(pool._in_use_connections) == 1
    assert isinstance(caches[0], SharedRedisCache)
    # and one Redis object per pool: Django's client made one per cache call
    assert clients[0].get_client(write=True) is clients[0].get_client(write=True) is clients[0].get_client()
