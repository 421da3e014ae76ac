"""``Idempotency-Key`` on the API's writes: a retried request gets the first response and writes
nothing twice (the records: ``memory_app.idempotency``). Final responses (anything but 5xx and 429)
are stored and replayed verbatim with ``Idempotent-Replayed: true``.
"""

from __future__ import annotations

import functools
import hashlib
import json

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.idempotency import HEADER, idempotency_claim, idempotency_key_clean, idempotency_store
from memory_app.models import IdempotencyRecord
from memory_app.services.store import new_memory_id

__all__ = ["HEADER", "idempotent", "request_fingerprint"]

_STORED_HEADERS = ("Location",)


def request_fingerprint(request: Request) -> str:
    """sha256 of the request's parsed body and query: equal JSON bodies match however they are spaced."""
    canonical = json.dumps({"data": request.data, "query": sorted(request.query_params.lists())},
                           sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_complete(*, record: IdempotencyRecord, response: Response) -> None:
    """Store a final response; release the key after a server error or throttling so a retry runs again."""
    headers = {h: response[h] for h in _STORED_HEADERS if response.has_header(h)}
    idempotency_store(record=record, status=response.status_code, body=response.data, headers=headers)


def idempotent(handler):
    """Wrap a write handler of an API view. The handler reads its pre-assigned memory id from
    ``request.memory_id`` (from the record when a key is sent, else fresh)."""

    @functools.wraps(handler)
    def wrapper(view, request: Request, *args, **kwargs):
        raw = request.headers.get(HEADER)
        if raw is None:
            request.memory_id = new_memory_id()
            return handler(view, request, *args, **kwargs)
        key = idempotency_key_clean(raw)
        tenant = request.auth.tenant if "external_id" in kwargs else None
        claim = idempotency_claim(token=request.auth, key=key, method=request.method, path=request.path,
                                  fingerprint=request_fingerprint(request),
                                  lock_seconds=settings.ENGRAM_IDEMPOTENCY_LOCK_SECONDS, tenant=tenant,
                                  external_id=kwargs.get("external_id", ""))
        if claim.stored is not None:
            stored = claim.stored
            return Response(stored.response_body, status=stored.status_code,
                            headers={**stored.response_headers, "Idempotent-Replayed": "true"})
        record = claim.record
        assert record is not None  # a claim is either stored (above) or ours
        request.memory_id = record.memory_id
        try:
            response = handler(view, request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - rendered by the one error path, then stored like any response
            response = view.handle_exception(exc)
        idempotency_complete(record=record, response=response)
        return response

    return wrapper
