"""What an operator does with writes that ended failed (``manage.py outbox``): list them, send one
back to the queue after the cause is fixed, or discard it. Each retry and discard is audited."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import QuerySet

from engram_core.errors import Conflict, NotFound
from memory_app.models import OutboxEntry
from tenants.models import Tenant
from tenants.services.audit import Actor, audit_record


def failed_entries(*, tenant: Tenant | None = None) -> QuerySet[OutboxEntry]:
    """Failed entries, the latest first."""
    entries = OutboxEntry.objects.filter(status=OutboxEntry.Status.FAILED).select_related("tenant")
    if tenant is not None:
        entries = entries.filter(tenant=tenant)
    return entries.order_by("-processed_at", "-id")


def _failed(uid: uuid.UUID | str) -> OutboxEntry:
    try:
        return OutboxEntry.objects.select_related("tenant").get(uid=uid)
    except (OutboxEntry.DoesNotExist, ValueError):
        raise NotFound("unknown operation", details={"id": str(uid)}) from None


def outbox_entry_retry(*, uid: uuid.UUID | str, actor: Actor) -> OutboxEntry:
    """Put a failed entry back in the queue, at its place (its end-user's later writes went on
    without it), with its attempts reset. Conflict when it is not failed or its content is gone
    (an entry failed before failed entries kept their payload, or redacted to nothing by an erase)."""
    entry = _failed(uid)
    if entry.status != OutboxEntry.Status.FAILED:
        raise Conflict(f"operation {entry.uid} is {entry.status}, not failed", code="not_failed")
    if not entry.payload and entry.operation != OutboxEntry.Operation.ERASE:  # an erase carries nothing
        raise Conflict(f"operation {entry.uid} has no content left to apply", code="no_payload")
    with transaction.atomic():
        changed = OutboxEntry.objects.filter(pk=entry.pk, status=OutboxEntry.Status.FAILED).update(
            status=OutboxEntry.Status.PENDING, attempts=0, processed_at=None)
        if not changed:
            raise Conflict(f"operation {entry.uid} changed meanwhile", code="not_failed")
        audit_record(actor=actor, action="outbox.retry", tenant=entry.tenant, target_id=str(entry.uid),
                     details={"operation": entry.operation, "error": (entry.last_error or {}).get("code")})
    entry.refresh_from_db()
    return entry


def outbox_entry_discard(*, uid: uuid.UUID | str, actor: Actor) -> OutboxEntry:
    """Drop a failed entry for good: cancelled, its content deleted. Conflict when it is not failed."""
    entry = _failed(uid)
    with transaction.atomic():
        changed = OutboxEntry.objects.filter(pk=entry.pk, status=OutboxEntry.Status.FAILED).update(
            status=OutboxEntry.Status.CANCELLED, payload={}, result={"cancelled_by": "operator", "reason": "discarded"})
        if not changed:
            raise Conflict(f"operation {entry.uid} is {entry.status}, not failed", code="not_failed")
        audit_record(actor=actor, action="outbox.discard", tenant=entry.tenant, target_id=str(entry.uid),
                     details={"operation": entry.operation, "error": (entry.last_error or {}).get("code")})
    entry.refresh_from_db()
    return entry
