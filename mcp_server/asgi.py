"""The MCP endpoint as ASGI, mounted next to Django: ``/mcp`` (each tool call names its
``subject``) and ``/mcp/subjects/<external_id>``. An agent token is required (401 before the MCP
layer); Host and Origin are checked against Django's settings (DNS-rebinding protection). The SDK
runs stateless, so any process can answer any request."""

from __future__ import annotations

import io
import json
import logging
from contextlib import AsyncExitStack
from urllib.parse import quote, unquote, urlsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse
from django.middleware.security import SecurityMiddleware
from django.http.request import split_domain_port, validate_host
from django.db import OperationalError
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from engram_core.errors import (
    AuthenticationFailed,
    EngramError,
    NotFound,
    PermissionDenied,
    ServiceUnavailable,
    ValidationFailed,
    database_busy,
)
from engram_core.observability import metrics
from api.auth import token_rate_check
from memory_app.metering import usage_count
from tenants.services.tokens import agent_token_authenticate

from .handlers import Caller
from .server import CALLER_SCOPE_KEY, build_server
from .threads import run_sync

log = logging.getLogger(__name__)

PREFIX = "/mcp"
SUBJECTS = "subjects"


class MethodNotAllowed(EngramError):
    code, status = "method_not_allowed", 405


class McpEndpoint:
    """Checks host, origin and agent token, reads the end-user from the path, then hands the
    request to the SDK's Streamable HTTP session manager."""

    def __init__(self, server: MCPServer, *, prefix: str = PREFIX):
        self.prefix = prefix
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            # Host and Origin are checked here, with Django's settings, before the SDK sees the request.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            # The REST API's limit for everything but imports (MCP has no import tool).
            max_request_body_size=settings.ENGRAM_API_MAX_BODY_BYTES,
        )
        self.session_manager = server.session_manager
        self.running = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        redirect, secure_headers = _security(scope)
        if redirect is not None:
            await send({"type": "http.response.start", "status": redirect.status_code,
                        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in redirect.items()]})
            await send({"type": "http.response.body", "body": b""})
            return
        send = _adding(send, secure_headers)
        headers = Headers(scope=scope)
        try:
            _check_host(headers)
            if scope["method"] != "POST":
                raise MethodNotAllowed("the MCP endpoint takes POST only (stateless Streamable HTTP: no GET stream, "
                                       "no session to DELETE)")
            token = await _authenticate(headers)
            metrics.TENANT_REQUESTS.labels(str(token.tenant_id), "mcp").inc()  # the tenant's id, never its name
            usage_count(tenant_id=token.tenant_id, requests=1)
            await run_sync(token_rate_check, token=token)  # one budget per token, REST and MCP
            caller = Caller(token=token, subject=self._subject(scope))
            if not self.running:
                raise ServiceUnavailable("the MCP endpoint is not running: serve the application with an ASGI "
                                         "server that runs the lifespan protocol (e.g. uvicorn)",
                                         code="mcp_not_started")
        except EngramError as exc:
            await _error(send, exc)
            return
        except OperationalError as exc:
            if (busy := database_busy(exc)) is None:
                raise
            await _error(send, busy)
            return
        await self.session_manager.handle_request({**scope, CALLER_SCOPE_KEY: caller}, receive, send)

    def _subject(self, scope: Scope) -> str | None:
        """The end-user the path names (None for the bare endpoint); NotFound for any other path.

        Read from the raw path so an id holding an encoded "/" stays one segment."""
        raw = scope.get("raw_path")
        path = raw.decode("latin-1").partition("?")[0] if raw else quote(scope["path"])
        if not path.startswith(self.prefix):
            path = quote(scope["path"])
        parts = [p for p in path[len(self.prefix):].split("/") if p]
        if not parts:
            return None
        if len(parts) == 2 and parts[0] == SUBJECTS and (external_id := unquote(parts[1]).strip()):
            return external_id
        raise NotFound(f"no MCP endpoint here; use {self.prefix} or {self.prefix}/{SUBJECTS}/<external_id>")


def _security(scope: Scope) -> tuple[HttpResponse | None, list[tuple[bytes, bytes]]]:
    """Django's SecurityMiddleware, as every other path gets it: its redirect to HTTPS (None when
    there is none to make) and the headers it adds to a response (HSTS over HTTPS, nosniff,
    Referrer-Policy, Cross-Origin-Opener-Policy). Built per request: it reads settings when built."""
    middleware = SecurityMiddleware(lambda request: HttpResponse())
    request = ASGIRequest(scope, io.BytesIO())
    try:
        if (redirect := middleware.process_request(request)) is not None:
            return redirect, []
    except DisallowedHost:
        pass  # refused by the endpoint's own Host check, with the API's error body
    response = middleware.process_response(request, HttpResponse())
    added = [(k, v) for k, v in response.items() if k.lower() != "content-type"]
    return None, [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in added]


def _adding(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message) -> None:
        if message["type"] == "http.response.start" and extra:
            present = {k.lower() for k, _ in message.get("headers", [])}
            message = {**message, "headers": [*message.get("headers", []), *(h for h in extra if h[0] not in present)]}
        await send(message)
    return sending


def _check_host(headers: Headers) -> None:
    allowed = _allowed_hosts()
    host, _port = split_domain_port(headers.get("host", ""))
    if not host or not validate_host(host, allowed):
        raise ValidationFailed("invalid Host header", code="invalid_host")
    origin = headers.get("origin")
    if origin and origin not in settings.CSRF_TRUSTED_ORIGINS:
        try:
            netloc = urlsplit(origin).netloc
        except ValueError:  # "http://[::1": a client's header is no URL; refused as any unknown origin
            netloc = ""
        origin_host, _port = split_domain_port(netloc)
        if not origin_host or not validate_host(origin_host, allowed):
            raise PermissionDenied("requests from this Origin are not allowed", code="invalid_origin")


def _allowed_hosts() -> list[str]:
    # Django's own default when DEBUG is on and ALLOWED_HOSTS is empty.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return settings.ALLOWED_HOSTS


async def _authenticate(headers: Headers):
    scheme, _, raw = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise AuthenticationFailed("send the agent token as 'Authorization: Bearer <token>'")
    return await run_sync(agent_token_authenticate, raw=raw.strip())


async def _error(send: Send, exc: EngramError) -> None:
    metrics.API_ERRORS.labels(exc.code, str(exc.status), "mcp").inc()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    if isinstance(exc, AuthenticationFailed):
        headers.append((b"www-authenticate", b'Bearer realm="engram"'))
    elif isinstance(exc, MethodNotAllowed):
        headers.append((b"allow", b"POST"))
    wait = getattr(exc, "retry_after", None)
    if not wait and exc.status == 503:
        wait = settings.ENGRAM_API_RETRY_AFTER_SECONDS
    if wait:
        headers.append((b"retry-after", str(wait).encode()))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"error": exc.as_dict()}).encode()})


class PrefixRouter:
    """Sends HTTP requests under ``prefix`` to the MCP endpoint and everything else to Django;
    runs the MCP session manager for the lifetime of the process (ASGI lifespan)."""

    def __init__(self, default: ASGIApp, endpoint: McpEndpoint):
        self.default = default
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and _under(scope["path"], self.endpoint.prefix):
            await self.endpoint(scope, receive, send)
        else:
            await self.default(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        # Entered and left in this one task, as the SDK's task group requires.
        async with AsyncExitStack() as stack:
            await receive()  # lifespan.startup
            try:
                await stack.enter_async_context(self.endpoint.session_manager.run())
            except Exception as exc:  # reported to the server, which refuses to start
                log.exception("the MCP session manager did not start")
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            self.endpoint.running = True
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            self.endpoint.running = False
        await send({"type": "lifespan.shutdown.complete"})


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def mount(django_app: ASGIApp, *, prefix: str = PREFIX) -> PrefixRouter:
    """The ASGI application: Django, with the MCP endpoint at ``prefix``."""
    return PrefixRouter(django_app, McpEndpoint(build_server(), prefix=prefix))
