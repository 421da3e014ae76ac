"""The MCP tools' logic, in-process: scopes, end-user resolution, argument shapes, isolation."""

from __future__ import annotations

import pytest
from django.utils import timezone

from engram_core.errors import EngramError, NotFound, PermissionDenied, ValidationFailed
from engram_core.es.schema import MemoryType, alias_name
from memory_app import selectors
from mcp_server import handlers
from memory_app.services.facts import fact_write
from memory_app.usage import usage_bump
from tenants.models import AuditEvent, Subject
from tenants.services.keys import KeyLifetimes

pytestmark = pytest.mark.usefixtures("memory")


def texts(result: dict) -> list[str]:
    return [m.get("text") for m in result["memories"]]


def test_recall_as_of_a_moment_returns_what_was_true_then(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    old = handlers.write_memory(caller=alice, type="semantic", text="Alice banks with Monzo")["memory"]
    handlers.write_memory(caller=alice, type="semantic", text="Alice banks with Starling", supersedes=[old["id"]])
    then = handlers.recall_memory(caller=alice, query="which bank", types=["semantic"], as_of=old["created_at"])
    assert texts(then) == ["Alice banks with Monzo"]
    assert texts(handlers.recall_memory(caller=alice, query="which bank", types=["semantic"])) == [
        "Alice banks with Starling"]
    with pytest.raises(ValidationFailed):
        handlers.recall_memory(caller=alice, query="which bank", as_of="yesterday-ish")


def test_first_write_creates_the_end_user_and_recall_finds_the_memory(acme, make_caller):
    alice = make_caller(acme, subject="alice")

    written = handlers.write_memory(caller=alice, type="semantic", text="Alice's cat is called Miso")

    assert written["subject"] == "alice"
    assert Subject.objects.filter(tenant=acme, external_id="alice").exists()
    found = handlers.recall_memory(caller=alice, query="what is the cat called?")
    assert found["memories"][0]["id"] == written["memory"]["id"]
    # Internal scope fields stay internal.
    assert not {"tenant_id", "user_id", "embedding"} & set(found["memories"][0])


def test_reading_an_unknown_end_user_is_not_found_and_creates_nothing(acme, make_caller):
    with pytest.raises(NotFound):
        handlers.recall_memory(caller=make_caller(acme, subject="nobody"), query="anything")
    assert not Subject.objects.exists()


def test_another_tenants_end_user_gets_the_same_answer_as_an_unknown_one(acme, globex, make_caller):
    handlers.write_memory(caller=make_caller(acme, subject="alice"), type="semantic", text="Alice lives in Lyon")
    intruder = make_caller(globex)

    with pytest.raises(NotFound) as theirs:
        handlers.recall_memory(caller=intruder, query="where does she live", subject="alice")
    with pytest.raises(NotFound) as unknown:
        handlers.recall_memory(caller=intruder, query="where does she live", subject="nobody")

    assert (theirs.value.code, theirs.value.message) == (unknown.value.code, unknown.value.message)


def test_each_tool_needs_its_scope(acme, make_caller):
    writer = make_caller(acme, subject="alice", scopes=["memory:write"])
    reader = make_caller(acme, subject="alice", scopes=["memory:read"])
    memory_id = handlers.write_memory(caller=writer, type="semantic", text="Alice likes tea")["memory"]["id"]

    assert handlers.recall_memory(caller=reader, query="tea")["memories"]
    with pytest.raises(PermissionDenied):
        handlers.recall_memory(caller=writer, query="tea")
    with pytest.raises(PermissionDenied):
        handlers.write_memory(caller=reader, type="semantic", text="Alice likes coffee")
    with pytest.raises(PermissionDenied):
        handlers.record_outcome(caller=reader, playbook_id=memory_id, success=True)
    with pytest.raises(PermissionDenied) as denied:
        handlers.forget_memory(caller=writer, id=memory_id, reason="user_request")
    assert (denied.value.code, denied.value.details) == ("insufficient_scope", {"required_scope": ["memory:forget"]})


def test_a_token_that_may_only_write_reads_no_memory_through_a_writes_answer(acme, make_caller):
    writer = make_caller(acme, subject="alice", scopes=["memory:write"])
    written = handlers.write_memory(caller=writer, type="procedural", trigger="the router drops Wi-Fi",
                                    steps=["Unplug the router", "Plug it back in"])
    assert written["memory"] == {"id": written["memory"]["id"]}
    outcome = handlers.record_outcome(caller=writer, playbook_id=written["memory"]["id"], success=True,
                                      refined_steps=["Unplug the router", "Wait 60 seconds"])
    assert outcome["playbook"] == {"id": written["memory"]["id"]}
    # With memory:read too, the same answers carry the memory.
    both = make_caller(acme, subject="alice", scopes=["memory:write", "memory:read"])
    again = handlers.record_outcome(caller=both, playbook_id=written["memory"]["id"], success=False)
    assert again["playbook"]["refined_steps"] == "Unplug the router\nWait 60 seconds"


def test_the_end_user_comes_from_the_url_or_the_call_never_both_differently(acme, make_caller):
    pinned = make_caller(acme, subject="alice")
    unpinned = make_caller(acme)

    same = handlers.write_memory(caller=pinned, type="semantic", text="Likes jazz", subject="alice")
    named = handlers.write_memory(caller=unpinned, type="semantic", text="Likes rock", subject=" bob ")

    assert (same["subject"], named["subject"]) == ("alice", "bob")
    with pytest.raises(ValidationFailed) as mismatch:
        handlers.recall_memory(caller=pinned, query="music", subject="bob")
    assert mismatch.value.code == "subject_mismatch"
    with pytest.raises(ValidationFailed) as missing:
        handlers.recall_memory(caller=unpinned, query="music")
    assert missing.value.code == "subject_required"


@pytest.mark.parametrize("arguments", [
    {"type": "semantic", "text": "   "},
    {"type": "semantic", "text": "Likes tea", "steps": "1. boil water"},
    {"type": "procedural", "trigger": "kettle broken", "steps": "descale", "text": "also text"},
    {"type": "procedural", "trigger": "kettle broken"},
    {"type": "episodic", "text": "I moved", "supersedes": ["0123456789abcdef"]},
    {"type": "semantic", "text": "Likes tea", "occurred_at": "2026-01-01T00:00:00Z"},
    {"type": "catalog", "text": "not through MCP"},
])
def test_a_rejected_write_stores_nothing_not_even_the_end_user(acme, make_caller, count_docs, arguments):
    with pytest.raises(ValidationFailed):
        handlers.write_memory(caller=make_caller(acme, subject="alice"), **arguments)
    assert not Subject.objects.exists()
    assert count_docs() == 0


def test_supersede_hides_the_old_fact_and_keeps_it_as_history(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    old = handlers.write_memory(caller=alice, type="semantic", text="Alice lives in Lyon")["memory"]["id"]

    new = handlers.write_memory(caller=alice, type="semantic", text="Alice lives in Porto", supersedes=[old],
                                contradiction="natural")["memory"]

    assert new["supersedes"] == [old] and new["contradiction"] == "natural"
    assert [m["id"] for m in handlers.recall_memory(caller=alice, query="where does Alice live")["memories"]
            ] == [new["id"]]
    history = handlers.recall_memory(caller=alice, query="where does Alice live", include_superseded=True)
    assert {m["id"]: m.get("superseded_by") for m in history["memories"]} == {new["id"]: None, old: [new["id"]]}


def test_an_end_user_cannot_forget_or_supersede_anothers_memory(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    bob = make_caller(acme, subject="bob")
    handlers.write_memory(caller=bob, type="semantic", text="Bob plays chess")
    alices = handlers.write_memory(caller=alice, type="semantic", text="Alice plays the cello")["memory"]["id"]

    with pytest.raises(NotFound):
        handlers.forget_memory(caller=bob, id=alices, reason="user_request")
    with pytest.raises(NotFound):
        handlers.write_memory(caller=bob, type="semantic", text="Bob plays go", supersedes=[alices])

    assert alices in [m["id"] for m in handlers.recall_memory(caller=alice, query="cello")["memories"]]
    assert "Alice plays the cello" not in texts(handlers.recall_memory(caller=bob, query="cello"))


def test_forget_deletes_and_audits_without_content(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    memory_id = handlers.write_memory(caller=alice, type="episodic", text="My PIN is 4321")["memory"]["id"]

    assert handlers.forget_memory(caller=alice, id=memory_id, reason="sensitive") == {
        "subject": "alice", "forgotten": memory_id, "status": "applied",
        "cascade": {"forgotten": [], "flagged": [], "kept": []}}

    assert "My PIN is 4321" not in texts(handlers.recall_memory(caller=alice, query="PIN"))
    event = AuditEvent.objects.get(action="memory.forget", target_id=memory_id)
    assert event.actor_type == AuditEvent.ActorType.AGENT_TOKEN
    assert "4321" not in str(event.details) and event.details["reason"] == "sensitive"


def test_playbook_outcomes_are_counted_and_steps_may_be_a_list(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    playbook = handlers.write_memory(caller=alice, type="procedural", trigger="the router drops Wi-Fi",
                                     steps=["Unplug the router", "Wait 30 seconds", "Plug it back in"])["memory"]
    assert playbook["steps"] == "Unplug the router\nWait 30 seconds\nPlug it back in"

    handlers.record_outcome(caller=alice, playbook_id=playbook["id"], success=False)
    updated = handlers.record_outcome(caller=alice, playbook_id=playbook["id"], success=True,
                                      refined_steps=["Unplug the router", "Wait 60 seconds", "Plug it back in"])

    assert (updated["playbook"]["success_count"], updated["playbook"]["failure_count"]) == (1, 1)
    assert updated["playbook"]["refined_steps"] == "Unplug the router\nWait 60 seconds\nPlug it back in"


def test_superseding_a_fact_while_recall_bumps_its_use_count_succeeds(acme, make_caller, monkeypatch):
    alice = make_caller(acme, subject="alice")
    old = handlers.write_memory(caller=alice, type="semantic", text="Alice lives in Lyon")["memory"]["id"]
    real_visible_documents = selectors.visible_documents
    raced = []

    def visible_documents_then_bump(**kwargs):
        # What a recall's background bump does between the service's read and its update.
        found = real_visible_documents(**kwargs)
        if not raced:
            raced.append(usage_bump(ids=list(found), at=timezone.now(), subject_id=Subject.objects.get(tenant=acme, external_id="alice").pk))
        return found

    monkeypatch.setattr(selectors, "visible_documents", visible_documents_then_bump)
    new = handlers.write_memory(caller=alice, type="semantic", text="Alice lives in Porto", supersedes=[old])

    assert raced == [1]
    assert new["memory"]["supersedes"] == [old]
    assert [m["id"] for m in handlers.recall_memory(caller=alice, query="where does Alice live")["memories"]
            ] == [new["memory"]["id"]]


# ---------------------------------------------------------------- one submit path (issue 10)


@pytest.fixture
def api_client_for():
    from rest_framework.test import APIClient

    from tenants.services.tokens import agent_token_create

    def make(tenant):
        _token, raw = agent_token_create(tenant=tenant, name="rest", scopes=["memory:read", "memory:write",
                                                                               "memory:forget", "tenant:admin"],
                                         actor="test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    return make


@pytest.fixture
def es_unreachable(settings):
    from engram_core.es.client import base_client
    from tenants.services.clients import clear_caches

    url = settings.ES_URL

    def set_url(value):
        settings.ES_URL = value
        base_client.cache_clear()
        clear_caches()

    yield set_url
    set_url(url)


@pytest.mark.django_db(transaction=True)  # recall's use-count bumps read the writer key on their own thread
def test_mcp_writes_are_accepted_into_the_outbox_during_an_outage_and_replayed_in_order(
        acme, make_caller, es_unreachable, settings):
    from memory_app.models import OutboxEntry
    from memory_app.outbox import outbox_replay

    alice = make_caller(acme, subject="alice")
    first = handlers.write_memory(caller=alice, type="episodic", text="before the outage")
    url = settings.ES_URL
    es_unreachable("http://127.0.0.1:9")
    queued = handlers.write_memory(caller=alice, type="semantic", text="Alice moved to Porto")
    gone = handlers.forget_memory(caller=alice, id=first["memory"]["id"], reason="user_request")
    assert queued["status"] == gone["status"] == "queued"
    assert [e.reason for e in OutboxEntry.objects.order_by("id")] == ["outage", "backlog"]
    es_unreachable(url)
    # Back, but earlier writes are queued: a new write waits behind them (order).
    behind = handlers.write_memory(caller=alice, type="semantic", text="Alice likes port wine")
    assert behind["status"] == "queued" and behind["operation"]["reason"] == "backlog"
    assert outbox_replay().applied == 3
    found = handlers.recall_memory(caller=alice, query="Porto port wine before the outage")
    assert {m["id"] for m in found["memories"]} == {queued["id"], behind["id"]}
    assert {m.get("source") for m in found["memories"]} == {"mcp"}


def test_mcp_writes_with_an_idempotency_key_apply_once(acme, make_caller, count_docs):
    alice = make_caller(acme, subject="alice")
    first = handlers.write_memory(caller=alice, type="semantic", text="Alice has two cats", idempotency_key="w1")
    again = handlers.write_memory(caller=alice, type="semantic", text="Alice has two cats", idempotency_key="w1")
    assert again == first and count_docs() == 1
    playbook = handlers.write_memory(caller=alice, type="procedural", trigger="cat sick", steps="call the vet")
    for _ in range(2):
        outcome = handlers.record_outcome(caller=alice, playbook_id=playbook["memory"]["id"], success=True,
                                          idempotency_key="o1")
    assert outcome["playbook"]["success_count"] == 1
    with pytest.raises(EngramError) as reused:
        handlers.write_memory(caller=alice, type="semantic", text="something else", idempotency_key="w1")
    assert reused.value.code == "idempotency_key_reused"


def test_mcp_and_rest_validate_alike(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    with pytest.raises(ValidationFailed) as mcp_error:
        handlers.write_memory(caller=alice, type="semantic", text="x" * 100_000)
    assert mcp_error.value.code == "text_too_long"


def test_external_ids_are_validated_one_way_everywhere(acme, make_caller, api_client_for):
    from tenants.services.subjects import subject_get_or_create

    bad = "alice\x07"
    with pytest.raises(ValidationFailed) as mcp_error:
        handlers.write_memory(caller=make_caller(acme), type="semantic", text="x", subject=bad)
    with pytest.raises(ValidationFailed) as service_error:
        subject_get_or_create(tenant=acme, external_id=bad, lifetimes=KeyLifetimes.from_settings())
    rest = api_client_for(acme).post("/api/v1/subjects", {"external_id": bad}, format="json")
    assert mcp_error.value.code == service_error.value.code == rest.json()["error"]["code"] == "invalid_external_id"


@pytest.mark.django_db(transaction=True)
def test_an_outage_has_one_code_in_rest_and_mcp(acme, make_caller, api_client_for, es_unreachable):
    import anyio

    from mcp_server.server import _call

    handlers.write_memory(caller=make_caller(acme, subject="alice"), type="semantic", text="Alice sings")
    es_unreachable("http://127.0.0.1:9")
    rest = api_client_for(acme).post("/api/v1/subjects/alice/recall", {"query": "sings"}, format="json")
    caller = make_caller(acme, subject="alice")

    class Ctx:
        class request_context:  # the shape the SDK's Context has
            class request:
                scope = {"engram.mcp.caller": caller}

    result = anyio.run(lambda: _call(Ctx, handlers.recall_memory, query="sings"))
    assert rest.status_code == 503
    assert result.structured_content["error"]["code"] == rest.json()["error"]["code"] == "elasticsearch_unreachable"


def test_episodes_written_with_a_session_carry_its_preceding_messages_as_context(acme, make_caller, es_admin,
                                                                                 count_docs):
    alice = make_caller(acme, subject="alice")
    first = handlers.write_memory(caller=alice, type="episodic", text="My sister Ada moved to Porto", session_id="s1")
    second = handlers.write_memory(caller=alice, type="episodic", text="She teaches chemistry", session_id="s1")
    stored = es_admin.get(index=alias_name(MemoryType.EPISODIC), id=second["memory"]["id"])["_source"]
    assert stored["session_id"] == "s1" and stored["context_ids"] == [first["memory"]["id"]]
    for bad, code in (({"type": "semantic", "text": "Ada lives in Porto", "session_id": "s1"}, "invalid_fields"),
                      ({"type": "episodic", "text": "hi", "session_id": "x" * 201}, "text_too_long"),
                      ({"type": "episodic", "text": "hi", "session_id": 7}, "invalid_text")):
        with pytest.raises(ValidationFailed) as exc:
            handlers.write_memory(caller=alice, **bad)
        assert exc.value.code == code
    assert count_docs() == 2  # the refused calls wrote nothing


def test_recall_reads_dates_in_the_named_time_zone_and_refuses_an_unknown_one(acme, make_caller, monkeypatch):
    from datetime import UTC, datetime

    # 20 October 2023, 03:00 UTC: the evening of the 19th in Los Angeles, whose "yesterday" is the 18th.
    monkeypatch.setattr(timezone, "now", lambda: datetime(2023, 10, 20, 3, 0, tzinfo=UTC))
    caller = make_caller(acme)
    handlers.write_memory(caller=caller, type="episodic", text="We repainted the fence blue.",
                          occurred_at="2023-10-18T19:00:00Z", subject="tz")
    found = handlers.recall_memory(caller=caller, query="What did we paint yesterday?", explain=True,
                                   timezone="America/Los_Angeles", subject="tz")["memories"]
    assert found[0]["text"] == "We repainted the fence blue." and "time_window" in found[0]["explain"]["multipliers"]
    with pytest.raises(ValidationFailed) as err:
        handlers.recall_memory(caller=caller, query="what happened yesterday?", timezone="Nowhere/Atlantis",
                               subject="tz")
    assert err.value.code == "invalid_timezone"


def test_forgetting_an_episode_says_what_went_with_it(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    said = handlers.write_memory(caller=alice, type="episodic", text="I'm allergic to peanuts")["memory"]["id"]
    subject = Subject.objects.get(tenant=acme, external_id="alice")
    fact = fact_write(subject=subject, text="Alice is allergic to peanuts.", supporting_episode_ids=[said])

    done = handlers.forget_memory(caller=alice, id=said, reason="user_request", note="asked in chat")

    assert done["cascade"] == {"forgotten": [{"id": fact["id"], "memory_type": "semantic"}], "flagged": [],
                               "kept": []}
    assert "peanuts" not in texts(handlers.recall_memory(caller=alice, query="what is Alice allergic to"))


def test_a_forget_reason_must_be_a_code(acme, make_caller):
    alice = make_caller(acme, subject="alice")
    memory_id = handlers.write_memory(caller=alice, type="episodic", text="My PIN is 4321")["memory"]["id"]
    with pytest.raises(ValidationFailed) as refused:
        handlers.forget_memory(caller=alice, id=memory_id, reason="she told me her PIN 4321 is secret")
    assert refused.value.code == "invalid_reason"


@pytest.mark.parametrize("occurred_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_an_occurred_at_outside_the_calendar_is_refused_and_stores_nothing(acme, make_caller, count_docs, occurred_at):
    with pytest.raises(ValidationFailed) as refused:
        handlers.write_memory(caller=make_caller(acme, subject="alice"), type="episodic", text="edge",
                              occurred_at=occurred_at)
    assert (refused.value.code, refused.value.details) == ("invalid_datetime", {"field": "occurred_at"})
    assert not Subject.objects.exists()
    assert count_docs() == 0
