"""Use-count bookkeeping for recalled semantic facts, off the recall path.

Recall hands the ids to a small background pool and returns at once. A recall's bumps are one
read-modify-write round (an mget, then one bulk of updates under optimistic concurrency control,
``if_seq_no``/``if_primary_term``), retried for the facts that conflicted, so concurrent recalls in
any number of processes never lose an increment. The bumps do not delay the recall, but they
use the same CPUs: see the README's Speed and memory figures.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from django.db import close_old_connections, connection

from memory_app.es.schema import MemoryType, alias_name
from tenants.services import writer_es_client

log = logging.getLogger(__name__)

_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="engram-usage")
_pending: set[Future] = set()
_lock = threading.Lock()
MAX_ATTEMPTS = 50


def usage_record(*, ids: list[str], at: datetime, prefix: str | None = None) -> None:
    """Schedule a use-count bump for each semantic fact id (in the indices of ``prefix``, default
    the shared ones); returns immediately."""
    if not ids:
        return
    future = _pool.submit(_bump_in_thread, ids=ids, at=at, index=alias_name(MemoryType.SEMANTIC, prefix=prefix),
                          prefix=prefix)
    with _lock:
        _pending.add(future)
    future.add_done_callback(_finished)


def _bump_in_thread(**kwargs) -> int:
    # A pool thread outlives requests: like a request, it drops a connection that broke (a
    # database restart) before its work and closes its own after it, so none is kept stale.
    close_old_connections()
    try:
        return usage_bump(**kwargs)
    finally:
        connection.close()


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


def usage_bump(*, ids: list[str], at: datetime, index: str, prefix: str | None = None) -> int:
    """Add one to use_count (per occurrence in ``ids``) and move last_used_at forward to ``at``;
    returns how many increments were stored.

    Each round is one mget and one bulk request for all pending facts, every update guarded by
    the seq_no/primary_term it read; those that lost a race are read and tried again, up to
    MAX_ATTEMPTS rounds. Facts forgotten meanwhile are skipped.
    """
    writer = writer_es_client(prefix=prefix)
    pending = Counter(ids)
    stamp = at.isoformat()
    bumped = 0
    for _round in range(MAX_ATTEMPTS):
        if not pending:
            return bumped
        docs = writer.mget(index=index, ids=list(pending), source_includes=["use_count", "last_used_at"])["docs"]
        operations: list[dict] = []
        for doc in docs:
            if not doc.get("found"):
                del pending[doc["_id"]]
                continue
            src = doc["_source"]
            last = src.get("last_used_at")
            operations += [
                {"update": {"_index": index, "_id": doc["_id"], "if_seq_no": doc["_seq_no"],
                            "if_primary_term": doc["_primary_term"]}},
                {"doc": {"use_count": int(src.get("use_count") or 0) + pending[doc["_id"]],
                         "last_used_at": max(last, stamp) if last else stamp}},
            ]
        if not operations:
            return bumped
        for item in writer.bulk(operations=operations)["items"]:
            result = item["update"]
            if result["status"] == 409:
                continue  # lost a race: read again next round
            if result["status"] < 300:
                bumped += pending[result["_id"]]
            elif result["status"] != 404:
                log.error("use-count bump of %s failed: %s", result["_id"], result.get("error"))
            del pending[result["_id"]]
    if pending:
        log.warning("use-count bumps of %s gave up after %d conflicting rounds", list(pending), MAX_ATTEMPTS)
    return bumped
