"""Per-tenant usage per day (UTC): agent-token requests, memories stored, consolidation runs and
the consolidation LLM's tokens in and out, kept in ``TenantUsageDay`` for the tenant's admins.

Requests and stored memories are counted on the request path, so they are added up in the process
and written by a background thread every ``ENGRAM_USAGE_FLUSH_SECONDS`` (one statement per tenant
and day, never one per request); a process killed outright loses at most that long's counts.
Consolidation runs are written when the run ends (one per run, in the worker)."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections import Counter
from datetime import date, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from engram_core.db import as_request
from engram_core.errors import ValidationFailed
from memory_app.models import TenantUsageDay
from tenants.models import Tenant

log = logging.getLogger(__name__)

FIELDS = ("requests", "memories_stored", "consolidation_runs", "llm_tokens_in", "llm_tokens_out")
USAGE_MAX_DAYS = 366

_lock = threading.Lock()
_pending: dict[tuple[int, date], Counter] = {}
_flusher: tuple[int, threading.Thread] | None = None  # (the process it runs in, the thread)
_wake = threading.Event()


def usage_count(*, tenant_id: int, requests: int = 0, memories_stored: int = 0) -> None:
    """Add to today's counts of ``tenant_id`` (in this process; written within the flush interval)."""
    if not (requests or memories_stored):
        return
    key = (tenant_id, timezone.now().date())
    with _lock:
        counts = _pending.setdefault(key, Counter())
        counts["requests"] += requests
        counts["memories_stored"] += memories_stored
    _ensure_flusher()


def usage_add(*, tenant_id: int, day: date | None = None, **counts: int) -> None:
    """Add ``counts`` (of FIELDS) to the tenant's row for ``day`` (default today) now, atomically."""
    counts = {k: int(v) for k, v in counts.items() if v}
    if unknown := set(counts) - set(FIELDS):
        raise ValueError(f"unknown usage fields: {sorted(unknown)}")
    if not counts:
        return
    day = day or timezone.now().date()
    increments = {k: F(k) + v for k, v in counts.items()}
    for _ in range(2):  # a concurrent first write of the day wins the insert; this one then adds
        if TenantUsageDay.objects.filter(tenant_id=tenant_id, day=day).update(**increments):
            return
        try:
            with transaction.atomic():
                TenantUsageDay.objects.create(tenant_id=tenant_id, day=day, **counts)
            return
        except IntegrityError:
            continue


def usage_flush(*, keep_failed: bool = True) -> None:
    """Write this process's counts now (the flusher thread, at exit, and tests); counts that could
    not be written are kept for the next flush (``keep_failed``)."""
    with _lock:
        pending = dict(_pending)
        _pending.clear()
    if not pending:
        return
    failed: dict[tuple[int, date], Counter] = {}
    try:  # a tenant deleted meanwhile has nothing left to count for
        present = set(Tenant.objects.filter(pk__in={t for t, _ in pending}).values_list("pk", flat=True))
    except Exception:  # noqa: BLE001 - the database is unreachable: every count is kept (below)
        present = {t for t, _ in pending}
    for (tenant_id, day), counts in pending.items():
        if tenant_id not in present:
            continue
        try:
            usage_add(tenant_id=tenant_id, day=day, **counts)
        except IntegrityError:  # deleted between the two reads
            continue
        except Exception as exc:  # noqa: BLE001 - kept for the next flush; the database may be back by then
            if not keep_failed:
                continue
            log.warning("tenant usage not written yet (%s: %s); kept for the next flush", type(exc).__name__, exc)
            failed[(tenant_id, day)] = counts
    if failed:
        with _lock:
            for key, counts in failed.items():
                _pending.setdefault(key, Counter()).update(counts)


def _ensure_flusher() -> None:
    global _flusher
    current = _flusher
    if current is not None and current[0] == os.getpid():
        return
    with _lock:
        if _flusher is None or _flusher[0] != os.getpid():  # none yet, or inherited through fork()
            thread = threading.Thread(target=_flush_forever, name="engram-usage-flush", daemon=True)
            _flusher = (os.getpid(), thread)
            thread.start()


def _flush_forever() -> None:
    while True:
        _wake.wait(settings.ENGRAM_USAGE_FLUSH_SECONDS)
        _wake.clear()
        as_request(usage_flush)


def _flush_at_exit() -> None:
    # At exit there is no next flush, and the database (or logging) may be gone already.
    usage_flush(keep_failed=False)


atexit.register(_flush_at_exit)


def tenant_usage(*, tenant: Tenant, days: int = 30, today: date | None = None) -> list[dict]:
    """The tenant's usage for each of the last ``days`` days (1-366), newest first, days without
    any use included as zeros."""
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= USAGE_MAX_DAYS:
        raise ValidationFailed(f"days must be 1-{USAGE_MAX_DAYS}", details={"field": "days"}, code="invalid_days")
    today = today or timezone.now().date()
    first = today - timedelta(days=days - 1)
    rows = {r.day: r for r in TenantUsageDay.objects.filter(tenant=tenant, day__gte=first, day__lte=today)}
    out = []
    for n in range(days):
        day = today - timedelta(days=n)
        row = rows.get(day)
        out.append({"date": day.isoformat(), **{f: getattr(row, f) if row else 0 for f in FIELDS}})
    return out
