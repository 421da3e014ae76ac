"""End to end: the real ASGI application in a uvicorn process, driven by the MCP SDK's own client.

The server runs with the development settings, everything from the environment: a file SQLite
database of its own (migrated, with tenants and agent tokens, by tests.mcp_server.server_env), its own
index prefix, encryption key and state directory, and the test run's Elasticsearch. Afterwards
every key it minted is invalidated and its indices are dropped.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from mcp.client import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from config.serving import UVICORN_FLAGS

ROOT = Path(settings.BASE_DIR)
TOOLS = {"recall_memory", "write_memory", "forget_memory", "record_outcome"}


@dataclass(frozen=True)
class Server:
    url: str
    tokens: dict[str, str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(es_admin, tmp_path_factory):
    state = tmp_path_factory.mktemp("mcp-server")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.dev",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": uuid.uuid4().hex,
        "DATABASE_URL": f"sqlite:///{state / 'db.sqlite3'}",
        "ENGRAM_STATE_DIR": str(state),
        "ENGRAM_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "ENGRAM_AUDIT_KEYS": Fernet.generate_key().decode(),
        "ENGRAM_AUDIT_SIGNING_KEYS": Fernet.generate_key().decode(),
        # Under the run's prefix, so the run's own clean-up would catch what this one missed.
        "ES_INDEX_PREFIX": f"{settings.ES_INDEX_PREFIX}-mcp-{uuid.uuid4().hex[:8]}",
    }

    def manage(command: str) -> str:
        done = subprocess.run([sys.executable, "-m", "tests.mcp_server.server_env", command], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    try:
        tokens = json.loads(manage("setup"))
        port = _free_port()
        log = (state / "server.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), "--lifespan", "on", "--log-level", "warning", *UVICORN_FLAGS],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_until_up(url, process, state / "server.log")
            yield Server(url=url, tokens=tokens)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()
    finally:
        manage("teardown")


def _wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120  # a loaded machine: model load and the onnx graph build
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            httpx.get(f"{url}/healthz", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail(f"the server did not start within 120 s:\n{log.read_text()}")


@asynccontextmanager
async def legacy_session(url: str, token: str):
    """A ClientSession over Streamable HTTP with the initialize handshake (clients of 2025 revisions)."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def modern_client(url: str, token: str):
    """The SDK's high-level Client: it discovers the server and speaks the newest revision it shares."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(session, tool: str, **arguments) -> tuple[bool, dict]:
    result = await session.call_tool(tool, arguments)
    payload = json.loads(result.content[0].text)
    assert result.structured_content == payload
    return bool(result.is_error), payload


async def ok(session, tool: str, **arguments) -> dict:
    is_error, payload = await call(session, tool, **arguments)
    assert not is_error, payload
    return payload


async def error_code(session, tool: str, **arguments) -> str:
    is_error, payload = await call(session, tool, **arguments)
    assert is_error, payload
    return payload["error"]["code"]


def ids(recalled: dict) -> set[str]:
    return {m["id"] for m in recalled["memories"]}


def test_http_level_authentication_and_routing(server):
    mcp = f"{server.url}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}

    missing = httpx.post(mcp, json=body, headers=headers)
    invalid = httpx.post(mcp, json=body, headers={**headers, "authorization": "Bearer eng_000000000000_" + "x" * 43})
    valid = {**headers, "authorization": f"Bearer {server.tokens['acme']}"}
    elsewhere = httpx.post(f"{mcp}/elsewhere", json=body, headers=valid)
    listed = httpx.post(mcp, json=body, headers=valid)

    assert missing.status_code == invalid.status_code == 401
    assert missing.json()["error"]["code"] == invalid.json()["error"]["code"] == "unauthenticated"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert elsewhere.status_code == 404
    assert listed.status_code == 200 and {t["name"] for t in listed.json()["result"]["tools"]} == TOOLS
    assert httpx.get(f"{server.url}/healthz").status_code in (200, 503)  # Django still answers beside /mcp


def test_django_is_served_beside_mcp_with_bodies_limits_and_static_files(server):
    """Django runs as WSGI on the server's thread pool (config.asgi): request bodies in,
    JSON and files out, the body limit, the same answer however many requests a thread serves."""
    headers = {"authorization": f"Bearer {server.tokens['acme']}"}
    api = f"{server.url}/api/v1/subjects/carol"
    fact = {"type": "semantic", "text": "Carol's gym locker is number 42, by the pool entrance."}
    written = httpx.post(f"{api}/memories", json=fact, headers=headers, timeout=60)
    recalls = [httpx.post(f"{api}/recall", json={"query": "Which gym locker is Carol's?", "k": 3}, headers=headers,
                          timeout=60) for _ in range(3)]
    too_large = httpx.post(f"{api}/recall", content=b'{"query": "' + b"x" * (settings.ENGRAM_API_MAX_BODY_BYTES + 1)
                           + b'"}', headers={**headers, "content-type": "application/json"}, timeout=60)
    css = httpx.get(f"{server.url}/static/inspector/inspector.css")
    missing = httpx.get(f"{server.url}/static/inspector/no-such-file.css")

    assert written.status_code == 201, written.text
    assert all(r.status_code == 200 for r in recalls)
    assert [m["text"] for m in recalls[-1].json()["memories"]][:1] == [fact["text"]]
    assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "request_too_large"
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert css.content == (ROOT / "inspector/static/inspector/inspector.css").read_bytes()
    assert missing.status_code == 404


def test_tools_are_listed_with_schemas_and_descriptions(server):
    async def scenario():
        async with legacy_session(f"{server.url}/mcp/subjects/alice", server.tokens["acme"]) as session:
            return (await session.list_tools()).tools

    tools = {t.name: t for t in anyio.run(scenario)}

    assert set(tools) == TOOLS
    assert "supersede" in tools["write_memory"].description and "harsh" in tools["write_memory"].description
    assert tools["write_memory"].input_schema["properties"]["type"]["enum"] == ["episodic", "semantic", "procedural"]
    assert tools["recall_memory"].input_schema["required"] == ["query"]
    assert tools["forget_memory"].input_schema["required"] == ["id", "reason"]
    assert tools["record_outcome"].input_schema["required"] == ["playbook_id", "success"]
    assert tools["recall_memory"].annotations.read_only_hint and tools["forget_memory"].annotations.destructive_hint


def test_recall_write_forget_for_two_end_users_without_crossing(server):
    async def scenario():
        # Alice's agent pins her in the URL and speaks the 2025 handshake; Bob's names him in each
        # call on the bare endpoint and speaks the newest revision.
        async with (
            legacy_session(f"{server.url}/mcp/subjects/alice", server.tokens["acme"]) as alice,
            modern_client(f"{server.url}/mcp", server.tokens["acme"]) as bob_agent,
        ):
            assert alice.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert bob_agent.protocol_version in MODERN_PROTOCOL_VERSIONS

            async def bob(tool, **arguments):
                return await call(bob_agent, tool, subject="bob", **arguments)

            lyon = (await ok(alice, "write_memory", type="semantic", text="Alice lives in Lyon"))["memory"]["id"]
            cat = (await ok(alice, "write_memory", type="semantic", text="Alice has a cat called Miso"))["memory"]["id"]
            dog_error, dog = await bob("write_memory", type="semantic", text="Bob has a dog called Rex")
            assert not dog_error, dog
            turn_error, turn = await bob("write_memory", type="episodic", text="I'm flying to Oslo on Friday")
            assert not turn_error, turn

            # Each recall sees its own end-user's memories only.
            alices = await ok(alice, "recall_memory", query="what pet is there and what is it called", k=10)
            bob_error, bobs = await bob("recall_memory", query="what pet is there and what is it called", k=10)
            assert not bob_error, bobs
            assert cat in ids(alices) and dog["memory"]["id"] not in ids(alices)
            assert dog["memory"]["id"] in ids(bobs) and not {cat, lyon} & ids(bobs)
            assert turn["memory"]["id"] not in ids(await ok(alice, "recall_memory", query="flying to Oslo"))

            # Bob's agent cannot forget or supersede Alice's memory: it does not exist for Bob.
            assert (await bob("forget_memory", id=cat, reason="user_request")) == (True, {"error": {
                "code": "not_found", "message": f"no memory {cat!r} for this subject", "details": {"id": cat}}})
            superseding_error, superseding = await bob("write_memory", type="semantic", text="x", supersedes=[cat])
            assert superseding_error and superseding["error"]["code"] == "not_found"
            assert cat in ids(await ok(alice, "recall_memory", query="cat called Miso"))

            # Alice moved: the new fact supersedes the old one, which stays as history.
            porto = (await ok(alice, "write_memory", type="semantic", text="Alice lives in Porto",
                              supersedes=[lyon], contradiction="natural"))["memory"]
            assert porto["supersedes"] == [lyon]
            where = await ok(alice, "recall_memory", query="where does Alice live")
            assert porto["id"] in ids(where) and lyon not in ids(where)
            history = await ok(alice, "recall_memory", query="where does Alice live", include_superseded=True)
            assert {m["id"]: m.get("superseded_by") for m in history["memories"] if m["id"] in (lyon, porto["id"])
                    } == {lyon: [porto["id"]], porto["id"]: None}

            # Alice asks to forget her cat; Bob's dog is untouched.
            assert await ok(alice, "forget_memory", id=cat, reason="user_request") == {
                "subject": "alice", "forgotten": cat, "status": "applied",
                "cascade": {"forgotten": [], "flagged": [], "kept": []}}
            assert cat not in ids(await ok(alice, "recall_memory", query="cat called Miso"))
            assert await error_code(alice, "forget_memory", id=cat, reason="user_request") == "not_found"
            assert dog["memory"]["id"] in ids((await bob("recall_memory", query="dog called Rex"))[1])

            # A playbook and its outcome.
            playbook = (await ok(alice, "write_memory", type="procedural", trigger="Alice's router drops Wi-Fi",
                                 steps=["Unplug it", "Wait 30 seconds", "Plug it back in"]))["memory"]["id"]
            outcome = await ok(alice, "record_outcome", playbook_id=playbook, success=True)
            assert outcome["playbook"]["success_count"] == 1

    anyio.run(scenario)


def test_tool_errors_carry_engram_codes(server):
    async def scenario():
        async with (
            legacy_session(f"{server.url}/mcp/subjects/alice", server.tokens["acme"]) as alice,
            legacy_session(f"{server.url}/mcp/subjects/alice", server.tokens["acme_read"]) as reader,
            legacy_session(f"{server.url}/mcp/subjects/alice", server.tokens["globex"]) as other_tenant,
            legacy_session(f"{server.url}/mcp/subjects/nobody", server.tokens["acme"]) as nobody,
            legacy_session(f"{server.url}/mcp", server.tokens["acme"]) as unpinned,
        ):
            await ok(alice, "write_memory", type="episodic", text="Hello, I'm Alice")
            # Another tenant's end-user is exactly as unknown as one that does not exist.
            is_error, theirs = await call(other_tenant, "recall_memory", query="hello")
            is_error_too, unknown = await call(nobody, "recall_memory", query="hello")
            assert is_error and is_error_too and theirs["error"]["code"] == unknown["error"]["code"] == "not_found"
            assert theirs["error"]["message"] == unknown["error"]["message"]

            assert await error_code(reader, "write_memory", type="semantic", text="x") == "insufficient_scope"
            assert await error_code(reader, "forget_memory", id="0123456789abcdef", reason="other") == "insufficient_scope"
            assert await error_code(unpinned, "recall_memory", query="hello") == "subject_required"
            assert await error_code(alice, "recall_memory", query="hello", subject="bob") == "subject_mismatch"
            assert await error_code(alice, "write_memory", type="catalog", text="x") == "invalid_arguments"
            assert await error_code(alice, "recall_memory", query="hello", since="yesterday") == "invalid_datetime"
            assert await error_code(alice, "write_memory", type="semantic", text=" ") == "empty_text"

            # An argument the tool does not take is refused with the rest of the call: nothing is stored.
            is_error, refused = await call(alice, "write_memory", type="semantic", text="Alice keeps bees",
                                           sesion_id="s1")
            assert is_error and refused["error"]["code"] == "invalid_arguments"
            assert [e["field"] for e in refused["error"]["details"]["errors"]] == ["sesion_id"]
            recalled = await ok(alice, "recall_memory", query="Alice keeps bees", include_superseded=True)
            assert not [m for m in recalled["memories"] if "bees" in (m.get("text") or "")]
            # A NUL character in any argument is refused (an idempotency record could not keep the answer).
            is_error, refused = await call(alice, "forget_memory", id="abcdefgh\x00ij", reason="other",
                                           idempotency_key="nul-1")
            assert is_error and refused["error"]["code"] == "invalid_arguments"
            assert [e["field"] for e in refused["error"]["details"]["errors"]] == ["id"]
            assert await error_code(alice, "write_memory", type="episodic", text="Hi",
                                    metadata={"k": "a\x00"}) == "invalid_arguments"
            # A new end-user whose id could not be a URL segment is not created; nothing is written.
            assert await error_code(unpinned, "write_memory", type="episodic", text="Hi", subject="a/b") \
                == "invalid_external_id"
            assert await error_code(unpinned, "recall_memory", query="Hi", subject="a/b") == "not_found"

    anyio.run(scenario)


# ---------------------------------------------------------------- a small fuzz of the tools

from urllib.parse import quote  # noqa: E402

from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st  # noqa: E402

from tests.strategies import json_numbers, long_numbers, moments, nested_json, nested_json_text, texts  # noqa: E402

_ARGUMENTS = {
    "recall_memory": ("query", "k", "types", "since", "until", "include_superseded", "explain", "timezone", "subject",
                      "as_of"),
    "write_memory": ("type", "text", "trigger", "steps", "supersedes", "contradiction", "confidence", "occurred_at",
                     "session_id", "subject", "idempotency_key", "metadata"),
    "forget_memory": ("id", "reason", "note", "cascade", "subject", "idempotency_key"),
    "record_outcome": ("playbook_id", "success", "refined_steps", "subject", "idempotency_key"),
}
# Values as an agent may send them: the right kind now and then, anything JSON can carry otherwise
# (long numbers, times at the calendar's edges, JSON nested past what the server reads).
_values = st.one_of(texts, long_numbers, json_numbers, st.integers(), st.floats(), st.booleans(), st.none(),
                    moments.map(lambda m: m.isoformat()), st.sampled_from(["episodic", "semantic", "procedural",
                                                                           "user_request", "natural", "harsh", "fulfilled"]),
                    st.lists(texts, max_size=3), st.dictionaries(texts, texts, max_size=3),
                    st.integers(100, 600).map(nested_json))
_calls = st.lists(st.sampled_from(sorted(_ARGUMENTS)).flatmap(lambda tool: st.tuples(
    st.just(tool), st.dictionaries(st.sampled_from(_ARGUMENTS[tool]) | texts, _values, max_size=6))),
    min_size=4, max_size=16)


def _post(url: str, token: str, body: str) -> httpx.Response:
    return httpx.post(url, content=body.encode(), timeout=60, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})


def _failed_inside(response: httpx.Response) -> bool:
    """A 5xx, or a tool's answer that it failed unexpectedly (the tool boundary's internal_error)."""
    if response.status_code >= 500:
        return True
    text = response.text
    return '"internal_error"' in text or '\\"internal_error\\"' in text


@hypothesis_settings(max_examples=int(os.environ.get("ENGRAM_MCP_FUZZ_EXAMPLES", "15")),
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(calls=_calls, token=st.sampled_from(["acme", "acme_read", "globex"]),
       pinned=st.one_of(st.none(), st.just("alice"), texts.filter(lambda t: 0 < len(t) < 300)))
def test_the_tools_answer_whatever_they_are_sent_and_never_fail_inside(server, calls, token, pinned):
    """Raw JSON-RPC over HTTP, as any client may send it (the SDK's client refuses to send some of
    it: lone surrogates, deep nesting); stateless calls of the 2025-06-18 revision."""
    from tests.fuzzing import record

    # A lone surrogate goes as the bytes a client could send (not UTF-8): refused, never a 5xx.
    url = f"{server.url}/mcp" + (f"/subjects/{quote(pinned, safe='', errors='surrogatepass')}" if pinned else "")
    failed = []
    for n, (tool, arguments) in enumerate(calls):
        body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}})  # ASCII: lone surrogates as escapes
        response = _post(url, server.tokens[token], body)
        if _failed_inside(response):
            failed.append((tool, arguments, response.status_code, response.text[:300]))
    record("fuzz", "mcp tools", cases=len(calls), server_errors=len(failed))
    assert not failed, failed


def test_a_body_nested_five_thousand_levels_deep_is_refused_by_the_mcp_endpoint(server):
    body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + nested_json_text(5000) + "}"
    response = _post(f"{server.url}/mcp/subjects/alice", server.tokens["acme"], body)
    assert response.status_code < 500 and not _failed_inside(response), response.text[:300]
    assert response.json()["error"]["code"] == -32700  # JSON-RPC's parse error
