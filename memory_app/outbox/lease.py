"""One replayer at a time: a database lease, taken over once it expires (a crashed replayer)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory_app.models import OutboxLease

_LEASE = "replay"


def lease_acquire(*, seconds: int) -> str | None:
    """The new holder's id, for ``seconds``, or None while another replayer holds an unexpired lease."""
    holder = uuid.uuid4().hex
    now = timezone.now()
    until = now + timedelta(seconds=seconds)
    if OutboxLease.objects.filter(name=_LEASE, expires_at__lte=now).update(holder=holder, expires_at=until):
        return holder
    try:
        with transaction.atomic():
            OutboxLease.objects.create(name=_LEASE, holder=holder, expires_at=until)
    except IntegrityError:
        return None
    return holder


def lease_renew(holder: str, *, seconds: int) -> None:
    until = timezone.now() + timedelta(seconds=seconds)
    OutboxLease.objects.filter(name=_LEASE, holder=holder).update(expires_at=until)


def lease_release(holder: str) -> None:
    OutboxLease.objects.filter(name=_LEASE, holder=holder).update(expires_at=timezone.now())
