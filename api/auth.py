"""Agent-token authentication, scope permissions and per-token rate limits."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace
from uuid import uuid4

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.throttling import SimpleRateThrottle
from redis.exceptions import RedisError

from engram_core.errors import AuthenticationFailed, EngramError, PermissionDenied
from memory_app.observability import request_tenant
from tenants.models import AgentToken
from tenants.services.tokens import agent_token_authenticate


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
        request_tenant(request._request, token.tenant_id)  # per-tenant counts (memory_app.observability)
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


# DRF's sliding log of a token's requests, checked and appended in one step: drop the entries older
# than the period, count the rest, add this request only if it fits. Returns {1, count} or {0, count,
# the oldest entry's time}.
_SLIDING_LOG = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
local count = redis.call('ZCARD', KEYS[1])
if count < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
  return {1, count + 1}
end
return {0, count, redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]}
"""


log = logging.getLogger(__name__)


class TokenRateThrottle(SimpleRateThrottle):
    """Requests per agent token, at ``ENGRAM_API_RATES[scope]`` (read per request, so settings apply live).

    DRF's sliding log (at most the rate's number of requests in any period), kept atomic: DRF's own
    ``SimpleRateThrottle`` reads the token's list of timestamps, adds one and writes the list back,
    so concurrent requests of one token overwrite each other's entries and get through at several
    times the rate (eight threads at 50/minute: 200 of 200 on Redis). In the shared Redis cache the
    log is a sorted set checked and appended by one script; in a cache of this process alone (tests,
    a single process) DRF's code runs under a lock."""

    scope = "agent"
    _local = threading.Lock()
    _oldest: float | None = None
    # Each token's log in this process, while the shared cache is unreachable.
    _fallback: dict[str, list[float]] = {}
    _down_logged = 0.0

    def get_rate(self) -> str | None:
        return settings.ENGRAM_API_RATES.get(self.scope)

    def get_cache_key(self, request, view) -> str | None:
        if request.auth is None:
            return None
        return f"engram-throttle:{self.scope}:{request.auth.pk}"

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        script = getattr(self.cache, "redis_script", None)  # the shared Redis cache (config.cache)
        if script is None:
            with self._local:
                return super().allow_request(request, view)
        self.key = key = self.get_cache_key(request, view)
        if key is None:
            return True
        self.now = self.timer()
        try:
            answer = script(_SLIDING_LOG)(keys=[self.cache.make_key(f"{self.key}:log")], args=[
                repr(self.now), self.duration, self.num_requests, f"{self.now!r}:{uuid4().hex}"])
        except RedisError as exc:
            return self._allowed_here(exc, key=key)
        if answer[0]:
            return True
        self._oldest = float(answer[2]) if len(answer) > 2 and answer[2] is not None else self.now
        return False

    def _allowed_here(self, exc: Exception, *, key: str) -> bool:
        """The same sliding log, kept in this process while the shared cache is unreachable: the
        limit then holds per server process (N processes let N times the rate through)."""
        with self._local:
            if time.monotonic() - TokenRateThrottle._down_logged > 60:
                TokenRateThrottle._down_logged = time.monotonic()
                log.warning("rate limits counted per process: the shared cache is unreachable (%s: %s)",
                            type(exc).__name__, exc)
            entries = [t for t in self._fallback.get(key, []) if t > self.now - self.duration]
            allowed = len(entries) < self.num_requests
            if allowed:
                entries.append(self.now)
            else:
                self._oldest = entries[0]
            self._fallback[key] = entries
            return allowed

    def wait(self) -> float | None:
        if self._oldest is None:
            return super().wait()
        return max(0.0, self._oldest + self.duration - self.now)


class ImportRateThrottle(TokenRateThrottle):
    scope = "import"


class RateLimited(EngramError):
    code, status = "rate_limited", 429
    retry_after: int | None = None  # seconds, for the Retry-After header


def token_rate_check(*, token: AgentToken) -> None:
    """The REST API's per-token rate limit, for requests that are not DRF views (the MCP endpoint):
    both share one budget per token. Raises RateLimited (with ``retry_after``) when it is spent."""
    throttle = TokenRateThrottle()
    if not throttle.allow_request(SimpleNamespace(auth=token), None):
        wait = max(1, int((throttle.wait() or 1) + 0.999))
        exc = RateLimited("request was throttled", details={"retry_after": wait})
        exc.retry_after = wait
        raise exc
