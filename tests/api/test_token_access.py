"""No side door around the staff access log: every read of an end-user's memory through an agent
token is counted in the token access log, and a read through a token a staff user minted is in
the staff access log, attributed to them. As the inspector's walk does for staff reads
(tests/inspector/test_staff_access.py), a walk over every API URL pattern and every MCP tool,
with a canary word in the end-user's memory, fails for a response that shows the canary uncounted."""

from __future__ import annotations

import json

import anyio
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from api import urls as api_urls
from mcp_server import handlers
from mcp_server.handlers import Caller
from mcp_server.server import build_server
from memory_app.models import OutboxEntry
from memory_app.services.facts import fact_write, playbook_write
from memory_app.services.imports import episodes_import
from tenants.models import AgentToken, AuditEvent, Membership, TokenRead
from tenants.selectors import audit_events
from tenants.services.subjects import subject_get_or_create
from tenants.services.tokens import agent_token_create

from .conftest import ALL_SCOPES
from tenants.services.keys import KeyLifetimes

CANARY = "Zorblaxian"
UNWALKED = {"schema", "docs", "not-found"}  # no end-user's memory: the API's description and its 404


@pytest.fixture
def minted(tenant):
    """A tenant admin, and an all-scopes token they minted (as in the inspector)."""
    admin = get_user_model().objects.create_user(username="ada", password="pw", is_staff=True)
    Membership.objects.create(user=admin, tenant=tenant, role=Membership.Role.TENANT_ADMIN)
    token, raw = agent_token_create(tenant=tenant, name="ada's bot", scopes=ALL_SCOPES, actor=admin)
    return admin, token, raw


@pytest.fixture
def canary(tenant):
    alice = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    episodes_import(subject=alice, episodes=[
        {"text": f"My cat {CANARY} sleeps all day, note {n}", "occurred_at": f"2026-01-01T00:00:0{n}Z"} for n in range(3)])
    old = fact_write(subject=alice, text=f"Alice's cat is called {CANARY}.")
    new = fact_write(subject=alice, text=f"Alice's cat is called {CANARY} Junior.", supersedes=[old["id"]])
    playbook = playbook_write(subject=alice, trigger=f"the cat {CANARY} is sick", steps="call the vet")
    return {"alice": alice, "fact": new["id"], "playbook": playbook["id"]}


def _counted(token: AgentToken, subject) -> int:
    return sum(TokenRead.objects.filter(token=token, subject=subject).values_list("reads", flat=True))


def _requests(canary) -> dict[str, list[tuple[str, dict, dict]]]:
    """Each pattern, as an agent calls it: (method, path kwargs, body)."""
    alice = {"external_id": "alice"}
    return {
        "subject-create": [("post", {}, {"external_id": "alice"}), ("get", {}, {})],
        "subject-export": [("get", alice, {})],
        "turn-create": [("post", alice, {"text": "what is my cat called?"})],
        "recall": [("post", alice, {"query": "what is the cat called?"})],
        "memory-create": [("post", alice, {"type": "semantic", "text": "Alice likes tea."}),
                          ("get", alice, {"type": "semantic"})],
        "memory": [("get", {**alice, "memory_id": canary["fact"]}, {})],
        "memory-history": [("get", {**alice, "memory_id": canary["fact"]}, {})],
        "playbook-outcome": [("post", {**alice, "memory_id": canary["playbook"]}, {"success": True})],
        "consolidation-create": [("post", alice, {"dry_run": True}), ("post", alice, {})],
        "consolidation-get": [],  # the run just requested (filled in by the walk)
        "catalog-entry-create": [("post", {}, {"title": "Opening hours", "text": "We open at nine."})],
        "episodes-import": [("post", alice, {"episodes": [{"text": "A quiet day.",
                                                           "occurred_at": "2026-01-02T00:00:00Z"}]})],
        "operation-get": [],  # the import just queued
        "usage": [("get", {}, {})],
        "subject-erase": [("delete", alice, {})],  # last: it erases what the others read
    }


def test_every_api_response_that_shows_memory_is_counted(tenant, minted, canary, settings):
    admin, token, raw = minted
    alice = canary["alice"]
    settings.ENGRAM_API_IMPORT_SYNC_MAX = 0  # an import is queued: its operation is polled below
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    planned = _requests(canary)
    patterns = [p.name for p in api_urls.urlpatterns if p.name not in UNWALKED]
    assert set(planned) == set(patterns), "a new API URL pattern: add it to the walk"
    showed, uncounted, made = set(), [], {}
    for name in sorted(patterns, key=lambda n: list(planned).index(n)):
        calls = planned[name]
        if name == "consolidation-get":
            calls = [("get", {"external_id": "alice", "run_id": made["run"]}, {})]
        if name == "operation-get":
            calls = [("get", {"uid": made["operation"]}, {})]
        for method, kwargs, body in calls:
            before = _counted(token, alice)
            response = getattr(client, method)(reverse(f"api:{name}", kwargs=kwargs), body, format="json")
            assert response.status_code < 300, (name, response.status_code, response.content[:300])
            data = response.json()
            if name == "consolidation-create" and not body:
                made["run"] = data["run"]["id"]
            if name == "episodes-import":
                made["operation"] = data["operation"]["id"]
            if CANARY in response.content.decode():
                showed.add(name)
                if _counted(token, alice) == before:
                    uncounted.append(name)
    assert uncounted == []
    assert showed >= {"subject-export", "turn-create", "recall", "memory", "memory-history", "playbook-outcome",
                      "consolidation-create", "memory-create"}
    # Each kind's first read is an audit event, attributed to the staff user who minted the token.
    events = AuditEvent.objects.filter(action="token.read", subject=alice)
    assert {e.details["kind"] for e in events} >= {"export", "turn", "recall", "get", "history", "outcome",
                                                   "consolidation_dry_run", "list"}
    assert {(e.actor, e.details["staff"]) for e in events} == {(f"{token.prefix} ({token.name})", "ada")}


def test_every_mcp_tool_that_shows_memory_is_counted(tenant, minted, canary):
    _admin, token, _raw = minted
    alice = canary["alice"]
    caller = Caller(token=token, subject="alice")
    calls = {
        "recall_memory": lambda: handlers.recall_memory(caller=caller, query="what is the cat called?"),
        "write_memory": lambda: handlers.write_memory(caller=caller, type="semantic", text="Alice likes tea."),
        "record_outcome": lambda: handlers.record_outcome(caller=caller, playbook_id=canary["playbook"], success=True),
        "forget_memory": lambda: handlers.forget_memory(caller=caller, id=canary["fact"], reason="user_request"),
    }
    tools = {tool.name for tool in anyio.run(build_server().list_tools)}
    assert tools == set(calls), "a new MCP tool: add it to the walk"
    showed, uncounted = set(), []
    for name, call in calls.items():
        before = _counted(token, alice)
        if CANARY in json.dumps(call()):
            showed.add(name)
            if _counted(token, alice) == before:
                uncounted.append(name)
    assert uncounted == [] and showed == {"recall_memory", "record_outcome"}


def test_a_tenant_admin_exporting_through_a_token_they_minted_is_in_the_staff_access_log(tenant, canary):
    """Issue 67's side door: a tenant admin mints a memory:read token in the inspector and exports
    an end-user over REST; only agent_token.created was logged."""
    admin = get_user_model().objects.create_user(username="ada", password="pw", is_staff=True)
    Membership.objects.create(user=admin, tenant=tenant, role=Membership.Role.TENANT_ADMIN)
    inspector = Client()
    inspector.force_login(admin)
    page = inspector.post(f"/t/{tenant.slug}/tokens/", {"name": "side door", "scopes": ["memory:read"]})
    raw = page.context["new_token"]["raw"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for _ in range(2):
        assert CANARY in api.get("/api/v1/subjects/alice/export").content.decode()
    logged = audit_events(tenant_slugs=[tenant.slug], staff_access=True, actor="ada")
    exports = [e for e in logged if e.action == "token.read"]
    assert len(exports) == 2 and all(e.details == {"kind": "export", "memories": 6, "staff": "ada"} for e in exports)
    assert exports[0].subject_ref == str(canary["alice"].user_id)
    row = TokenRead.objects.get(token__name="side door")
    assert (row.kind, row.reads, row.memories) == ("export", 2, 12)
    # Compliance sees it per token, with who minted it.
    compliance = get_user_model().objects.create_user(username="carol", password="pw", is_staff=True)
    Membership.objects.create(user=compliance, tenant=tenant, role=Membership.Role.COMPLIANCE)
    reader = Client()
    reader.force_login(compliance)
    tokens = reader.get(f"/t/{tenant.slug}/audit/tokens/").content.decode()
    assert "side door" in tokens and "ada" in tokens and "export: 2" in tokens
    staff_log = reader.get(f"/t/{tenant.slug}/audit/", {"access": "staff"}).content.decode()
    assert "through token" in staff_log and "ada" in staff_log


def test_reads_in_one_hour_are_counted_on_one_row_and_logged_once(api, tenant, canary, make_token):
    raw = make_token("memory:read")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for _ in range(3):
        assert client.post("/api/v1/subjects/alice/recall", {"query": "cat"}, format="json").status_code == 200
    [row] = TokenRead.objects.filter(kind="recall")
    assert row.reads == 3 and row.memories >= 3
    [event] = AuditEvent.objects.filter(action="token.read", details__kind="recall")
    assert event.details["minted_by"] == "tests" and "staff" not in event.details  # minted by a job


def test_a_token_polls_the_operations_it_created_whatever_its_scopes(tenant, canary, make_token, settings):
    """Issue 67: an erase-only token could not poll the operation its erase returned."""
    eraser = APIClient()
    eraser.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token('subject:erase')}")
    entry = OutboxEntry.objects.create(tenant=tenant, external_id="alice", operation=OutboxEntry.Operation.ERASE,
                                       payload={}, token=AgentToken.objects.get(scopes=["subject:erase"]))
    assert eraser.get(f"/api/v1/operations/{entry.uid}").status_code == 200
    # Another erase-only token of the tenant may not poll it: the same 404 as an unknown one.
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token('subject:erase')}")
    assert stranger.get(f"/api/v1/operations/{entry.uid}").status_code == 404
