"""Read-your-writes without waiting for a refresh on the write's response path.

A write stored without a refresh marks its end-user "refresh pending" per memory type in the
shared cache; the end-user's next read refreshes those indices first, unless the named pending
document is already searchable. A read clears only the marks it made visible, and one forced
refresh of an index is in flight at a time across server processes (docs/performance.md says why)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from uuid import uuid4

from django.core.cache import cache
from elasticsearch import NotFoundError
from redis.exceptions import RedisError

from engram_core.es.client import request_timeout
from engram_core.es.schema import USER_TYPES, MemoryType, alias_name
from memory_app.timing import flag as timing_flag
from memory_app.timing import timed
from tenants.models import Subject
from tenants.selectors import index_prefix_for
from tenants.services.clients import writer_es_client

log = logging.getLogger(__name__)


def _key(subject: Subject, memory_type: MemoryType) -> str:
    # One mark per type of the subject's own memories (USER_TYPES; catalog entries are the
    # tenant's and wait for their refresh), so a pending fact does not hide a pending turn.
    return f"engram:refresh-pending:{subject.pk}:{memory_type.value}"


# A mark's value: the pending document's id (or "") and a token of the write that set it, so a
# read clears only the marks it made visible: a write landing while the read refreshes sets a new
# value, which stays for the next read (``_marks_clear``).
_TOKEN = "\x1f"
_marks_lock = threading.Lock()  # a cache of this process alone: its sets and clears, one at a time
# Delete each key whose value is still the one read (KEYS[i], ARGV[i]).
_CLEAR_UNCHANGED = """
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then redis.call('DEL', key) end
end
"""


def _redis():
    """The shared Redis client when the cache is Redis (``config.cache``), else None."""
    client = getattr(cache, "redis_client", None)
    return client() if client is not None else None


def _mark_set(key: str, memory_id: str, *, seconds: int) -> None:
    value = f"{memory_id}{_TOKEN}{uuid4().hex}"
    if (redis := _redis()) is not None:
        redis.set(cache.make_key(key), value, ex=seconds)
        return
    with _marks_lock:
        cache.set(key, value, timeout=seconds)


def _marks_get(keys: list[str]) -> dict[str, str]:
    if (redis := _redis()) is not None:
        values = redis.mget([cache.make_key(key) for key in keys])
        # (a value that is not text, e.g. set through Django's serializer by an older process, names
        # no document: the read refreshes, and the mark expires)
        return {key: value.decode(errors="replace") for key, value in zip(keys, values, strict=True)
                if value is not None}
    return cache.get_many(keys)


def _marks_clear(read: dict[str, str]) -> None:
    """Delete the marks ``read`` found, each only if no write has set it again since."""
    if _redis() is not None:
        cache.redis_script(_CLEAR_UNCHANGED)(keys=[cache.make_key(key) for key in read], args=list(read.values()))
        return
    with _marks_lock:
        current = cache.get_many(list(read))
        cache.delete_many([key for key, value in read.items() if current.get(key) == value])


def _pending_id(value: str) -> str:
    return value.rpartition(_TOKEN)[0] if _TOKEN in value else value  # a mark set before the token existed


_down_logged = 0.0  # when this process last said the shared cache was unreachable


def _cache_down(exc: Exception) -> None:
    """Say, at most once a minute per process, that the shared cache is unreachable: each read then
    refreshes the end-user's indices itself, each write whose mark cannot be kept its index."""
    global _down_logged
    if time.monotonic() - _down_logged > 60:
        _down_logged = time.monotonic()
        log.warning("the shared cache is unreachable (%s: %s); refreshing on read instead of marking writes",
                    type(exc).__name__, exc)


def refresh_defer(*, subject: Subject, memory_type: MemoryType, seconds: int, memory_id: str = "") -> None:
    """Record that ``subject`` has a write in ``memory_type`` not yet visible to search; call it once
    the write is stored, never before: a read refreshing between the mark and the write would
    clear the mark before there was anything to see. Name the document (``memory_id``) only when
    the write was its creation, the last write to that index for it: then the next read may skip
    the refresh once that document is searchable. Without a name (an update, a supersession, an
    import), the next read refreshes. The mark lives ``seconds`` (``Limits.pending_seconds``): a
    read after that refreshes only on the index's own schedule. With the shared cache unreachable,
    the write is made visible now instead."""
    try:
        _mark_set(_key(subject, memory_type), memory_id, seconds=seconds)
    except RedisError as exc:
        _cache_down(exc)
        prefix = index_prefix_for(tenant=subject.tenant)
        _refresh_now(writer_es_client(prefix=prefix), alias_name(memory_type, prefix=prefix))


def refresh_ensure(*, subject: Subject) -> bool:
    """Make the subject's deferred writes visible before a read: for each memory type with a
    pending write not yet searchable, a refresh of its index (one request for all; for pending
    documents named, shared with a refresh in flight, ``_refresh_shared``). Returns whether a
    refresh was made or waited for. In a request with Server-Timing (memory_app.timing), its
    time counts as ``refresh``, and a refresh made or waited for flags the request ``refreshed``."""
    with timed("refresh"):
        refreshed = _pending_made_visible(subject)
    if refreshed:
        timing_flag("refreshed")
    return refreshed


def refresh_force(*, subject: Subject, types: tuple[MemoryType, ...] = USER_TYPES) -> None:
    """Make every write of the subject acknowledged so far searchable now, whatever the marks say:
    for a reader in another process (a Celery worker), whose cache may not hold the marks of the
    writes it must see, and that reads rarely enough for a refresh of its own."""
    prefix = index_prefix_for(tenant=subject.tenant)
    _refresh_now(writer_es_client(prefix=prefix), ",".join(alias_name(t, prefix=prefix) for t in types))


def _pending_made_visible(subject: Subject) -> bool:
    keys = {_key(subject, t): t for t in USER_TYPES}
    try:
        pending = _marks_get(list(keys))
    except RedisError as exc:  # the marks cannot be read: whatever was written, this read sees it
        _cache_down(exc)
        refresh_force(subject=subject)
        return True
    if not pending:
        return False
    refreshed = False
    prefix = index_prefix_for(tenant=subject.tenant)
    writer = writer_es_client(prefix=prefix)  # always of the current grant (ROLE_VERSION), which refreshes
    unnamed, named = [], {}
    for key, value in pending.items():
        index, memory_id = alias_name(keys[key], prefix=prefix), _pending_id(value)
        if not memory_id:
            unnamed.append(index)
        elif not _searchable(writer, index=index, memory_id=memory_id):
            named[index] = memory_id
        # else: a periodic refresh made it searchable already
    if unnamed:  # nothing to ask whether a refresh in flight covered it: a refresh of its own
        _refresh_now(writer, ",".join(sorted(unnamed + list(named))))
        refreshed = True
    elif named:
        _refresh_shared(writer, named)
        refreshed = True
    try:
        _marks_clear(pending)
    except RedisError as exc:  # they expire; a later read refreshes once more than it needed
        _cache_down(exc)
    return refreshed


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)


_flights: dict[str, _Flight] = {}  # a forced refresh in flight in this process, by the indices it refreshes
_flights_lock = threading.Lock()


def _refresh_now(writer, indices: str) -> None:
    writer.indices.refresh(index=indices)


def _refresh_shared(writer, named: dict[str, str]) -> None:
    """Make each document of ``named`` (index -> its newest pending document) searchable with at
    most one forced refresh of those indices in flight: a caller that finds one in flight, in this
    process or another (``_lead``), waits for it (up to the clients' ``request_timeout``), then refreshes only
    if its documents are still not searchable (written after that refresh began). The document's
    own get decides, so no clock is trusted."""
    key = ",".join(sorted(named))
    while True:
        with _flights_lock:
            flight = _flights.get(key)
            leading = flight is None
            if flight is None:
                flight = _flights[key] = _Flight()
        if leading:
            try:
                covered = _lead(writer, key)
            finally:
                with _flights_lock:
                    del _flights[key]
                flight.done.set()
            if covered:
                return
        else:
            flight.done.wait(timeout=request_timeout())
        named = {index: memory_id for index, memory_id in named.items()
                 if not _searchable(writer, index=index, memory_id=memory_id)}
        if not named:
            return
        key = ",".join(sorted(named))


# A forced refresh in flight in some server process: its key holds the leader's token meanwhile
# (expiring after the clients' ``request_timeout``, should the leader die). Released only by its leader
# (``_CLEAR_UNCHANGED``: deleted if it still holds that token).
_FLIGHT_POLL_SECONDS = 0.005  # how often a read waiting for another process's refresh asks the cache


def _flight_key(indices: str) -> str:
    """The shared cache's key (made, with the cache's prefix) of a forced refresh of ``indices`` in flight."""
    return cache.make_key(f"engram:refresh-flight:{indices}")


def _lead(writer, indices: str) -> bool:
    """Refresh ``indices``, unless another server process has a refresh of them in flight (the
    shared cache says so): then wait until it is done instead. Returns True when this call
    refreshed (every write acknowledged before is searchable), False when it waited for another
    process's refresh, which may have begun before the caller's write (the caller asks again)."""
    if (redis := _redis()) is None:  # a cache of this process alone: no other process to share with
        _refresh_now(writer, indices)
        return True
    key, token = _flight_key(indices), uuid4().hex
    timeout = request_timeout()
    try:
        while True:
            if redis.set(key, token, nx=True, px=max(1, int(timeout * 1000))):
                try:
                    _refresh_now(writer, indices)
                finally:
                    cache.redis_script(_CLEAR_UNCHANGED)(keys=[key], args=[token])
                return True
            if (other := redis.get(key)) is not None:  # (None: released meanwhile, so try to lead)
                _other_flight_wait(redis, key, other, deadline=time.monotonic() + timeout)
                return False
    except RedisError as exc:  # no flight to share without the cache: a refresh of its own
        _cache_down(exc)
        _refresh_now(writer, indices)
        return True


def _other_flight_wait(redis, key: str, flight: bytes, *, deadline: float) -> None:
    """Wait until the flight ``key`` names is no longer ``flight`` (done, or expired)."""
    while redis.get(key) == flight and time.monotonic() < deadline:
        time.sleep(_FLIGHT_POLL_SECONDS)


def _searchable(writer, *, index: str, memory_id: str) -> bool:
    """Whether a search can see the document already: a get from the searcher (not the
    translog). A 404 is caught rather than asked to be ignored (``.options()`` builds a new
    client object per call, on every read after a write)."""
    try:
        return bool(writer.get(index=index, id=memory_id, realtime=False, source=False).get("found"))
    except NotFoundError:
        return False
