"""One application error path: every expected failure is an EngramError with a code and a status.

Shared by every app (``memory_app``, ``tenants``, ``inspector``). The API maps these (and only
these) into ``{"error": {"code", "message", "details"}}`` (``api.exceptions``); the MCP
server into tool errors with the same codes.
"""

from __future__ import annotations

from typing import Any

from django.db import OperationalError


class EngramError(Exception):
    code: str = "error"
    status: int = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, code: str | None = None,
                 status: int | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}
        if code:
            self.code = code
        if status:
            self.status = status

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class ValidationFailed(EngramError):
    code, status = "invalid", 400


class AuthenticationFailed(EngramError):
    """The credential is missing, malformed, unknown or revoked: one answer for all of them."""

    code, status = "unauthenticated", 401


class PermissionDenied(EngramError):
    code, status = "forbidden", 403


class NotFound(EngramError):
    code, status = "not_found", 404


class Conflict(EngramError):
    code, status = "conflict", 409


class ServiceUnavailable(EngramError):
    code, status = "unavailable", 503


class DatabaseBusy(ServiceUnavailable):
    """The database stayed locked past its busy timeout: retry shortly (503 + Retry-After)."""

    code = "database_busy"
    retry_after = 2


# SQLite's messages for a lock held past the busy timeout; PostgreSQL's SQLSTATEs for
# lock_not_available, serialization_failure and deadlock_detected.
_BUSY_MESSAGES = ("database is locked", "database table is locked")
_BUSY_SQLSTATES = {"55P03", "40001", "40P01"}


def database_busy(exc: BaseException) -> DatabaseBusy | None:
    """``exc`` as a DatabaseBusy when it is a database lock/contention failure, else None."""
    if not isinstance(exc, OperationalError):
        return None
    cause = exc.__cause__
    if any(m in str(exc).lower() for m in _BUSY_MESSAGES) or getattr(cause, "sqlstate", None) in _BUSY_SQLSTATES \
            or getattr(cause, "pgcode", None) in _BUSY_SQLSTATES:
        return DatabaseBusy("the database is busy; retry shortly", details={"retry_after": DatabaseBusy.retry_after})
    return None
