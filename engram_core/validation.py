"""Validation every app needs: an end-user's external id (``tenants`` creates end-users; every
memory call names one), and the moments and days a request names (the API, MCP, the inspector)."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, date, datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError

from engram_core.errors import ValidationFailed

# Path segments a URL client rewrites or splits (RFC 3986 dot segments, the separator): an end-user
# so named could be created, but never addressed as /api/v1/subjects/<external_id>/… or
# /mcp/subjects/<external_id>.
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_UNADDRESSABLE = "external_id must not contain '/' nor be '.' or '..': it is a segment of the API's URLs"
# An erased end-user's row stays as a tombstone named ``erased:<user_id>`` (and its settled outbox
# entries as ``erased``): an end-user so named could take the name another's erase needs.
ERASED_PREFIX = "erased:"
_RESERVED = f"external_id must not be 'erased' nor start with {ERASED_PREFIX!r}: the names of erased end-users"


def clean_external_id(value: Any, *, new: bool = False) -> str:
    """An end-user's external id: 1-200 characters (after trimming) without control characters.
    ``new``: the id of an end-user about to be created, which must also pass
    ``new_external_id_check``; an existing end-user is found by the id it has. Run once, at the
    edge (the API's path, an MCP call, a command's argument): below it the id is trusted."""
    external_id = value.strip() if isinstance(value, str) else ""
    _external_id_check(external_id)
    return new_external_id_check(external_id) if new else external_id


def _external_id_check(external_id: str) -> None:
    if not 1 <= len(external_id) <= 200 or any(unicodedata.category(c) in ("Cc", "Cs") for c in external_id):
        raise ValidationFailed("external_id must be 1-200 characters without control characters",
                               details={"field": "external_id"}, code="invalid_external_id")


def new_external_id_check(external_id: Any) -> str:
    """An id a new end-user may take: clean as it is (what ``clean_external_id`` returns; checked,
    not cleaned, so that a caller who skipped the edge is refused where an end-user is created),
    addressable in a URL path (see ``_UNADDRESSABLE``) and outside the erased end-users' names
    (``_RESERVED``)."""
    if not isinstance(external_id, str) or external_id != external_id.strip():
        raise ValidationFailed("external_id must not start or end with white space",
                               details={"field": "external_id"}, code="invalid_external_id")
    _external_id_check(external_id)
    if "/" in external_id or external_id in (".", ".."):
        raise ValidationFailed(_UNADDRESSABLE, details={"field": "external_id"}, code="invalid_external_id")
    if external_id.casefold() == "erased" or external_id.casefold().startswith(ERASED_PREFIX):
        raise ValidationFailed(_RESERVED, details={"field": "external_id"}, code="invalid_external_id")
    return external_id


def validate_new_external_id(value: Any) -> None:
    """``clean_external_id(new=True)`` as a Django validator (the admin's form)."""
    try:
        clean_external_id(value, new=True)
    except ValidationFailed as exc:
        raise DjangoValidationError(exc.message, code="invalid_external_id") from exc


def clean_datetime(value: Any, *, field: str) -> datetime | None:
    """An aware datetime, or an ISO 8601 string with a timezone (or Z), as a moment in UTC; None
    passes through. ValidationFailed (``invalid_datetime``) for anything else, also for a moment
    whose UTC time lies outside the calendar's years 1-9999 ("0001-01-01T00:00:00+01:00")."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)  # Python 3.11's reads a trailing Z as UTC
        except ValueError:
            raise ValidationFailed(f"{field} is not an ISO 8601 date-time: {value[:100]!r}",
                                   details={"field": field}, code="invalid_datetime") from None
    if not isinstance(value, datetime):
        raise ValidationFailed(f"{field} must be a date-time", details={"field": field}, code="invalid_datetime")
    if value.tzinfo is None:
        raise ValidationFailed(f"{field} must carry a timezone (a trailing Z or an offset such as +02:00)",
                               details={"field": field}, code="invalid_datetime")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationFailed(f"{field} lies outside the years 0001-9999 in UTC", details={"field": field},
                               code="invalid_datetime") from None


def clean_date(value: Any, *, field: str) -> date | None:
    """A calendar day written YYYY-MM-DD; None or "" passes through as None. ValidationFailed
    (``invalid_date``) for anything else, also for a day no month has ("2024-02-30")."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:  # "2024-02-30"
            pass
    named = repr(value[:100]) if isinstance(value, str) else f"a value of type {type(value).__name__}"
    raise ValidationFailed(f"{field} is not a day written YYYY-MM-DD: {named}", details={"field": field},
                           code="invalid_date")
