"""Validation both apps need: an end-user's external id (``tenants`` creates end-users; every
memory call names one)."""

from __future__ import annotations

import unicodedata
from typing import Any

from engram_core.errors import ValidationFailed


def clean_external_id(value: Any) -> str:
    """An end-user's external id: 1-200 characters (after trimming) without control characters."""
    external_id = value.strip() if isinstance(value, str) else ""
    if not 1 <= len(external_id) <= 200 or any(unicodedata.category(c) in ("Cc", "Cs") for c in external_id):
        raise ValidationFailed("external_id must be 1-200 characters without control characters",
                               details={"field": "external_id"}, code="invalid_external_id")
    return external_id
