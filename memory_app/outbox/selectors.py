"""Reads of the outbox: whether a subject has writes waiting, one operation, the /healthz backlog."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, Min
from django.utils import timezone

from engram_core.errors import NotFound
from memory_app.models import OutboxEntry
from tenants.models import Tenant


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


def subject_outbox(*, tenant: Tenant, external_id: str, limit: int = 20) -> dict[str, Any]:
    """One end-user's writes that are waiting or ended failed (for the inspector): ids, operations,
    attempts and error codes, never their content."""
    own = OutboxEntry.objects.filter(tenant=tenant, external_id=external_id)
    return {
        "pending": own.filter(status=OutboxEntry.Status.PENDING).count(),
        "failed": list(own.filter(status=OutboxEntry.Status.FAILED).order_by("-processed_at", "-id")
                       .only("uid", "operation", "attempts", "last_error", "created_at", "processed_at")[:limit]),
    }
