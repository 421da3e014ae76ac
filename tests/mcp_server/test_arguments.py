"""Any JSON value in any argument of every MCP tool, in-process (the twin of the REST property in
tests/api/test_errors.py): the tool answers or refuses with a precise Engram code, never fails
inside, and a refused call writes nothing (no memory, end-user, audit event or outbox entry)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from engram_core.es.schema import MemoryType, alias_name
from mcp.server.mcpserver import Context
from mcp_server import handlers
from mcp_server.server import CALLER_SCOPE_KEY, build_server
from memory_app.models import OutboxEntry
from tenants.models import AuditEvent, Subject
from tests.strategies import json_scalars, nested_json

pytestmark = pytest.mark.usefixtures("memory")

# tests.strategies.json_values, nested at most a few hundred levels (a JSON-RPC body's parser
# refuses deeper ones before any tool sees them).
_any_json = st.one_of(st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                                   | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12),
                      st.integers(100, 300).map(nested_json))

# Each tool with arguments it accepts; "<playbook>" stands for a playbook of the end-user's.
_CALLS = {
    "recall_memory": {"query": "Lyon", "k": 3, "types": ["semantic"], "since": "2024-01-01T00:00:00Z",
                      "until": "2026-01-01T00:00:00Z", "include_superseded": True, "explain": True,
                      "timezone": "Europe/Paris", "subject": "alice", "as_of": "2025-06-01T00:00:00Z"},
    "write_memory#episodic": {"type": "episodic", "text": "I moved to Lyon", "occurred_at": "2025-01-01T00:00:00Z",
                              "session_id": "s1", "subject": "alice", "idempotency_key": "k1"},
    "write_memory#semantic": {"type": "semantic", "text": "Lives in Lyon", "supersedes": ["abcdefgh"],
                              "contradiction": "harsh", "confidence": 0.5, "subject": "alice"},
    "write_memory#procedural": {"type": "procedural", "trigger": "Wi-Fi drops", "steps": ["Reboot"],
                                "confidence": 1, "subject": "alice"},
    "forget_memory": {"id": "abcdefghij", "reason": "user_request", "note": "asked", "cascade": False,
                      "subject": "alice", "idempotency_key": "k2"},
    "record_outcome": {"playbook_id": "<playbook>", "success": True, "refined_steps": "Reboot twice",
                       "subject": "alice", "idempotency_key": "k3"},
}
# The generic codes: an error that says no more than that something failed.
_VAGUE = {"error", "internal_error", "invalid"}


@st.composite
def _calls(draw) -> tuple[str, dict]:
    target = draw(st.sampled_from(sorted(_CALLS)))
    arguments = dict(_CALLS[target])
    for name in draw(st.lists(st.sampled_from(sorted(arguments)) | st.text(max_size=8), min_size=1, max_size=3)):
        arguments[name] = draw(_any_json)
    return target.split("#")[0], arguments


def _documents(es_admin) -> int:
    index = ",".join(alias_name(t) for t in MemoryType)
    es_admin.indices.refresh(index=index)
    return es_admin.count(index=index)["count"]


def _state(es_admin) -> tuple[int, int, int, int]:
    return (_documents(es_admin), Subject.objects.count(), AuditEvent.objects.count(), OutboxEntry.objects.count())


@pytest.fixture
def tools(transactional_db, acme, make_caller):
    """Call a tool as the MCP SDK does for a request the ASGI layer authenticated for ``acme`` (the
    tool runs in a worker thread, on a connection of its own: it sees committed rows only)."""
    server = build_server()
    caller = make_caller(acme)
    playbook = handlers.write_memory(caller=caller, type="procedural", trigger="Wi-Fi drops", steps=["Reboot"],
                                     subject="alice")["memory"]["id"]
    context = Context(request_context=SimpleNamespace(request=SimpleNamespace(scope={CALLER_SCOPE_KEY: caller})),
                      mcp_server=server)

    def call(name: str, arguments: dict):
        arguments = {k: playbook if v == "<playbook>" else v for k, v in arguments.items()}
        return anyio.run(lambda: server.call_tool(name, arguments, context))

    return call


@settings(max_examples=int(os.environ.get("ENGRAM_MCP_ARGUMENT_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(call=_calls())
def test_a_value_of_any_json_type_in_any_argument_is_refused_precisely_or_taken_and_a_refusal_writes_nothing(
        tools, es_admin, call):
    name, arguments = call
    before = _state(es_admin)
    result = tools(name, arguments)
    body = json.loads(result.content[0].text)
    assert result.structured_content == body
    if not result.is_error:
        return
    error = body["error"]
    assert set(error) == {"code", "message", "details"} and error["message"], body
    assert error["code"] not in _VAGUE, (name, arguments, body)
    assert _state(es_admin) == before, (name, arguments, body)
