"""Agent-token authentication, scope permissions and per-token rate limits."""

from __future__ import annotations

from types import SimpleNamespace

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.throttling import SimpleRateThrottle

from engram_core.errors import AuthenticationFailed, EngramError, PermissionDenied
from tenants.models import AgentToken
from tenants.services import agent_token_authenticate


class AgentTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <agent token>``; ``request.auth`` is the AgentToken (its tenant loaded)."""

    def authenticate(self, request):
        header = get_authorization_header(request)
        if not header:
            return None
        scheme, _, raw = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise AuthenticationFailed("the Authorization header must be 'Bearer <agent token>'")
        token = agent_token_authenticate(raw=raw)
        return token, token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="engram"'


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = AgentTokenAuthentication
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A tenant agent token (`eng_…`), with scopes."}


class HasScope(BasePermission):
    """The token must hold the scope the view names for the method (``view.scopes``)."""

    def has_permission(self, request, view) -> bool:
        token: AgentToken | None = request.auth
        if token is None:
            return False  # DRF answers 401: no credential was presented
        method = request.method.lower()
        needed = view.scopes.get("get" if method == "head" else method)
        if needed is None:
            return True  # not an operation of this view: DRF answers 405
        needed = (needed,) if isinstance(needed, str) else needed
        if not any(token.has_scope(s) for s in needed):
            raise PermissionDenied(f"this agent token lacks the {' or '.join(needed)} scope",
                                   details={"required_scope": list(needed)}, code="insufficient_scope")
        return True


class TokenRateThrottle(SimpleRateThrottle):
    """Requests per agent token, at ``ENGRAM_API_RATES[scope]`` (read per request, so settings apply live)."""

    scope = "agent"

    def get_rate(self) -> str | None:
        return settings.ENGRAM_API_RATES.get(self.scope)

    def get_cache_key(self, request, view) -> str | None:
        if request.auth is None:
            return None
        return f"engram-throttle:{self.scope}:{request.auth.pk}"


class ImportRateThrottle(TokenRateThrottle):
    scope = "import"


class RateLimited(EngramError):
    code, status = "rate_limited", 429


def token_rate_check(*, token: AgentToken) -> None:
    """The REST API's per-token rate limit, for requests that are not DRF views (the MCP endpoint):
    both share one budget per token. Raises RateLimited (with ``retry_after``) when it is spent."""
    throttle = TokenRateThrottle()
    if not throttle.allow_request(SimpleNamespace(auth=token), None):
        wait = max(1, int((throttle.wait() or 1) + 0.999))
        exc = RateLimited("request was throttled", details={"retry_after": wait})
        exc.retry_after = wait
        raise exc
