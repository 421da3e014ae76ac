"""Use counts of recalled facts, kept in the database (``FactUsage``), off the recall path.

Recall overlays the counts on its hits (``usage_apply``); a background pool bumps them with one
atomic statement per group of ids, so no increment is lost and no fact document is re-indexed
for a bump. A forgotten fact gets no counter back."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from elasticsearch import Elasticsearch, helpers
from engram_core.db import as_request
from engram_core.es.schema import MemoryType, alias_name
from engram_core.threads import LazyPool
from memory_app.models import FactUsage
from tenants.models import Subject
from tenants.selectors import index_prefix_for
from tenants.services.clients import writer_es_client

log = logging.getLogger(__name__)

_pool = LazyPool(name="engram-usage")
_POOL_THREADS = 2
_pending: set[Future] = set()
_lock = threading.Lock()


def usage_record(*, ids: list[str], at: datetime, subject: Subject, prefix: str | None = None) -> None:
    """Schedule a use-count bump of each of ``subject``'s semantic facts in ``ids`` (in the
    indices of ``prefix``, default the shared ones); returns immediately."""
    if not ids:
        return
    # The writer client is resolved here, on the caller's connection: minted in a pool thread, its
    # key's audit row could wait on a row the caller's open transaction holds while the caller
    # waits on the bump (usage_flush), and neither would ever move.
    try:
        es = writer_es_client(prefix=prefix)
    except Exception as exc:  # noqa: BLE001 - a bump never fails the recall it follows (as in the pool)
        log.error("use-count bump failed: %s", exc)
        return
    future = _pool.get(workers=_POOL_THREADS).submit(_bump_in_thread, ids=ids, at=at, subject_id=subject.pk,
                                                    prefix=prefix, es=es)
    with _lock:
        _pending.add(future)
    future.add_done_callback(_finished)


def usage_record_recalled(*, subject: Subject, memories: Iterable[dict[str, Any]], at: datetime | None = None) -> None:
    """A recall's results were handed to an agent: schedule the bumps of the semantic facts among
    them (the REST and MCP recalls and a turn's pre-recall call this; a preview, an eval or a probe
    does not, so nothing it reads is counted as used)."""
    usage_record(ids=[m["id"] for m in memories if m.get("memory_type") == MemoryType.SEMANTIC.value],
                 at=at or timezone.now(), subject=subject, prefix=index_prefix_for(tenant=subject.tenant))


def _bump_in_thread(**kwargs) -> int:
    # A pool thread outlives requests: its connection is handled as a request's (as_request).
    return as_request(usage_bump, **kwargs)


def _finished(future: Future) -> None:
    with _lock:
        _pending.discard(future)
    if exc := future.exception():
        log.error("use-count bump failed: %s", exc)


def usage_flush(timeout: float | None = 30.0) -> None:
    """Wait for scheduled bumps (tests, evals, shutdown); ``timeout=None`` waits as long as they run."""
    with _lock:
        pending = list(_pending)
    for future in pending:
        future.result(timeout=timeout)


def _increment(*, ids: Iterable[str], n: int, at: datetime, subject_id: int) -> int:
    return FactUsage.objects.filter(pk__in=list(ids), subject_id=subject_id).update(
        use_count=F("use_count") + n, last_used_at=Greatest(F("last_used_at"), Value(at, output_field=DateTimeField())))


def usage_bump(*, ids: list[str], at: datetime, subject_id: int, prefix: str | None = None,
               es: Elasticsearch | None = None) -> int:
    """Add one to the use count of each fact (per occurrence in ``ids``) and move its
    ``last_used_at`` forward to ``at``; returns how many increments were stored. Facts that no
    longer exist (forgotten meanwhile) are skipped. ``es``: the writer client of ``prefix``
    (resolved here when not given)."""
    pending = Counter(ids)
    existing = set(FactUsage.objects.filter(pk__in=list(pending), subject_id=subject_id).values_list("pk", flat=True))
    by_count: dict[int, list[str]] = defaultdict(list)
    for memory_id, n in pending.items():
        if memory_id in existing:
            by_count[n].append(memory_id)
    bumped = sum(n * _increment(ids=group, n=n, at=at, subject_id=subject_id) for n, group in by_count.items())
    missing = [i for i in pending if i not in existing]
    if missing:
        docs = (es or writer_es_client(prefix=prefix)).mget(index=alias_name(MemoryType.SEMANTIC, prefix=prefix), ids=missing,
                                                     source_includes=["use_count"])["docs"]
        for doc in docs:
            if not doc.get("found"):
                continue  # forgotten since the recall
            memory_id, n = doc["_id"], pending[doc["_id"]]
            # A fact stored before counts moved here starts from the count its document holds.
            start = int(doc["_source"].get("use_count") or 0)
            try:
                with transaction.atomic():
                    FactUsage.objects.create(memory_id=memory_id, subject_id=subject_id, use_count=start + n,
                                             last_used_at=at)
            except IntegrityError:  # another recall created it first
                n = _increment(ids=[memory_id], n=n, at=at, subject_id=subject_id) * n
            bumped += n
    return bumped


def usage_counts(*, ids: Iterable[str]) -> dict[str, tuple[int, datetime]]:
    """``{fact id: (use_count, last_used_at)}`` for the ids that have a row."""
    ids = list(ids)
    if not ids:
        return {}
    return {pk: (count, last) for pk, count, last in
            FactUsage.objects.filter(pk__in=ids).values_list("memory_id", "use_count", "last_used_at")}


def usage_apply(sources: Mapping[str, dict[str, Any]]) -> None:
    """Overlay the stored counts on semantic facts' documents (``{id: source}``, changed in
    place): ``use_count`` and ``last_used_at`` from the fact's row where it has one."""
    facts = {i: s for i, s in sources.items() if s.get("memory_type") == MemoryType.SEMANTIC.value}
    rows = usage_counts(ids=facts)
    for memory_id, source in facts.items():
        if row := rows.get(memory_id):
            source["use_count"], source["last_used_at"] = row[0], row[1].isoformat()
        else:
            source["use_count"] = int(source.get("use_count") or 0)


def usage_forget(*, memory_ids: Iterable[str] = (), subject: Subject | None = None) -> int:
    """Delete the counters of forgotten facts, or all of an erased subject's."""
    rows = FactUsage.objects.filter(subject=subject) if subject is not None else \
        FactUsage.objects.filter(pk__in=list(memory_ids))
    return rows.delete()[0]


def usage_migrate(*, es: Elasticsearch, prefixes: Iterable[str]) -> int:
    """es_setup: copy the counts still held in fact documents (stored before counts moved to the
    database) into rows; a row that exists already is newer and kept. Returns rows created."""
    subjects = dict(Subject.objects.values_list("user_id", "pk"))
    created = 0
    for prefix in prefixes:
        rows = []
        for hit in helpers.scan(es, index=alias_name(MemoryType.SEMANTIC, prefix=prefix), size=1000,
                                query={"query": {"range": {"use_count": {"gt": 0}}},
                                       "_source": ["user_id", "use_count", "last_used_at", "created_at"]}):
            src = hit["_source"]
            subject_id = subjects.get(_as_uuid(src.get("user_id")))
            if subject_id is None:
                continue
            rows.append(FactUsage(memory_id=hit["_id"], subject_id=subject_id, use_count=int(src["use_count"]),
                                  last_used_at=datetime.fromisoformat(src.get("last_used_at") or src["created_at"])))
        existing = set(FactUsage.objects.filter(pk__in=[r.memory_id for r in rows]).values_list("pk", flat=True))
        new = [r for r in rows if r.memory_id not in existing]
        FactUsage.objects.bulk_create(new, batch_size=1000, ignore_conflicts=True)
        created += len(new)
    return created


def _as_uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
