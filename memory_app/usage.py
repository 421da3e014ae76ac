"""Use-count bookkeeping for recalled semantic facts, off the recall path.

Recall hands the ids to a small background pool and returns at once. Each bump is a
read-modify-write with optimistic concurrency control (``if_seq_no``/``if_primary_term``),
retried on conflict, so concurrent recalls in any number of processes never lose an increment.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from elasticsearch import ConflictError, NotFoundError

from memory_app.es.schema import MemoryType, alias_name
from tenants.services import writer_es_client

log = logging.getLogger(__name__)

_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="engram-usage")
_pending: set[Future] = set()
_lock = threading.Lock()
MAX_ATTEMPTS = 50


def usage_record(*, ids: list[str], at: datetime) -> None:
    """Schedule a use-count bump for each semantic fact id; returns immediately."""
    if not ids:
        return
    future = _pool.submit(usage_bump, ids=ids, at=at, index=alias_name(MemoryType.SEMANTIC))
    with _lock:
        _pending.add(future)
    future.add_done_callback(_finished)


def _finished(future: Future) -> None:
    with _lock:
        _pending.discard(future)
    if exc := future.exception():
        log.error("use-count bump failed: %s", exc)


def usage_flush(timeout: float = 30.0) -> None:
    """Wait for scheduled bumps (tests, evals, shutdown)."""
    with _lock:
        pending = list(_pending)
    for future in pending:
        future.result(timeout=timeout)


def usage_bump(*, ids: list[str], at: datetime, index: str) -> int:
    """Increment use_count and set last_used_at on each fact; returns how many were bumped."""
    writer = writer_es_client()
    bumped = 0
    for memory_id in ids:
        for _attempt in range(MAX_ATTEMPTS):
            try:
                doc = writer.get(index=index, id=memory_id, source_includes=["use_count", "last_used_at"])
            except NotFoundError:
                break  # forgotten meanwhile
            src = doc["_source"]
            last = src.get("last_used_at")
            try:
                writer.update(index=index, id=memory_id, if_seq_no=doc["_seq_no"],
                              if_primary_term=doc["_primary_term"],
                              doc={"use_count": int(src.get("use_count") or 0) + 1,
                                   "last_used_at": max(last, at.isoformat()) if last else at.isoformat()})
            except ConflictError:
                continue
            except NotFoundError:
                break
            bumped += 1
            break
        else:
            log.warning("use-count bump of %s gave up after %d conflicts", memory_id, MAX_ATTEMPTS)
    return bumped
