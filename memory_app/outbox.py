"""Subject writes that survive an Elasticsearch outage.

``write_submit`` applies a write at once or, when Elasticsearch is unreachable (or earlier
writes of the same subject are still queued), accepts it into the outbox: a database row,
committed before the caller is answered, that carries the id the memory will get.
``outbox_replay`` (Celery: ``memory_app.tasks.replay_outbox``) applies queued writes in order,
one replayer at a time, idempotently: a create whose id already exists is done, a forget of a
memory already gone is done, an import skips the episodes already stored.

Guarantees: an accepted write is applied once, after every write of the same subject accepted
before it. One that turns out to be invalid at replay (e.g. it supersedes a memory that does
not exist) is marked failed with its error; any other failure is retried, never given up. Known limit: a playbook
outcome whose update reached Elasticsearch but whose answer was lost to the outage is counted
again on replay (the playbook document carries no outcome id to recognise it by).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import Count, Min
from django.utils import timezone
from elasticsearch import ApiError, ConnectionError, ConnectionTimeout, SSLError

from engram_core.errors import Conflict, EngramError, NotFound, ServiceUnavailable, ValidationFailed
from memory_app import selectors, services
from memory_app.es.schema import MemoryType
from memory_app.freshness import refresh_ensure
from memory_app.models import OutboxEntry, OutboxLease
from memory_app.validation import clean_k, clean_types
from tenants.models import AgentToken, AuditEvent, Subject, Tenant
from tenants.selectors import subject_get
from tenants.services import (
    audit_record,
    subject_es_client,
    subject_get_or_create,
    writer_es_client,
    writer_prefix,
)

log = logging.getLogger(__name__)

Op = OutboxEntry.Operation
_CREATES = {Op.EPISODE: MemoryType.EPISODIC, Op.FACT: MemoryType.SEMANTIC, Op.PLAYBOOK: MemoryType.PROCEDURAL}
_ES_BUSY = {429, 502, 503, 504}
_LEASE = "replay"
# Conflicts that no retry resolves: the id is taken by a document the write did not create.
_PERMANENT_CONFLICTS = {"import_failed", "conflict"}
EPISODE_ROLES = services.EPISODE_ROLES


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` means "Elasticsearch cannot take requests right now" (unreachable, still
    starting, overloaded, or unable to enforce isolation), as opposed to a refusal of this request.
    Writes meeting such an error are queued; a replay meeting one stops and tries again later."""
    if isinstance(exc, ServiceUnavailable):
        return True
    if isinstance(exc, SSLError):  # a TLS misconfiguration is not an outage
        return False
    if isinstance(exc, (ConnectionError, ConnectionTimeout)):
        return True
    # 401: a restarted node refuses every credential until its security index is available again.
    return isinstance(exc, ApiError) and (exc.meta.status == 401 or exc.meta.status in _ES_BUSY)


def outage_error(exc: BaseException) -> ServiceUnavailable:
    """The one answer to an outage, for every interface (REST, MCP, a turn's recall)."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    return ServiceUnavailable("Elasticsearch is unreachable; retry later", code="elasticsearch_unreachable")


# ---------------------------------------------------------------- submitting


@dataclass(frozen=True)
class Submitted:
    """What became of a write: applied now (``result``), or queued (``entry``). ``memory_id`` is
    the id of the memory the write creates or targets, known either way."""

    memory_id: str = ""
    result: dict[str, Any] | None = None
    entry: OutboxEntry | None = None

    @property
    def queued(self) -> bool:
        return self.entry is not None


def write_submit(*, tenant: Tenant, external_id: str, operation: str, payload: dict[str, Any],
                 memory_id: str = "", token: AgentToken | None = None, actor: str = "api",
                 background: bool = False, defer_refresh: bool = False) -> Submitted:
    """Apply a write for the subject ``external_id`` of ``tenant`` now, or accept it into the outbox.

    The payload is validated first (ValidationFailed: nothing accepted). Queued when
    ``background`` is set, when earlier writes of the subject are still queued (order), or when
    Elasticsearch turns out to be unavailable during the attempt. Errors that are not an outage
    (NotFound, Conflict, ...) are raised as they are.
    """
    operation = Op(operation)
    services.write_validate(operation=operation, payload=payload)
    external_id = services.external_id_validate(external_id)
    if operation in _CREATES and not memory_id:
        memory_id = services.new_memory_id()
    payload = _stamped(operation, payload)
    queue = dict(tenant=tenant, external_id=external_id, operation=operation, payload=payload,
                 memory_id=memory_id, token=token, actor=actor)
    if background:
        return Submitted(memory_id=memory_id, entry=_enqueue(**queue, reason=OutboxEntry.Reason.BACKGROUND))
    if outbox_has_pending(tenant=tenant, external_id=external_id):
        return Submitted(memory_id=memory_id, entry=_enqueue(**queue, reason=OutboxEntry.Reason.BACKLOG))
    try:
        result = _apply(tenant=tenant, external_id=external_id, operation=operation, payload=payload,
                        memory_id=memory_id, actor=token or actor, defer_refresh=defer_refresh)
    except Exception as exc:
        if not is_outage(exc):
            raise
        log.warning("Elasticsearch unavailable (%s: %s); %s write for %s/%s accepted into the outbox",
                    type(exc).__name__, exc, operation, tenant.slug, external_id)
        return Submitted(memory_id=memory_id,
                         entry=_enqueue(**queue, reason=OutboxEntry.Reason.OUTAGE, after_failure=True))
    return Submitted(memory_id=memory_id, result=result)


@dataclass(frozen=True)
class TurnResult:
    submitted: Submitted
    recall: list[dict[str, Any]] | None  # None: recall was not possible (see recall_error)
    recall_error: EngramError | None = None


# A turn's pre-recall runs here while the request thread writes the turn.
_turn_recalls = ThreadPoolExecutor(max_workers=settings.ENGRAM_TURN_RECALL_THREADS, thread_name_prefix="turn-recall")


def _recall_in_thread(**kwargs) -> list[dict[str, Any]]:
    # The recall itself needs no database (the caller resolved the subject and its client); if
    # anything does open a connection in this long-lived thread, it is closed, never kept stale.
    close_old_connections()
    try:
        return selectors.memory_recall(**kwargs)
    finally:
        connection.close()


def turn_submit(*, tenant: Tenant, external_id: str, text: str, memory_id: str = "", token: AgentToken | None = None,
                occurred_at: datetime | str | None = None, session_id: str | None = None,
                context: str | None = None, metadata: dict | None = None, k: int = 5,
                types: list[str] | None = None, include_superseded: bool = False,
                explain: bool = False) -> TurnResult:
    """Store the verbatim user turn as an episode and recall on the same text (its first
    ``ENGRAM_MAX_QUERY_CHARS`` characters), leaving out the turn itself. For a known end-user the
    recall runs on a pool thread while this thread writes (the turn is left out of the recall
    either way, so neither waits for the other); a new end-user's recall follows its first write.
    The write decides the outcome: once it is applied or queued, a recall failure is reported in
    ``recall_error`` instead of being raised (the turn must not be sent again)."""
    clean_k(k)
    clean_types(types)
    payload = {"text": text, "occurred_at": occurred_at, "role": "user", "session_id": session_id,
               "context": context, "metadata": metadata}
    services.write_validate(operation=Op.EPISODE, payload=payload)  # a bad turn starts no recall either
    known = Subject.objects.filter(tenant=tenant, external_id=external_id).select_related("tenant").first()
    # Earlier turns stored without waiting must be visible to this turn's derived context and to
    # its recall; this turn need not be (it is left out of the recall anyway), so its write does
    # not wait for a refresh either.
    if known is not None:
        try:
            refresh_ensure(subject=known)  # one refresh, when one is pending, serves both below
        except Exception as exc:
            if not is_outage(exc):
                raise  # in an outage the write below is accepted into the outbox, the mark kept
    recall = dict(query=text.strip()[:settings.ENGRAM_MAX_QUERY_CHARS], k=min(k + 1, settings.ENGRAM_RECALL_MAX_K),
                  types=types, include_superseded=include_superseded, explain=explain, ensure_fresh=False)
    concurrent: Future | None = None
    if known is not None:
        try:
            concurrent = _turn_recalls.submit(_recall_in_thread, subject=known,
                                              es=subject_es_client(subject=known), **recall)
        except Exception as exc:  # no client (e.g. an outage): the recall below reports it
            log.info("turn recall not started concurrently: %s", exc)
    submitted = write_submit(tenant=tenant, external_id=external_id, operation=Op.EPISODE, payload=payload,
                             memory_id=memory_id, token=token, defer_refresh=True)
    try:
        if concurrent is not None:
            hits = concurrent.result()
        else:
            subject = subject_get(tenant=tenant, external_id=external_id)
            hits = selectors.memory_recall(subject=subject, **recall)
    except NotFound:  # the subject exists only in the outbox so far: nothing to recall
        return TurnResult(submitted=submitted, recall=[])
    except Exception as exc:
        if is_outage(exc):
            return TurnResult(submitted=submitted, recall=None,
                              recall_error=exc if isinstance(exc, EngramError) else outage_error(exc))
        log.exception("pre-recall failed after the turn was stored")
        return TurnResult(submitted=submitted, recall=None,
                          recall_error=EngramError("recall failed", code="recall_failed"))
    return TurnResult(submitted=submitted, recall=[h for h in hits if h["id"] != submitted.memory_id][:k])


def outbox_has_pending(*, tenant: Tenant, external_id: str) -> bool:
    return OutboxEntry.objects.filter(tenant=tenant, external_id=external_id,
                                      status=OutboxEntry.Status.PENDING).exists()


def _stamped(operation: Op, payload: dict[str, Any]) -> dict[str, Any]:
    """Every default fixed at acceptance: a write replayed later is dated when it was accepted."""
    if operation is Op.OUTCOME:
        return {**payload, "operation_id": payload.get("operation_id") or services.new_memory_id()}
    if operation not in (*_CREATES, Op.IMPORT):
        return payload
    now = timezone.now().isoformat()
    stamped = {**payload, "accepted_at": payload.get("accepted_at") or now}
    if operation is Op.EPISODE and not payload.get("occurred_at"):
        stamped["occurred_at"] = stamped["accepted_at"]
    return stamped


def _enqueue(*, tenant: Tenant, external_id: str, operation: Op, payload: dict[str, Any], memory_id: str,
             token: AgentToken | None, actor: str, reason: str, after_failure: bool = False) -> OutboxEntry:
    entry = OutboxEntry.objects.create(
        tenant=tenant, external_id=external_id, operation=operation, payload=payload, memory_id=memory_id,
        token=token, actor=_actor_label(token) if token else actor, reason=reason, after_failure=after_failure)
    if reason != OutboxEntry.Reason.OUTAGE:  # during an outage a replay now is pointless: beat retries
        transaction.on_commit(_kick)
    return entry


def _kick() -> None:
    from memory_app.tasks import replay_outbox

    try:
        replay_outbox.apply_async(retry=False)
    except Exception as exc:  # noqa: BLE001 - the entry is safe in the database; the periodic replay takes it
        log.warning("could not enqueue an outbox replay (%s: %s); the periodic replay will apply it",
                    type(exc).__name__, exc)


def _actor_label(token: AgentToken) -> str:
    return f"{token.prefix} ({token.name})"[:200]


# ---------------------------------------------------------------- applying


def _apply(*, tenant: Tenant, external_id: str, operation: Op, payload: dict[str, Any], memory_id: str,
           actor: AgentToken | str, progress: Callable[[int, int], None] | None = None,
           defer_refresh: bool = False) -> dict[str, Any]:
    """Run one write through its service. Returns a JSON-able summary."""
    p = payload
    if operation in (Op.OUTCOME, Op.FORGET, Op.ERASE):
        subject = subject_get(tenant=tenant, external_id=external_id)
    else:
        subject = subject_get_or_create(tenant=tenant, external_id=external_id, actor=actor)

    if operation is Op.EPISODE:
        memory = services.episode_write(subject=subject, memory_id=memory_id, text=p["text"],
                                        occurred_at=p.get("occurred_at"), role=p.get("role", "user"),
                                        session_id=p.get("session_id"), context=p.get("context"),
                                        metadata=p.get("metadata"), accepted_at=p.get("accepted_at"),
                                        source=p.get("source", "agent"), defer_refresh=defer_refresh)
        return {"memory": memory}
    if operation is Op.FACT:
        memory = services.fact_write(subject=subject, memory_id=memory_id, text=p["text"],
                                     confidence=p.get("confidence", 1.0), supersedes=p.get("supersedes"),
                                     contradiction=p.get("contradiction", "natural"),
                                     supporting_episode_ids=p.get("supporting_episode_ids"),
                                     metadata=p.get("metadata"), accepted_at=p.get("accepted_at"),
                                     source=p.get("source", "agent"))
        return {"memory": memory}
    if operation is Op.PLAYBOOK:
        memory = services.playbook_write(subject=subject, memory_id=memory_id, trigger=p["trigger"],
                                         steps=p["steps"], supersedes=p.get("supersedes"),
                                         contradiction=p.get("contradiction", "natural"),
                                         confidence=p.get("confidence", 1.0), metadata=p.get("metadata"),
                                         accepted_at=p.get("accepted_at"), source=p.get("source", "agent"))
        return {"memory": memory}
    if operation is Op.OUTCOME:
        memory = services.playbook_outcome_record(subject=subject, playbook_id=memory_id, success=p["success"],
                                                  refined_steps=p.get("refined_steps"),
                                                  operation_id=p.get("operation_id"), actor=actor)
        return {"memory": memory}
    if operation is Op.FORGET:
        services.memory_forget(subject=subject, memory_id=memory_id, reason=p["reason"], actor=actor)
        return {}
    if operation is Op.IMPORT:
        ids = services.episodes_import(subject=subject, episodes=p["episodes"], progress=progress,
                                       accepted_at=p.get("accepted_at"))
        return {"ids": ids}
    if operation is Op.ERASE:
        deleted = services.subject_erase(subject=subject, actor=actor)
        return {"documents_deleted": deleted}
    raise ValueError(f"unknown outbox operation {operation!r}")


# ---------------------------------------------------------------- replaying


@dataclass
class ReplayReport:
    applied: int = 0
    failed: int = 0
    pending: int = 0
    stopped_by_outage: bool = False
    skipped: bool = False  # another replayer holds the lease

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def outbox_replay(*, limit: int | None = None) -> ReplayReport:
    """Apply pending outbox entries, per subject in acceptance order.

    Progress is per subject: an entry that cannot be applied yet (a transient error) holds back
    only the later entries of its own subject; every other subject's entries are applied. Stops
    at the first outage (entries stay pending, to be retried by the next run). An entry that
    fails for a reason of its own (invalid, not found, an id conflict, a conflict still there
    after ``ENGRAM_OUTBOX_MAX_CONFLICT_ATTEMPTS`` tries) is marked failed with its error, visible
    in the operation and in /healthz. Only one replayer runs at a time (a database lease).
    """
    report = ReplayReport()
    holder = _lease_acquire()
    if holder is None:
        report.skipped = True
        return report
    try:
        done = 0
        pending = OutboxEntry.objects.filter(status=OutboxEntry.Status.PENDING)
        subjects = list(pending.values("tenant_id", "external_id").annotate(first=Min("id")).order_by("first"))
        for subject in subjects:
            last_id = 0
            while limit is None or done < limit:
                entry = (pending.filter(tenant_id=subject["tenant_id"], external_id=subject["external_id"],
                                        id__gt=last_id)
                         .select_related("tenant", "token").order_by("id").first())
                if entry is None:
                    break
                last_id = entry.pk
                _lease_renew(holder)
                outcome = _replay_one(entry, holder=holder)
                if outcome == "outage":
                    report.stopped_by_outage = True
                    break
                if outcome == "retry":
                    break  # this subject waits; the others go on
                done += 1
                report.applied += outcome == "done"
                report.failed += outcome == "failed"
            if report.stopped_by_outage or (limit is not None and done >= limit):
                break
    finally:
        _lease_release(holder)
    report.pending = OutboxEntry.objects.filter(status=OutboxEntry.Status.PENDING).count()
    return report


def _replay_one(entry: OutboxEntry, *, holder: str) -> str:
    """Apply one entry. Returns done | failed | retry | outage."""
    operation = Op(entry.operation)
    actor: AgentToken | str = entry.token or entry.actor
    payload = entry.payload
    try:
        if operation is Op.IMPORT:
            payload = _import_remaining(entry)
            if not payload["episodes"]:
                return _finish(entry, result={"ids": _import_ids(entry)})
        result = _apply(tenant=entry.tenant, external_id=entry.external_id, operation=operation, payload=payload,
                        memory_id=entry.memory_id, actor=actor, progress=lambda done, total: _lease_renew(holder))
        if operation is Op.IMPORT:
            result = {"ids": _import_ids(entry)}
    except Conflict as exc:
        if operation in _CREATES and exc.details.get("id") == entry.memory_id:
            # A create that already landed (the first attempt's answer was lost to the outage).
            return _finish(entry, result=_already_created(entry, operation))
        if exc.code in _PERMANENT_CONFLICTS or entry.attempts + 1 >= settings.ENGRAM_OUTBOX_MAX_CONFLICT_ATTEMPTS:
            return _fail(entry, exc)
        return _retry(entry, exc)
    except NotFound as exc:
        if operation is Op.ERASE:
            return _finish(entry, result={"documents_deleted": 0})
        if operation is Op.FORGET and entry.after_failure:
            # The first attempt may have deleted it before the outage cut it short.
            _tombstone_if_missing(entry)
            return _finish(entry, result={})
        return _fail(entry, exc)
    except EngramError as exc:
        if is_outage(exc):
            return _outage(entry, exc)
        if exc.status < 500:
            return _fail(entry, exc)
        log.error("outbox entry %s (%s) failed: %s", entry.pk, entry.operation, exc)
        return _retry(entry, exc)
    except Exception as exc:
        if is_outage(exc):
            return _outage(entry, exc)
        log.exception("outbox entry %s (%s) failed", entry.pk, entry.operation)
        return _retry(entry, exc)
    return _finish(entry, result=_summary(result))


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    # The outbox keeps ids, not content: a later forget must leave nothing behind here.
    if "memory" in result:
        return {"id": result["memory"]["id"]}
    return result


def _finish(entry: OutboxEntry, *, result: dict[str, Any]) -> str:
    entry.status, entry.result, entry.payload = OutboxEntry.Status.DONE, result, {}
    entry.processed_at = timezone.now()
    entry.attempts += 1
    if entry.operation == Op.ERASE:  # the erased end-user's external id is not kept, here either
        entry.external_id = "erased"
    entry.save(update_fields=["status", "result", "payload", "processed_at", "attempts", "external_id"])
    return "done"


def _fail(entry: OutboxEntry, exc: Exception) -> str:
    error = exc.as_dict() if isinstance(exc, EngramError) else {"code": "internal_error", "message": str(exc)[:500],
                                                                "details": {}}
    log.warning("outbox entry %s (%s for %s) failed for good: %s", entry.pk, entry.operation, entry.external_id,
                error["message"])
    entry.status, entry.last_error, entry.payload = OutboxEntry.Status.FAILED, error, {}
    entry.processed_at = timezone.now()
    entry.attempts += 1
    entry.save(update_fields=["status", "last_error", "payload", "processed_at", "attempts"])
    return "failed"


def _retry(entry: OutboxEntry, exc: Exception) -> str:
    # Never given up: an acknowledged write is not dropped for an error that is not its own fault.
    # /healthz reports the stuck backlog; the subject's later writes wait behind it.
    entry.attempts += 1
    entry.last_error = {"code": getattr(exc, "code", "error"), "message": str(exc)[:500]}
    entry.save(update_fields=["attempts", "last_error"])
    return "retry"


def _outage(entry: OutboxEntry, exc: Exception) -> str:
    entry.attempts += 1
    entry.last_error = {"code": getattr(exc, "code", "elasticsearch_unavailable"), "message": str(exc)[:500]}
    entry.save(update_fields=["attempts", "last_error"])
    return "outage"


def _already_created(entry: OutboxEntry, operation: Op) -> dict[str, Any]:
    """The create landed before; make sure its supersession landed too."""
    supersedes = entry.payload.get("supersedes") or []
    if supersedes:
        subject = subject_get(tenant=entry.tenant, external_id=entry.external_id)
        old = selectors.visible_documents(subject=subject, ids=supersedes, types=[_CREATES[operation]])
        writer = writer_es_client(prefix=writer_prefix(tenant=entry.tenant))
        now = timezone.now().isoformat()
        for visible in old.values():
            previous = visible.source.get("superseded_by") or []
            if entry.memory_id not in previous:
                writer.update(index=visible.index, id=visible.id, if_seq_no=visible.seq_no,
                              if_primary_term=visible.primary_term, refresh="wait_for",
                              doc={"superseded_by": [*previous, entry.memory_id], "superseded_at": now})
    return {"id": entry.memory_id}


def _import_ids(entry: OutboxEntry) -> list[str]:
    # Entries accepted before ids were assigned at acceptance carry the stored id in "id".
    return [e.get("memory_id") or e["id"] for e in entry.payload["episodes"]]


def _import_remaining(entry: OutboxEntry) -> dict[str, Any]:
    """The import without the episodes already stored (an earlier attempt may have stored some)."""
    episodes = [e if "memory_id" in e else {**{k: v for k, v in e.items() if k != "id"}, "memory_id": e["id"]}
                for e in entry.payload["episodes"]]
    try:
        subject = subject_get(tenant=entry.tenant, external_id=entry.external_id)
    except NotFound:
        existing: set[str] = set()
    else:
        existing = set()
        ids = [e["memory_id"] for e in episodes]
        for start in range(0, len(ids), 1000):
            existing |= set(selectors.visible_documents(subject=subject, ids=ids[start:start + 1000],
                                                       types=[MemoryType.EPISODIC]))
    return {**entry.payload, "episodes": [e for e in episodes if e["memory_id"] not in existing]}


def _tombstone_if_missing(entry: OutboxEntry) -> None:
    subject = Subject.objects.filter(tenant=entry.tenant, external_id=entry.external_id).first()
    if subject and not AuditEvent.objects.filter(action="memory.forget", subject=subject,
                                                 target_id=entry.memory_id).exists():
        audit_record(actor=entry.token or entry.actor, action="memory.forget", subject=subject,
                     target_id=entry.memory_id, details={"reason": entry.payload.get("reason", ""), "replayed": True})


# ---------------------------------------------------------------- lease


def _lease_acquire() -> str | None:
    holder = uuid.uuid4().hex
    now = timezone.now()
    until = now + timedelta(seconds=settings.ENGRAM_OUTBOX_LEASE_SECONDS)
    if OutboxLease.objects.filter(name=_LEASE, expires_at__lte=now).update(holder=holder, expires_at=until):
        return holder
    try:
        with transaction.atomic():
            OutboxLease.objects.create(name=_LEASE, holder=holder, expires_at=until)
    except IntegrityError:
        return None
    return holder


def _lease_renew(holder: str) -> None:
    until = timezone.now() + timedelta(seconds=settings.ENGRAM_OUTBOX_LEASE_SECONDS)
    OutboxLease.objects.filter(name=_LEASE, holder=holder).update(expires_at=until)


def _lease_release(holder: str) -> None:
    OutboxLease.objects.filter(name=_LEASE, holder=holder).update(expires_at=timezone.now())


# ---------------------------------------------------------------- reads


def operation_get(*, tenant: Tenant, uid: uuid.UUID | str) -> OutboxEntry:
    """An outbox entry of ``tenant``; NotFound for unknown ids and other tenants' alike."""
    try:
        return OutboxEntry.objects.get(tenant=tenant, uid=uid)
    except (OutboxEntry.DoesNotExist, ValueError, DjangoValidationError):
        raise NotFound("unknown operation", details={"id": str(uid)}) from None


def outbox_backlog(*, now: datetime | None = None) -> dict[str, Any]:
    """Pending and failed outbox entries, for /healthz."""
    now = now or timezone.now()
    pending = OutboxEntry.objects.filter(status=OutboxEntry.Status.PENDING)
    stats = pending.aggregate(count=Count("id"), oldest=Min("created_at"))
    subjects = pending.values("tenant_id", "external_id").distinct().count()
    oldest = stats["oldest"]
    retrying = pending.filter(attempts__gt=0).order_by("id").first()
    return {
        "pending": stats["count"],
        "pending_subjects": subjects,
        "oldest_pending_seconds": round((now - oldest).total_seconds(), 1) if oldest else None,
        "failed": OutboxEntry.objects.filter(status=OutboxEntry.Status.FAILED).count(),
        # Writes that ended failed (id and error code only: /healthz is not tenant-scoped; the
        # operation itself, read with the tenant's token, carries the full error).
        "recent_failures": [
            {"operation": str(f.uid), "type": f.operation, "code": (f.last_error or {}).get("code"),
             "at": f.processed_at.isoformat() if f.processed_at else None}
            for f in OutboxEntry.objects.filter(status=OutboxEntry.Status.FAILED).order_by("-processed_at")[:5]
        ],
        # The first entry a replay could not apply yet (an outage, or a bug) and why.
        "blocked_by": {"operation": str(retrying.uid), "attempts": retrying.attempts,
                       "error": retrying.last_error} if retrying else None,
    }
