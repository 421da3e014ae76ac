"""One application error path: every expected failure is an EngramError with a code and a status.

The API maps these (and only these) into ``{"error": {"code", "message", "details"}}``.
"""

from __future__ import annotations

from typing import Any


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


class PermissionDenied(EngramError):
    code, status = "forbidden", 403


class NotFound(EngramError):
    code, status = "not_found", 404


class Conflict(EngramError):
    code, status = "conflict", 409


class ServiceUnavailable(EngramError):
    code, status = "unavailable", 503
