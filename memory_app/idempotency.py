"""Idempotency records: a retried write gets the first answer and writes nothing twice.

A record per (agent token, key) is inserted before the write runs; the unique constraint makes
the first request win any race. The record carries the memory id the write will use, so even a
re-run (after a server error released the record) cannot create a second memory. Final answers
(anything but 5xx and 429) are stored and replayed; the same key with another request is refused
(422); a request arriving while the first is still running gets 409 and a Retry-After. The REST
API (``api.idempotency``) and MCP (``idempotent_call``) are the two callers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from engram_core.errors import Conflict, EngramError, ValidationFailed
from memory_app.models import IdempotencyRecord
from memory_app.services.store import new_memory_id
from tenants.models import AgentToken, Tenant

# The header's name, also in the errors' details where a key is refused.
HEADER = "Idempotency-Key"


class KeyReused(EngramError):
    code, status = "idempotency_key_reused", 422


class KeyInUse(Conflict):
    code = "idempotency_key_in_use"
    retry_after = 1


def idempotency_key_clean(raw: str) -> str:
    key = raw.strip()
    if not 1 <= len(key) <= 255 or not key.isascii() or not key.isprintable():
        raise ValidationFailed("Idempotency-Key must be 1-255 printable ASCII characters",
                               details={"header": HEADER}, code="invalid_idempotency_key")
    return key


@dataclass(frozen=True)
class Claim:
    record: IdempotencyRecord | None = None  # ours to run
    stored: IdempotencyRecord | None = None  # finished earlier: replay it


def idempotency_claim(*, token: AgentToken, key: str, method: str, path: str, fingerprint: str, lock_seconds: int,
                      tenant: Tenant | None = None, external_id: str = "") -> Claim:
    """Claim ``key`` for this request, or find the finished first request that used it. A first
    request unfinished after ``lock_seconds`` (ENGRAM_IDEMPOTENCY_LOCK_SECONDS, read at the edge) died:
    this one takes its claim over.

    ``external_id``: the end-user's id as the edge cleaned it (as stored, whatever spacing the URL
    had: forget and erase find the record so). Raises KeyReused (422) when the key was used for a
    different request, KeyInUse (409, with a Retry-After) while the first request is still running.
    """
    now = timezone.now()
    try:
        with transaction.atomic():
            record = IdempotencyRecord.objects.create(
                token=token, key=key, method=method, path=path, fingerprint=fingerprint, memory_id=new_memory_id(),
                tenant=tenant, external_id=external_id, locked_at=now)
        return Claim(record=record)
    except IntegrityError:
        pass
    record = IdempotencyRecord.objects.get(token=token, key=key)
    if (record.method, record.path, record.fingerprint) != (method, path, fingerprint):
        raise KeyReused("this Idempotency-Key was used for a different request",
                        details={"header": HEADER, "first_request": f"{record.method} {record.path}"})
    if record.status_code is not None:
        return Claim(stored=record)
    stale = now - timedelta(seconds=lock_seconds)
    # Released by a server error, or its request died: take it over (compare-and-set on the lock).
    taken = (IdempotencyRecord.objects.filter(pk=record.pk, status_code__isnull=True)
             .filter(Q(locked_at__isnull=True) | Q(locked_at__lt=stale)).update(locked_at=now))
    if taken:
        record.locked_at = now
        return Claim(record=record)
    raise KeyInUse("a request with this Idempotency-Key is still being processed; retry shortly",
                   details={"header": HEADER})


def idempotency_store(*, record: IdempotencyRecord, status: int, body: Any, headers: dict | None = None) -> None:
    if status >= 500 or status == 429:
        IdempotencyRecord.objects.filter(pk=record.pk).update(locked_at=None)
        return
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        status_code=status, response_body=body, response_headers=headers or {},
        completed_at=timezone.now(), locked_at=None)


def idempotent_call(*, token: AgentToken, key: str, name: str, arguments: dict[str, Any], run: Callable[[str], Any],
                    lock_seconds: int, tenant: Tenant | None = None, external_id: str = "") -> Any:
    """The same guarantee for a call that is not an HTTP request (an MCP tool call): ``run`` gets
    the pre-assigned memory id; its result, or its EngramError below 500, is stored and given
    (returned or raised again) to every later call with ``key``."""
    key = idempotency_key_clean(key)
    fingerprint = hashlib.sha256(json.dumps(arguments, sort_keys=True, default=str).encode()).hexdigest()
    claim = idempotency_claim(token=token, key=key, method="CALL", path=name, fingerprint=fingerprint,
                              lock_seconds=lock_seconds, tenant=tenant, external_id=external_id)
    if claim.stored is not None:
        body = claim.stored.response_body or {}
        if claim.stored.status_code >= 400:
            error = body.get("error", {})
            raise EngramError(error.get("message", ""), details=error.get("details"), code=error.get("code"),
                              status=claim.stored.status_code)
        return body
    record = claim.record
    assert record is not None  # a claim is either stored (above) or ours
    try:
        result = run(record.memory_id)
    except EngramError as exc:
        idempotency_store(record=record, status=exc.status, body={"error": exc.as_dict()})
        raise
    except BaseException:
        idempotency_store(record=record, status=500, body=None)
        raise
    idempotency_store(record=record, status=200, body=result)
    return result


def idempotency_purge(*, ttl_hours: int, now=None) -> int:
    """Drop records older than ``ttl_hours`` (ENGRAM_IDEMPOTENCY_TTL_HOURS, read by the task). Returns how many."""
    cutoff = (now or timezone.now()) - timedelta(hours=ttl_hours)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
