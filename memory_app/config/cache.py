"""Django's Redis cache with one client (and so one connection pool) per process.

Django keeps cache objects per request context: under ASGI every request builds a new
``RedisCache``, whose client builds a new connection pool, so every request opened (and then
dropped) its own TCP connections to Redis: a connect and a health check per request, about a
tenth of a worker's samples under load (py-spy, ``scripts/bench --http``). redis-py's clients
and pools are thread-safe, so one per process and location is shared here.
"""

from __future__ import annotations

import threading

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[tuple, RedisCacheClient] = {}
_lock = threading.Lock()


class SharedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _lock:
            if key not in _clients:
                _clients[key] = self._class(self._servers, **self._options)
            return _clients[key]
