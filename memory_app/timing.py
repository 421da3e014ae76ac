"""Where a request's time went, as a ``Server-Timing`` header (opt-in: ENGRAM_SERVER_TIMING).

Phases are named with ``timed`` (``refresh``, ``embed``, ``search``, ``write``) and the middleware
adds ``app``; ``refreshed`` flags a request that made or waited for a forced refresh. Off by
default because a refresh phase tells a tenant that someone wrote to the shared index a moment ago."""

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
