"""Where a request's time went, as a ``Server-Timing`` response header (opt-in: ENGRAM_SERVER_TIMING).

A recall or a turn names its phases (``timed``): ``refresh`` (``freshness.refresh_ensure``,
making the end-user's pending writes searchable: the marks, the check whether the last one is
searchable, and a forced refresh or the wait for one in flight), ``embed`` (the query vector),
``search`` (the recall's ``_msearch``) and, for a turn, ``write`` (its episode stored); the
middleware adds ``app``, the request's whole time inside Django (the rest of an HTTP client's
latency is the server's event loop, its hand-off to a thread, and the network). A
request that made or waited for a forced refresh also carries ``refreshed``. The middleware
(``memory_app.config.middleware.ServerTimingMiddleware``) writes what was recorded, e.g.
``Server-Timing: refresh;dur=11.2, embed;dur=19.6, search;dur=43.7``; ``scripts/bench --http``
(benchmarks/http_load.py) reads it to say which part of a recall's latency the slow ones spend where.

Off by default: the ``refresh`` phase of one tenant's request shows whether a refresh of the
shared index was in flight, i.e. that someone wrote a moment ago; latency alone says as much,
less plainly. A turn's recall runs on a pool thread; it records into the turn's timings
through ``bound``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Timings:
    """A request's phases (name -> milliseconds, summed when a phase repeats) and flags."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a turn's recall thread records beside the request thread
        self.durations: dict[str, float] = {}
        self.flags: set[str] = set()

    def add(self, name: str, ms: float) -> None:
        with self._lock:
            self.durations[name] = self.durations.get(name, 0.0) + ms

    def flag(self, name: str) -> None:
        with self._lock:
            self.flags.add(name)

    def header(self) -> str:
        """The ``Server-Timing`` value (W3C Server Timing: ``name;dur=ms``, a flag by name alone)."""
        with self._lock:
            parts = [f"{name};dur={ms:.1f}" for name, ms in self.durations.items()]
            parts += sorted(self.flags)
        return ", ".join(parts)


_current: ContextVar[Timings | None] = ContextVar("engram_timings", default=None)


def start() -> tuple[Timings, object]:
    """Record this context's phases from now on; returns the timings and the token ``stop`` takes."""
    timings = Timings()
    return timings, _current.set(timings)


def stop(token) -> None:
    _current.reset(token)


@contextmanager
def timed(name: str) -> Iterator[None]:
    """Add the block's duration to phase ``name`` of the current request (nothing when not recording)."""
    timings = _current.get()
    if timings is None:
        yield
        return
    began = time.perf_counter()
    try:
        yield
    finally:
        timings.add(name, (time.perf_counter() - began) * 1000)


def bound(fn: Callable) -> Callable:
    """``fn``, recording into the current request's timings on whatever thread calls it (only this
    module's context: a pool thread keeps its own database connection and everything else)."""
    timings = _current.get()
    if timings is None:
        return fn

    def call(*args, **kwargs):
        token = _current.set(timings)
        try:
            return fn(*args, **kwargs)
        finally:
            _current.reset(token)

    return call


def flag(name: str) -> None:
    """Mark the current request with ``name`` (nothing when not recording)."""
    if (timings := _current.get()) is not None:
        timings.flag(name)
