"""Django's Redis cache with one client (and so one connection pool) per process.

Under ASGI Django builds a new ``RedisCache`` per request, and with it a new connection pool and
TCP connections to Redis; redis-py's clients and pools are thread-safe, so one per process and
location is shared here, with its ``Redis`` objects (Django builds one per cache call).
"""

from __future__ import annotations

import threading

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[tuple, RedisCacheClient] = {}
_lock = threading.Lock()


class ReusedClientRedisCacheClient(RedisCacheClient):
    """One ``Redis`` object per connection pool, made on first use (a ``Redis`` object only holds
    its pool and settings; commands borrow a connection from the pool, so threads can share it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._redis_clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._redis_clients.get(index)
        if client is None:
            client = self._redis_clients.setdefault(index, super().get_client(key, write=write))
        return client


class SharedRedisCache(RedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient

    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _lock:
            if key not in _clients:
                _clients[key] = self._class(self._servers, **self._options)
            return _clients[key]

    def redis_client(self):
        """The process's shared ``Redis`` client for this cache, for what the cache API cannot do
        atomically (the rate limit's log, ``api.auth``; the refresh marks,
        ``memory_app.freshness``)."""
        return self._cache.get_client(write=True)

    def redis_script(self, source: str):
        """A Lua script on that client, registered once per process (then sent by its digest,
        ``EVALSHA``); call it with ``keys=[...]`` (made with ``make_key``) and ``args=[...]``."""
        client = self.redis_client()
        key = (id(client), source)
        script = _scripts.get(key)
        if script is None:
            script = _scripts.setdefault(key, client.register_script(source))
        return script


_scripts: dict[tuple[int, str], object] = {}
