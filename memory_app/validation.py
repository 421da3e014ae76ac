"""Validation at the edge of the memory domain: every input is checked before anything is written."""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
from typing import Any

import orjson
from django.conf import settings

from engram_core.errors import NotFound, ValidationFailed
from engram_core.es.schema import MemoryType


def clean_text(value: Any, *, field: str = "text", limit: int | None = None) -> str:
    limit = limit or settings.ENGRAM_MAX_TEXT_CHARS
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be a string", details={"field": field}, code="invalid_text")
    text = value.strip()
    if not text:
        raise ValidationFailed(f"{field} must not be empty", details={"field": field}, code="empty_text")
    if len(text) > limit:
        raise ValidationFailed(f"{field} is {len(text)} characters; the limit is {limit}",
                               details={"field": field, "length": len(text), "limit": limit}, code="text_too_long")
    if "\x00" in text:
        raise ValidationFailed(f"{field} contains a NUL character", details={"field": field}, code="invalid_text")
    return text


SESSION_ID_MAX_CHARS = 200


def clean_session_id(value: Any) -> str | None:
    """An episode's optional ``session_id``: a non-empty string of at most 200 characters."""
    return None if value is None else clean_text(value, field="session_id", limit=SESSION_ID_MAX_CHARS)


def clean_memory_type(value: Any, *, allowed: tuple[MemoryType, ...] = tuple(MemoryType)) -> MemoryType:
    try:
        memory_type = MemoryType(value)
    except ValueError:
        memory_type = None
    if memory_type not in allowed:
        raise ValidationFailed(
            f"unknown memory type {value!r}; expected one of {', '.join(t.value for t in allowed)}",
            details={"field": "type", "allowed": [t.value for t in allowed]}, code="unknown_memory_type",
        )
    return memory_type


def clean_types(values: Any) -> list[MemoryType]:
    if values is None:
        return list(MemoryType)
    if not isinstance(values, (list, tuple)) or not values:
        raise ValidationFailed("types must be a non-empty list", details={"field": "types"}, code="invalid_types")
    return list(dict.fromkeys(clean_memory_type(v) for v in values))


TIMEZONE_MAX_CHARS = 64
# Engram's ids and those clients choose; the outbox and idempotency columns hold this many.
MEMORY_ID_MAX_CHARS = 64


def clean_timezone(value: Any) -> ZoneInfo | None:
    """An IANA time zone name ("Europe/Paris", "America/Los_Angeles", "UTC") as a ZoneInfo; None
    (or empty) passes through as None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > TIMEZONE_MAX_CHARS:
        raise ValidationFailed("timezone must be an IANA time zone name, e.g. Europe/Paris",
                               details={"field": "timezone"}, code="invalid_timezone")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # unknown name, or a path-like one ZoneInfo refuses
        raise ValidationFailed(f"unknown time zone {value[:TIMEZONE_MAX_CHARS]!r}; use an IANA name, e.g. Europe/Paris",
                               details={"field": "timezone"}, code="invalid_timezone") from None


def clean_datetime(value: Any, *, field: str) -> datetime | None:
    """Accept an aware datetime or an ISO 8601 string with a timezone (or Z); None passes through."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
        except ValueError:
            raise ValidationFailed(f"{field} is not an ISO 8601 date-time: {value!r}",
                                   details={"field": field}, code="invalid_datetime") from None
    if not isinstance(value, datetime):
        raise ValidationFailed(f"{field} must be a date-time", details={"field": field}, code="invalid_datetime")
    if value.tzinfo is None:
        raise ValidationFailed(f"{field} must carry a timezone (e.g. 2026-01-31T09:00:00Z)",
                               details={"field": field}, code="invalid_datetime")
    return value.astimezone(UTC)


def clean_k(value: Any) -> int:
    limit = settings.ENGRAM_RECALL_MAX_K
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ValidationFailed(f"k must be an integer from 1 to {limit}", details={"field": "k", "max": limit},
                               code="k_out_of_range")
    return value


def holds_nul(value: Any) -> bool:
    """Whether a NUL character is in ``value`` (a string, or any key or value of JSON data)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(holds_nul(v) for v in value)
    return False


def clean_metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed("metadata must be an object", details={"field": "metadata"}, code="invalid_metadata")
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
        # What the Elasticsearch client writes (engram_core.es.client): no whole number beyond 64
        # bits, no lone surrogate; and above, no NaN or infinity (orjson would write null).
        orjson.dumps(value)
    except (TypeError, ValueError):
        raise ValidationFailed("metadata must be JSON with finite numbers, whole numbers within 64 bits and "
                               "valid Unicode text", details={"field": "metadata"}, code="invalid_metadata") from None
    if size > settings.ENGRAM_MAX_METADATA_BYTES:
        raise ValidationFailed(f"metadata is {size} bytes; the limit is {settings.ENGRAM_MAX_METADATA_BYTES}",
                               details={"field": "metadata"}, code="metadata_too_large")
    if holds_nul(value):  # as in text fields: PostgreSQL (outbox payloads, idempotency records) holds none
        raise ValidationFailed("metadata contains a NUL character", details={"field": "metadata"},
                               code="invalid_metadata")
    return value


def clean_confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValidationFailed("confidence must be a number from 0 to 1", details={"field": "confidence"},
                               code="invalid_confidence")
    return float(value)


def memory_id_possible(value: str) -> bool:
    """Whether some memory could have the id ``value``: Engram's own ids and the ids clients may
    choose are 1-64 letters, digits and dashes (MEMORY_ID_MAX_CHARS), so never empty, never
    longer and never with a control character."""
    return 0 < len(value) <= MEMORY_ID_MAX_CHARS and not any(unicodedata.category(c) == "Cc" for c in value)


def memory_not_found(memory_id: str) -> NotFound:
    """The one answer for a memory the end-user does not have (or no memory can have)."""
    return NotFound(f"no memory {memory_id!r} for this subject", details={"id": memory_id})


def clean_memory_id(memory_id: str) -> str:
    """A memory id some memory could have (``memory_id_possible``); NotFound otherwise."""
    if not memory_id_possible(memory_id):
        raise memory_not_found(memory_id)
    return memory_id


def clean_ids(values: Any, *, field: str, limit: int) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) and memory_id_possible(v.strip())
                                                        for v in values):
        raise ValidationFailed(f"{field} must be a list of memory ids", details={"field": field}, code="invalid_ids")
    if len(values) > limit:
        raise ValidationFailed(f"{field} names {len(values)} ids; the limit is {limit}", details={"field": field},
                               code="invalid_ids")
    return list(dict.fromkeys(v.strip() for v in values))
