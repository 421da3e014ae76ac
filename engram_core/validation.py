"""Validation both apps need: an end-user's external id (``tenants`` creates end-users; every
memory call names one)."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError

from engram_core.errors import ValidationFailed

# Path segments a URL client rewrites or splits (RFC 3986 dot segments, the separator): an end-user
# so named could be created, but never addressed as /api/v1/subjects/<external_id>/… or
# /mcp/subjects/<external_id>.
_UNADDRESSABLE = "external_id must not contain '/' nor be '.' or '..': it is a segment of the API's URLs"
# An erased end-user's row stays as a tombstone named ``erased:<user_id>`` (and its settled outbox
# entries as ``erased``): an end-user so named could take the name another's erase needs.
ERASED_PREFIX = "erased:"
_RESERVED = f"external_id must not be 'erased' nor start with {ERASED_PREFIX!r}: the names of erased end-users"


def clean_external_id(value: Any, *, new: bool = False) -> str:
    """An end-user's external id: 1-200 characters (after trimming) without control characters.
    ``new``: the id of an end-user about to be created, which must also be addressable in a URL
    path (see ``_UNADDRESSABLE``) and outside the erased end-users' names (``_RESERVED``); an
    existing end-user is found by the id it has."""
    external_id = value.strip() if isinstance(value, str) else ""
    if not 1 <= len(external_id) <= 200 or any(unicodedata.category(c) in ("Cc", "Cs") for c in external_id):
        raise ValidationFailed("external_id must be 1-200 characters without control characters",
                               details={"field": "external_id"}, code="invalid_external_id")
    if new and ("/" in external_id or external_id in (".", "..")):
        raise ValidationFailed(_UNADDRESSABLE, details={"field": "external_id"}, code="invalid_external_id")
    if new and (external_id.casefold() == "erased" or external_id.casefold().startswith(ERASED_PREFIX)):
        raise ValidationFailed(_RESERVED, details={"field": "external_id"}, code="invalid_external_id")
    return external_id


def validate_new_external_id(value: Any) -> None:
    """``clean_external_id(new=True)`` as a Django validator (the admin's form)."""
    try:
        clean_external_id(value, new=True)
    except ValidationFailed as exc:
        raise DjangoValidationError(exc.message, code="invalid_external_id") from exc
