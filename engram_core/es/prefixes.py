"""The prefix every shared index name starts with, and the scratch prefix that the product's own
measurement (engram_eval) puts in its place inside one context."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings

_scratch_prefix: ContextVar[str | None] = ContextVar("engram_scratch_prefix", default=None)


def shared_prefix() -> str:
    """The prefix of the indices every shared tenant uses, from which every index name derives:
    ``ES_INDEX_PREFIX``, or the scratch prefix in force in the current context."""
    return _scratch_prefix.get() or settings.ES_INDEX_PREFIX


@contextmanager
def scratch_prefix(prefix: str) -> Iterator[str]:
    """Resolve ``shared_prefix`` to ``prefix`` inside the block, in the current context only (a
    context variable, not a setting: requests served by other threads keep the real prefix). The
    product's own measurement runs its world there. A thread pool's worker resolves the real
    prefix unless the work carries the context (``contextvars.copy_context``)."""
    token = _scratch_prefix.set(prefix)
    try:
        yield prefix
    finally:
        _scratch_prefix.reset(token)
