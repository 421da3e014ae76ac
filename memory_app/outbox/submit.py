"""The one way a subject write enters Engram: a checked write (``commands.Write``), stamped, then
applied now or accepted into the outbox (a durable row committed before the caller is answered)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from engram_core.observability import metrics
from engram_core.observability.tracing import annotate, traced, traceparent
from memory_app.commands import CREATES, Op, Write
from memory_app.metering import usage_count
from memory_app.models import OutboxEntry
from memory_app.outbox.dispatch import write_apply
from engram_core.es.outage import is_outage
from tenants.models import AgentToken, Tenant

log = logging.getLogger(__name__)

# Sent by name: the task module imports the outbox, not the other way round.
REPLAY_TASK = "memory_app.tasks.replay_outbox"


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


@traced("engram.write")
def write_submit(*, tenant: Tenant, write: Write, token: AgentToken | None = None, actor: str = "api",
                 background: bool = False, defer_refresh: bool = False) -> Submitted:
    """Apply ``write`` (checked at the edge: ``commands.write_command``) for its end-user of
    ``tenant`` now, or accept it into the outbox.

    Queued when ``background`` is set, when earlier writes of the subject are still queued (order),
    or when Elasticsearch turns out to be unavailable during the attempt or was when the write's
    new end-user was to be created. Errors that are not an outage (NotFound, Conflict, ...) are
    raised as they are.
    """
    operation, external_id, memory_id, subject = write.operation, write.external_id, write.memory_id, write.subject
    if subject is not None and subject.tenant_id != tenant.pk:
        raise ValueError("a write is submitted for the tenant it was checked for")
    annotate(operation=operation.value, tenant_id=tenant.pk)
    payload = _stamped(operation, dict(write.payload))
    queue = dict(tenant=tenant, external_id=external_id, operation=operation, payload=payload,
                 memory_id=memory_id, token=token, actor=actor)
    if background:
        return _queued(memory_id, _enqueue(**queue, reason=OutboxEntry.Reason.BACKGROUND))
    if OutboxEntry.objects.pending_for(tenant=tenant, external_id=external_id):
        return _queued(memory_id, _enqueue(**queue, reason=OutboxEntry.Reason.BACKLOG))
    if subject is None:  # a new end-user whose key could not be minted when the write was accepted
        return _outage(queue, cause="the new end-user's key could not be minted")
    try:
        applied = write_apply(subject=subject, operation=operation, payload=payload, memory_id=memory_id,
                              actor=token or actor, limits=write.limits, context_options=write.context_options,
                              defer_refresh=defer_refresh, fields=write.fields)
    except Exception as exc:
        if not is_outage(exc):
            raise
        return _outage(queue, cause=f"{type(exc).__name__}: {exc}")
    _count(tenant=tenant, operation=operation, payload=payload, status="applied")
    return Submitted(memory_id=memory_id, result=applied.result)


def _outage(queue: dict[str, Any], *, cause: str) -> Submitted:
    log.warning("Elasticsearch unavailable (%s); %s write for %s/%s accepted into the outbox",
                cause, queue["operation"], queue["tenant"].slug, queue["external_id"])
    return _queued(queue["memory_id"], _enqueue(**queue, reason=OutboxEntry.Reason.OUTAGE, after_failure=True))


def _queued(memory_id: str, entry: OutboxEntry) -> Submitted:
    annotate(outbox_reason=entry.reason)
    _count(tenant=entry.tenant, operation=Op(entry.operation), payload=entry.payload, status="queued")
    return Submitted(memory_id=memory_id, entry=entry)


def _count(*, tenant: Tenant, operation: Op, payload: dict[str, Any], status: str) -> None:
    """An accepted write, for /metrics, its span and the tenant's usage (memories stored: each
    create, each episode of an import)."""
    metrics.WRITES.labels(operation.value, status).inc()
    annotate(status=status)
    stored = 1 if operation in CREATES else len(payload.get("episodes") or ()) if operation is Op.IMPORT else 0
    usage_count(tenant_id=tenant.pk, memories_stored=stored)


def _stamped(operation: Op, payload: dict[str, Any]) -> dict[str, Any]:
    """Every default fixed at acceptance: a write replayed later is dated when it was accepted."""
    if operation not in (*CREATES, Op.IMPORT):
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
        token=token, actor=_actor_label(token) if token else actor, reason=reason, after_failure=after_failure,
        traceparent=traceparent())
    if reason != OutboxEntry.Reason.OUTAGE:  # during an outage a replay now is pointless: beat retries
        transaction.on_commit(_kick)
    return entry


def _kick() -> None:
    try:
        current_app.send_task(REPLAY_TASK, retry=False, ignore_result=True)
    except Exception as exc:  # noqa: BLE001 - the entry is safe in the database; the periodic replay takes it
        log.warning("could not enqueue an outbox replay (%s: %s); the periodic replay will apply it",
                    type(exc).__name__, exc)


def _actor_label(token: AgentToken) -> str:
    return f"{token.prefix} ({token.name})"[:200]
