"""Tenants' additions to the application error family (memory_app.errors)."""

from memory_app.errors import EngramError


class AuthenticationFailed(EngramError):
    """The credential is missing, malformed, unknown or revoked: one answer for all of them."""

    code, status = "unauthenticated", 401
