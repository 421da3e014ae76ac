"""The mount in-process: routing by prefix, the lifespan, and what is refused before any token lookup."""

from __future__ import annotations

import json

import anyio
import pytest

from engram_core.errors import NotFound
from mcp_server.asgi import McpEndpoint, PrefixRouter
from mcp_server.server import build_server


async def _http(app, *, path="/mcp", method="POST", headers=None, raw_path=None):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    headers = {"host": "localhost:8000", **(headers or {})}
    await app({"type": "http", "method": method, "path": path, "raw_path": raw_path or path.encode(),
               "query_string": b"", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]},
              receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


class _Recorder:
    def __init__(self):
        self.paths = []

    async def __call__(self, scope, receive, send):
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def endpoint():
    return McpEndpoint(build_server())


def test_only_the_mcp_prefix_leaves_django(endpoint):
    django = _Recorder()
    router = PrefixRouter(django, endpoint)

    for path in ("/healthz", "/mcpx", "/api/v1/subjects/a/recall"):
        assert anyio.run(lambda: _http(router, path=path))[0] == 204
    status, _headers, _body = anyio.run(lambda: _http(router, path="/mcp/subjects/alice"))

    assert django.paths == ["/healthz", "/mcpx", "/api/v1/subjects/a/recall"]
    assert status == 401  # the MCP endpoint answered


def test_lifespan_runs_the_session_manager(endpoint):
    router = PrefixRouter(_Recorder(), endpoint)
    sent = []

    async def scenario():
        inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
        started = anyio.Event()

        async def receive():
            message = inbox.pop(0)
            if message["type"] == "lifespan.shutdown":
                await started.wait()
            return message

        async def send(message):
            sent.append(message["type"])
            if message["type"] == "lifespan.startup.complete":
                assert endpoint.running
                started.set()

        await router({"type": "lifespan"}, receive, send)

    anyio.run(scenario)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert not endpoint.running


@pytest.mark.parametrize(("headers", "method", "status", "code"), [
    ({}, "POST", 401, "unauthenticated"),
    ({"authorization": "Basic dXNlcjpwdw=="}, "POST", 401, "unauthenticated"),
    ({"authorization": "Bearer "}, "POST", 401, "unauthenticated"),
    ({"host": "evil.example"}, "POST", 400, "invalid_host"),
    ({"origin": "http://evil.example"}, "POST", 403, "invalid_origin"),
    ({}, "GET", 405, "method_not_allowed"),
    ({}, "DELETE", 405, "method_not_allowed"),
])
def test_refusals_come_in_the_engram_error_format(endpoint, headers, method, status, code):
    got_status, got_headers, body = anyio.run(lambda: _http(endpoint, method=method, headers=headers))

    assert (got_status, json.loads(body)["error"]["code"]) == (status, code)
    if status == 401:
        assert got_headers["www-authenticate"].startswith("Bearer")
    if status == 405:
        assert got_headers["allow"] == "POST"


def test_a_same_host_origin_is_allowed(endpoint):
    status, _headers, body = anyio.run(lambda: _http(endpoint, headers={"origin": "http://localhost:8000"}))
    assert (status, json.loads(body)["error"]["code"]) == (401, "unauthenticated")


@pytest.mark.parametrize(("raw_path", "subject"), [
    (b"/mcp", None),
    (b"/mcp/", None),
    (b"/mcp/subjects/alice", "alice"),
    (b"/mcp/subjects/alice/", "alice"),
    (b"/mcp/subjects/user%2F42%20b", "user/42 b"),
])
def test_the_path_names_the_end_user(endpoint, raw_path, subject):
    assert endpoint._subject({"raw_path": raw_path, "path": raw_path.decode()}) == subject


@pytest.mark.parametrize("raw_path", [b"/mcp/subjects", b"/mcp/subjects/", b"/mcp/subjects/a/b", b"/mcp/tools",
                                      b"/mcp/subjects/%20"])
def test_other_paths_under_the_prefix_are_not_found(endpoint, raw_path):
    with pytest.raises(NotFound):
        endpoint._subject({"raw_path": raw_path, "path": raw_path.decode()})


def test_a_locked_database_answers_503_with_retry_after(endpoint, monkeypatch):
    from django.db import OperationalError

    from mcp_server import asgi

    def locked(**kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(asgi, "agent_token_authenticate", locked)
    status, headers, body = anyio.run(lambda: _http(endpoint, headers={"authorization": "Bearer eng_x"}))

    assert (status, json.loads(body)["error"]["code"]) == (503, "database_busy")
    assert headers["retry-after"] == "2"


@pytest.mark.django_db(transaction=True)
def test_mcp_requests_share_the_tokens_rate_limit(endpoint, settings):
    from django.core.cache import cache

    from tenants.models import Tenant
    from tenants.services.tokens import agent_token_create

    cache.clear()
    settings.ENGRAM_API_RATES = {**settings.ENGRAM_API_RATES, "agent": "2/minute"}
    tenant = Tenant.objects.create(slug="rate", name="Rate")
    _token, raw = agent_token_create(tenant=tenant, name="a", scopes=["memory:read"], actor="test")
    endpoint.running = True
    auth = {"authorization": f"Bearer {raw}"}
    statuses = []
    for _ in range(3):
        status, headers, body = anyio.run(lambda: _http(endpoint, path="/mcp/nowhere", headers=auth))
        statuses.append(status)
    # The first two pass the limit (and are refused for their path); the third is throttled.
    assert statuses == [404, 404, 429]
    assert json.loads(body)["error"]["code"] == "rate_limited" and int(headers["retry-after"]) >= 1
    cache.clear()


def test_mcp_body_limit_is_the_rest_apis(settings):
    captured = {}
    server = build_server()
    real = server.streamable_http_app

    def spy(**kwargs):
        captured.update(kwargs)
        return real(**kwargs)

    server.streamable_http_app = spy
    McpEndpoint(server)
    assert captured["max_request_body_size"] == settings.ENGRAM_API_MAX_BODY_BYTES < 16 * 1024 * 1024


def test_the_endpoint_has_the_https_rules_of_every_other_path(endpoint, settings):
    """/mcp is served beside Django, not through its middleware: it applies SecurityMiddleware
    itself (issue 67), so production redirects plain HTTP and sends HSTS over HTTPS."""
    settings.ALLOWED_HOSTS = ["localhost"]
    settings.SECURE_SSL_REDIRECT, settings.SECURE_HSTS_SECONDS = True, 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    status, headers, _body = anyio.run(lambda: _http(endpoint, path="/mcp/subjects/alice"))
    assert status == 301 and headers["location"] == "https://localhost:8000/mcp/subjects/alice"
    status, headers, _body = anyio.run(lambda: _http(endpoint, headers={"x-forwarded-proto": "https"}))
    assert status == 401  # past the redirect: the token check answers
    assert headers["strict-transport-security"] == "max-age=3600"
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "same-origin"


# ---------------------------------------------------------------- any header value

from hypothesis import HealthCheck, example, given, settings as hypothesis_settings, strategies as st  # noqa: E402

from tests.strategies import texts  # noqa: E402

# What a server hands the application: a header's bytes, whatever the client wrote (read as Latin-1).
_header_values = st.one_of(texts, st.text(st.characters(max_codepoint=255), max_size=40),
                           st.builds(lambda scheme, rest: f"{scheme}://{rest}", st.sampled_from(["http", "https", ""]),
                                     st.text("[]:@/?#.0123456789abcdefz%", max_size=20)))
_HEADERS = ("host", "origin", "authorization", "content-type", "accept", "mcp-protocol-version",
            "x-forwarded-proto", "content-length")


@hypothesis_settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(headers={"origin": "http://[::1"})  # urlsplit raised ValueError: the ASGI server answered 500
@given(headers=st.dictionaries(st.sampled_from(_HEADERS), _header_values, max_size=4))
def test_any_header_value_is_refused_in_the_error_format_never_a_500(db, endpoint, headers):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    raw = [(k.encode(), v.encode("utf-8", "surrogatepass")) for k, v in {"host": "localhost:8000", **headers}.items()]
    anyio.run(lambda: endpoint({"type": "http", "method": "POST", "path": "/mcp", "raw_path": b"/mcp",
                                "query_string": b"", "headers": raw}, receive, send))
    status = sent[0]["status"]
    assert status < 500 or status == 503, (headers, sent)
    if status >= 400:
        body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
        assert set(body["error"]) == {"code", "message", "details"}, body
