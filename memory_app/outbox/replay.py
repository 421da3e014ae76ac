"""Apply queued writes in acceptance order, per subject, idempotently; and the state each entry
ends in (done, failed for good, retried later, stopped by an outage)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db.models import Min, QuerySet
from django.utils import timezone

from engram_core.errors import Conflict, EngramError, NotFound
from engram_core.es.schema import MemoryType
from engram_core.observability.tracing import span_continuing
from memory_app import selectors
from memory_app.freshness import refresh_ensure
from memory_app.models import ForgetNote, OutboxEntry
from memory_app.commands import CREATES, ON_EXISTING, Op
from memory_app.outbox.dispatch import write_apply
from memory_app.validation import Limits, write_fields
from memory_app.outbox.lease import lease_acquire, lease_release, lease_renew
from memory_app.outbox.failures import failure_kind
from tenants.models import AgentToken, AuditEvent, Tenant
from tenants.selectors import subject_find, subject_get
from tenants.services.audit import audit_record
from tenants.services.keys import KeyLifetimes
from tenants.services.subjects import subject_get_or_create
from memory_app.services.context import ContextOptions
from memory_app.services.store import subject_writes

log = logging.getLogger(__name__)

# Conflicts that no retry resolves: the id is taken by a document the write did not create.
_PERMANENT_CONFLICTS = {"import_failed", "conflict"}


@dataclass(frozen=True)
class ReplayOptions:
    """The operator's settings a replay runs with, read once at its entry."""

    lease_seconds: int  # ENGRAM_OUTBOX_LEASE_SECONDS: a replayer that stops renewing loses its lease after this
    max_attempts: int  # ENGRAM_OUTBOX_MAX_ATTEMPTS: tries of an entry that meets a transient error
    limits: Limits  # what the services applying an entry check its fields within
    context_options: ContextOptions  # how a replayed episode's context and vectors are made
    lifetimes: KeyLifetimes  # the key of an end-user that a replayed write creates

    @classmethod
    def from_settings(cls) -> ReplayOptions:
        return cls(lease_seconds=settings.ENGRAM_OUTBOX_LEASE_SECONDS, max_attempts=settings.ENGRAM_OUTBOX_MAX_ATTEMPTS,
                   limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
                   lifetimes=KeyLifetimes.from_settings())


@dataclass
class ReplayReport:
    applied: int = 0
    failed: int = 0
    pending: int = 0
    stopped_by_outage: bool = False
    skipped: bool = False  # another replayer holds the lease

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def outbox_replay(*, limit: int | None = None, options: ReplayOptions | None = None) -> ReplayReport:
    """Apply pending outbox entries, per subject in acceptance order.

    Progress is per subject: an entry that cannot be applied yet (a transient error) holds back
    only the later entries of its own subject, and not all of them: a forget that does not depend
    on the entries ahead of it (``_independent``) passes them, and an erase cancels the entries
    queued before it (they would be erased anyway) and is applied first. Stops at the first
    outage (entries stay pending, to be retried by the next run). An entry that fails for a reason
    of its own (invalid data, not found, an id conflict, a bug's exception) or that still meets a
    transient error after ``options.max_attempts`` tries is marked failed with its error,
    visible in the operation, in /healthz and in the inspector, and no longer holds anything back.
    Only one replayer runs at a time (a database lease). ``options``: the settings, read here when
    not given.
    """
    options = options or ReplayOptions.from_settings()
    report = ReplayReport()
    holder = lease_acquire(seconds=options.lease_seconds)
    if holder is None:
        report.skipped = True
        return report
    try:
        done = 0
        pending = OutboxEntry.objects.filter(status=OutboxEntry.Status.PENDING)
        subjects = list(pending.values("tenant_id", "external_id").annotate(first=Min("id")).order_by("first"))
        for subject in subjects:
            own = pending.filter(tenant_id=subject["tenant_id"], external_id=subject["external_id"])
            _cancel_before_erase(own)
            last_id, applied_before, entry_tenant = 0, report.applied, None
            stuck = False
            while limit is None or done < limit:
                if stuck:  # the subject's head waits: only the forgets that depend on nothing ahead pass it
                    entry = next((f for f in own.filter(operation=Op.FORGET, id__gt=last_id)
                                  .select_related("tenant", "token").order_by("id")
                                  if _independent(f, ahead=own.filter(id__lt=f.pk).only("memory_id", "payload"))),
                                 None)
                else:
                    entry = own.filter(id__gt=last_id).select_related("tenant", "token").order_by("id").first()
                if entry is None:
                    break
                last_id, entry_tenant = entry.pk, entry.tenant
                lease_renew(holder, seconds=options.lease_seconds)
                # In the trace of the request that queued it, linked to this replay's.
                with span_continuing("engram.outbox.apply", entry.traceparent, attributes={
                        "engram.operation": entry.operation, "engram.tenant_id": entry.tenant_id,
                        "engram.outbox_entry": entry.pk}) as span:
                    outcome = _replay_one(entry, holder=holder, options=options)
                    span.set_attribute("engram.outcome", outcome)
                if outcome == "outage":
                    report.stopped_by_outage = True
                    break
                if outcome == "retry":
                    stuck = True
                    continue
                done += 1
                report.applied += outcome == "done"
                report.failed += outcome == "failed"
            if report.applied > applied_before and not report.stopped_by_outage and entry_tenant is not None:
                _subject_writes_refresh(entry_tenant, subject["external_id"])
            if report.stopped_by_outage or (limit is not None and done >= limit):
                break
    finally:
        lease_release(holder)
    report.pending = OutboxEntry.objects.filter(status=OutboxEntry.Status.PENDING).count()
    return report


def _cancel_before_erase(own: QuerySet[OutboxEntry]) -> int:
    """Cancel a subject's pending entries queued before its first pending erase: whatever they would
    write, the erase deletes, and one of them failing again and again must not hold the erase back.
    Returns how many were cancelled."""
    erase = own.filter(operation=Op.ERASE).order_by("id").first()
    if erase is None:
        return 0
    return own.filter(id__lt=erase.pk).update(
        status=OutboxEntry.Status.CANCELLED, payload={}, processed_at=timezone.now(),
        result={"cancelled_by": str(erase.uid), "reason": "erased"})


def _independent(entry: OutboxEntry, *, ahead: Iterable[OutboxEntry]) -> bool:
    """Whether ``entry`` may be applied before the pending entries ``ahead`` of it: a forget of a
    memory none of them creates or names (the memory exists already, and no queued supersede,
    outcome or support refers to it). Applying it first gives the same memories as in order."""
    if entry.operation != Op.FORGET:
        return False
    return not any(e.memory_id == entry.memory_id or _names(e.payload, entry.memory_id) for e in ahead)


def _names(value: Any, memory_id: str) -> bool:
    if isinstance(value, dict):
        return any(_names(v, memory_id) for v in value.values())
    if isinstance(value, list):
        return any(_names(v, memory_id) for v in value)
    return value == memory_id


def _subject_writes_refresh(tenant: Tenant, external_id: str) -> None:
    """Make a subject's replayed writes searchable: they were applied with their refresh deferred
    (one refresh per subject, not one per write: a backlog of many small writes would otherwise cut
    the index into as many segments). An erased end-user is gone, and so are its writes. Should
    the refresh fail, the writes are stored all the same and the marks still stand: the subject's
    next read refreshes, or the periodic refresh does."""
    subject = subject_find(tenant=tenant, external_id=external_id)
    if subject is None:
        return
    try:
        refresh_ensure(subject=subject)
    except Exception as exc:  # noqa: BLE001  (the writes are applied; only their visibility waits)
        log.warning("could not refresh the replayed writes of subject %s: %s", subject.pk, exc)


def _replay_one(entry: OutboxEntry, *, holder: str, options: ReplayOptions) -> str:
    """Apply one entry. Returns done | failed | retry | outage."""
    operation = Op(entry.operation)
    actor: AgentToken | str = entry.token or entry.actor
    payload = entry.payload
    try:
        if operation is Op.IMPORT:
            payload = _import_remaining(entry)
            if not payload["episodes"]:
                return _finish(entry, result={"ids": _import_ids(entry)})
        # The stored payload passed the edge's check; cleaned again into the fields its service takes.
        fields = write_fields(operation=operation, payload=payload, limits=options.limits)
        # The end-user, created now when the write was accepted before they could be (an outage).
        subject = (subject_get(tenant=entry.tenant, external_id=entry.external_id) if operation in ON_EXISTING
                   else subject_get_or_create(tenant=entry.tenant, external_id=entry.external_id, actor=actor,
                                              lifetimes=options.lifetimes))
        result = write_apply(subject=subject, operation=operation, payload=payload, memory_id=entry.memory_id,
                             actor=actor, defer_refresh=True,
                             progress=lambda done, total: lease_renew(holder, seconds=options.lease_seconds),
                             limits=options.limits, context_options=options.context_options, fields=fields).result
        if operation is Op.IMPORT:
            result = {"ids": _import_ids(entry)}
    except Conflict as exc:
        if operation in CREATES and exc.details.get("id") == entry.memory_id:
            # A create that already landed (the first attempt's answer was lost to the outage).
            return _finish(entry, result=_already_created(entry, operation))
        return _failed_attempt(entry, exc, transient=exc.code not in _PERMANENT_CONFLICTS,
                               max_attempts=options.max_attempts)
    except NotFound as exc:
        if operation is Op.ERASE:
            return _finish(entry, result={"documents_deleted": 0})
        if operation is Op.FORGET and entry.after_failure:
            # The first attempt may have deleted it before the outage cut it short.
            _tombstone_if_missing(entry)
            return _finish(entry, result={})
        return _fail(entry, exc)
    except Exception as exc:
        kind = failure_kind(exc)
        if kind == "outage":
            return _outage(entry, exc)
        if not isinstance(exc, EngramError) or exc.status >= 500:
            log.exception("outbox entry %s (%s) failed (%s)", entry.pk, entry.operation, kind)
        return _failed_attempt(entry, exc, transient=kind == "transient", max_attempts=options.max_attempts)
    return _finish(entry, result=_summary(result))


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    # The outbox keeps ids, not content: a later forget must leave nothing behind here.
    if "memory" in result:
        return {"id": result["memory"]["id"]}
    return result


def _failed_attempt(entry: OutboxEntry, exc: Exception, *, transient: bool, max_attempts: int) -> str:
    """A failure that is not an outage: retried later while a retry may fix it, up to
    ``max_attempts`` attempts; failed now otherwise."""
    if transient and entry.attempts + 1 < max_attempts:
        return _retry(entry, exc)
    return _fail(entry, exc)


def _settle(entry: OutboxEntry, **fields: Any) -> None:
    # Only a pending entry settles: an erase may have cancelled it while it was being applied
    # (and the erase's clean-up must not be written over).
    OutboxEntry.objects.filter(pk=entry.pk, status=OutboxEntry.Status.PENDING).update(
        processed_at=timezone.now(), attempts=entry.attempts + 1, **fields)


def _finish(entry: OutboxEntry, *, result: dict[str, Any]) -> str:
    fields: dict[str, Any] = {"status": OutboxEntry.Status.DONE, "result": result, "payload": {}}
    if entry.operation == Op.ERASE:  # the erased end-user's external id is not kept, here either
        fields["external_id"] = "erased"
    _settle(entry, **fields)
    return "done"


def _fail(entry: OutboxEntry, exc: Exception) -> str:
    """The entry ends failed, its payload kept (``manage.py outbox retry`` applies it again after a
    fix; ``discard`` drops it; forget and erase redact it like every other copy). The agent polling
    the operation sees the kind of failure only; the cause stays in the log."""
    error = exc.as_dict() if isinstance(exc, EngramError) else {
        "code": "internal_error", "message": f"the write failed ({type(exc).__name__}); the server's log has the cause",
        "details": {}}
    log.warning("outbox entry %s (%s) failed for good after %d attempt(s): %s", entry.pk, entry.operation,
                entry.attempts + 1, exc if not isinstance(exc, EngramError) else error["message"])
    _settle(entry, status=OutboxEntry.Status.FAILED, last_error=error)
    return "failed"


def _retry(entry: OutboxEntry, exc: Exception) -> str:
    # Tried again at the next replay, up to ENGRAM_OUTBOX_MAX_ATTEMPTS; /healthz shows it as
    # ``blocked_by`` meanwhile (the subject's later writes, bar independent forgets, wait behind it).
    OutboxEntry.objects.filter(pk=entry.pk, status=OutboxEntry.Status.PENDING).update(
        attempts=entry.attempts + 1, last_error=_error_of(exc, code="error"))
    return "retry"


def _error_of(exc: Exception, *, code: str) -> dict[str, str]:
    # An EngramError's message is written for the client; another exception's text may quote the
    # write's content (a KeyError, a parser's complaint): its type only, the log has the rest.
    if isinstance(exc, EngramError):
        return {"code": exc.code, "message": exc.message[:500]}
    return {"code": getattr(exc, "code", code) if isinstance(getattr(exc, "code", None), str) else code,
            "message": type(exc).__name__}


def _outage(entry: OutboxEntry, exc: Exception) -> str:
    OutboxEntry.objects.filter(pk=entry.pk, status=OutboxEntry.Status.PENDING).update(
        attempts=entry.attempts + 1, last_error=_error_of(exc, code="elasticsearch_unavailable"))
    return "outage"


def _already_created(entry: OutboxEntry, operation: Op) -> dict[str, Any]:
    """The create landed before; make sure its supersession landed too."""
    supersedes = entry.payload.get("supersedes") or []
    if supersedes:
        subject = subject_get(tenant=entry.tenant, external_id=entry.external_id)
        old = selectors.visible_documents(subject=subject, ids=supersedes, types=[CREATES[operation]])
        now = timezone.now().isoformat()
        with subject_writes(subject=subject) as target:
            for visible in old.values():
                previous = visible.source.get("superseded_by") or []
                if entry.memory_id not in previous:
                    target.writer.update(index=visible.index, id=visible.id, if_seq_no=visible.seq_no,
                                         if_primary_term=visible.primary_term, refresh=True,
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
    subject = subject_find(tenant=entry.tenant, external_id=entry.external_id)
    if subject and not AuditEvent.objects.filter(action="memory.forget", subject=subject,
                                                 target_id=entry.memory_id).exists():
        event = audit_record(actor=entry.token or entry.actor, action="memory.forget", subject=subject,
                             target_id=entry.memory_id,
                             details={"reason": entry.payload.get("reason", ""), "replayed": True})
        if note := entry.payload.get("note"):
            ForgetNote.objects.create(subject=subject, audit_event=event, memory_id=entry.memory_id, note=note)
