"""Every endpoint through the typed client, against the real Elasticsearch node."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram_client import EngramAPIError
from engram_core.es.schema import MemoryType
from memory_app.consolidation.services import consolidation_run
from memory_app.models import ForgetNote
from tenants.models import AuditEvent, Subject


def test_turn_stores_the_verbatim_turn_and_recalls_without_it(engram, docs):
    first = engram.turn("alice", "My router is a Fritzbox 7590 and it drops Wi-Fi every evening")
    assert first["status"] == "applied" and first["operation"] is None
    assert first["memory"]["text"] == "My router is a Fritzbox 7590 and it drops Wi-Fi every evening"
    assert first["recall"] == [] and first["recall_error"] is None

    second = engram.turn("alice", "The Fritzbox dropped Wi-Fi again", session_id="s1", k=3)
    recalled = [m["id"] for m in second["recall"]]
    assert first["id"] in recalled and second["id"] not in recalled
    assert second["memory"]["session_id"] == "s1" and second["memory"]["role"] == "user"
    subject = Subject.objects.get(external_id="alice")
    assert [d["id"] for d in docs(MemoryType.EPISODIC, user_id=subject.user_id)] == [first["id"], second["id"]]


def test_recall_with_filters_and_explain(engram):
    engram.turn("bob", "I prefer email over phone calls", occurred_at=datetime(2024, 1, 5, tzinfo=UTC))
    fact = engram.write_fact("bob", "Bob prefers email over phone calls")
    hits = engram.recall("bob", "how should we contact Bob? email or phone", k=5, explain=True)
    assert fact["id"] in [h["id"] for h in hits]
    explained = set(hits[0]["explain"])
    assert {"bm25_rank", "dense_rank", "fusion", "linear_score", "multipliers", "final_score"} <= explained
    only_facts = engram.recall("bob", "email", types=["semantic"])
    assert [h["memory_type"] for h in only_facts] == ["semantic"]
    recent = engram.recall("bob", "email phone", types=["episodic"], since=datetime.now(UTC) - timedelta(days=1))
    assert recent == []


def test_recall_as_of_a_date_returns_the_fact_valid_then(engram, client, db):
    old = engram.write_fact("dora", "Dora's phone is a Pixel 6")
    engram.write_fact("dora", "Dora's phone is an iPhone 15", supersedes=[old["id"]])
    before = engram.recall("dora", "which phone does Dora have", types=["semantic"], as_of=old["memory"]["created_at"])
    assert [h["text"] for h in before] == ["Dora's phone is a Pixel 6"]
    assert [h["text"] for h in engram.recall("dora", "which phone", types=["semantic"])] == ["Dora's phone is an iPhone 15"]
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert "as_of" in schema["components"]["schemas"]["RecallInputRequest"]["properties"]


def test_facts_supersede_with_history_both_ways(engram):
    old = engram.write_fact("carol", "Carol lives in Berlin")
    new = engram.write_fact("carol", "Carol lives in Hamburg", supersedes=[old["id"]], contradiction="natural")
    assert new["memory"]["supersedes"] == [old["id"]]
    assert engram.get_memory("carol", old["id"])["superseded_by"] == [new["id"]]
    history = engram.history("carol", old["id"])
    assert [m["id"] for m in history["newer"]] == [new["id"]] and history["older"] == []
    assert [m["id"] for m in engram.history("carol", new["id"])["older"]] == [old["id"]]
    hits = engram.recall("carol", "where does Carol live", types=["semantic"])
    assert [h["id"] for h in hits] == [new["id"]]

    harsh = engram.write_fact("carol", "Carol lives in Bremen", supersedes=[new["id"]], contradiction="harsh",
                              confidence=0.9)
    assert harsh["memory"]["confidence"] == pytest.approx(0.8)


def test_playbook_and_outcomes(engram):
    playbook = engram.write_playbook("dave", "router drops Wi-Fi", "1. reboot 2. change channel")
    assert playbook["memory"]["memory_type"] == "procedural"
    engram.record_outcome("dave", playbook["id"], True)
    result = engram.record_outcome("dave", playbook["id"], False, refined_steps="1. change channel first")
    assert result["status"] == "applied"
    assert (result["memory"]["success_count"], result["memory"]["failure_count"]) == (1, 1)
    assert engram.get_memory("dave", playbook["id"])["refined_steps"] == "1. change channel first"
    with pytest.raises(EngramAPIError) as err:
        engram.record_outcome("dave", "nonexistent-id", True)
    assert err.value.status == 404


def test_forget_deletes_and_leaves_a_content_free_tombstone(engram):
    turn = engram.turn("erin", "my PIN is 1234")
    result = engram.forget("erin", turn["id"], "sensitive", note="said by mistake")
    assert (result["status"], result["id"]) == ("applied", turn["id"])
    assert result["cascade"] == {"forgotten": [], "flagged": [], "kept": []}
    with pytest.raises(EngramAPIError) as err:
        engram.get_memory("erin", turn["id"])
    assert (err.value.status, err.value.code) == (404, "not_found")
    event = AuditEvent.objects.get(action="memory.forget", target_id=turn["id"])
    assert event.details == {"memory_type": "episodic", "reason": "sensitive", "cascade": True, "derived": {}}
    assert event.actor_type == "agent_token"
    assert ForgetNote.objects.get(audit_event=event).note == "said by mistake"  # beside the chain, not in it


def test_forgetting_a_turn_forgets_the_fact_consolidated_from_it(engram, tenant):
    """The issue's first reproduction: a fact consolidated from a turn goes when the turn is forgotten."""
    turn = engram.turn("uma", "I'm allergic to peanuts and shellfish.")
    consolidation_run(subject=Subject.objects.get(tenant=tenant, external_id="uma"))  # what POST …/consolidate queues
    [fact] = engram.recall("uma", "what is the user allergic to", types=["semantic"])
    assert fact["supporting_episode_ids"] == [turn["id"]]

    result = engram.forget("uma", turn["id"], "user_request")

    assert engram.recall("uma", "what is the user allergic to") == []
    with pytest.raises(EngramAPIError) as err:
        engram.get_memory("uma", fact["id"])
    assert err.value.status == 404
    assert result["cascade"] == {"forgotten": [{"id": fact["id"], "memory_type": "semantic"}], "flagged": [],
                                 "kept": []}
    cascaded = AuditEvent.objects.get(action="memory.forget", target_id=fact["id"])
    assert cascaded.details == {"memory_type": "semantic", "reason": "user_request", "cascade_of": [turn["id"]]}
    assert AuditEvent.objects.get(action="memory.forget", target_id=turn["id"]).details["derived"] == {
        "forgotten": [fact["id"]]}


def test_a_forget_reason_is_a_code(engram):
    turn = engram.turn("ezra", "my PIN is 1234")
    with pytest.raises(EngramAPIError) as err:
        engram.forget("ezra", turn["id"], "the user asked about their PIN 1234")
    assert (err.value.status, err.value.code) == (400, "invalid")
    assert engram.get_memory("ezra", turn["id"])["text"] == "my PIN is 1234"


def test_import_export_and_erase(engram):
    base = datetime(2023, 3, 1, 9, tzinfo=UTC)
    result = engram.import_episodes("frank", [
        {"text": f"historic message {n}", "occurred_at": base + timedelta(days=n)} for n in range(3)
    ] + [{"text": "with my own id", "occurred_at": base, "id": "frank-own-0001", "role": "assistant"}])
    assert result["status"] == "applied" and len(result["ids"]) == 4
    own = result["ids"][3]  # the client's id, namespaced to this end-user (kept as client_id)
    engram.write_fact("frank", "Frank has a cat")
    export = engram.export("frank")
    assert export["external_id"] == "frank"
    episodes = {m["id"]: m for m in export["memories"]["episodic"]}
    assert set(episodes) == set(result["ids"]) and len(export["memories"]["semantic"]) == 1
    assert episodes[result["ids"][1]]["occurred_at"].startswith("2023-03-02T09:00:00")
    assert episodes[own]["role"] == "assistant" and episodes[own]["client_id"] == "frank-own-0001"

    erased = engram.erase_subject("frank")
    assert erased == {"status": "applied", "documents_deleted": 5, "operation": None}
    with pytest.raises(EngramAPIError) as err:  # erased, the end-user is unknown (only a tombstone remains)
        engram.export("frank")
    assert err.value.status == 404


def test_import_refuses_a_bad_episode_and_stores_nothing(engram):
    with pytest.raises(EngramAPIError) as err:
        engram.import_episodes("gina", [{"text": "ok", "occurred_at": "2024-01-01T00:00:00Z"},
                                        {"text": "", "occurred_at": "2024-01-01T00:00:00Z"}])
    assert err.value.status == 400 and "episodes" in err.value.details["fields"]
    with pytest.raises(EngramAPIError) as err:
        engram.export("gina")
    assert err.value.status == 404  # not even the end-user was created


def test_catalog_entries_reach_every_end_user_of_the_tenant_only(make_client, tenant):
    from tenants.models import Tenant

    admin = make_client("tenant:admin")
    agent = make_client("memory:read", "memory:write")
    entry = admin.create_catalog_entry("Fritzbox reset", "Hold the reset button for 10 seconds", metadata={"v": 1})
    assert entry["memory_type"] == "catalog" and entry["title"] == "Fritzbox reset"
    agent.turn("henry", "hello")
    assert entry["id"] in [h["id"] for h in agent.recall("henry", "how to reset the Fritzbox")]

    other = make_client(of=Tenant.objects.create(slug=f"{tenant.slug}-other", name="Other"))
    other.turn("henry", "hello")
    assert entry["id"] not in [h["id"] for h in other.recall("henry", "how to reset the Fritzbox")]
    with pytest.raises(EngramAPIError) as err:
        agent.create_catalog_entry("x", "y")
    assert (err.value.status, err.value.code) == (403, "insufficient_scope")


def test_subjects_are_created_on_first_write_or_by_an_admin(make_client):
    admin = make_client("tenant:admin")
    created = admin.create_subject("ivy", display_name="Ivy")
    assert created["external_id"] == "ivy"
    assert admin.create_subject("ivy")["display_name"] == "Ivy"  # existing: returned as is
    reader = make_client("memory:read")
    assert reader.recall("ivy", "anything") == []
    with pytest.raises(EngramAPIError) as err:
        reader.recall("nobody", "anything")
    assert (err.value.status, err.value.code) == (404, "not_found")


def test_another_tenants_end_user_is_indistinguishable_from_an_unknown_one(make_client, tenant):
    from tenants.models import Tenant

    mine = make_client()
    mine.turn("jack", "secret plans")
    fact = mine.write_fact("jack", "Jack likes tea")
    theirs = make_client(of=Tenant.objects.create(slug=f"{tenant.slug}-b", name="B"))
    for call in (lambda: theirs.recall("jack", "plans"), lambda: theirs.get_memory("jack", fact["id"]),
                 lambda: theirs.export("jack"), lambda: theirs.forget("jack", fact["id"], "other"),
                 lambda: theirs.recall("nobody-at-all", "plans")):
        with pytest.raises(EngramAPIError) as err:
            call()
        assert (err.value.status, err.value.code, err.value.message) == (404, "not_found", "unknown end-user")
    # Their own "jack" is a different end-user altogether.
    theirs.turn("jack", "hello")
    assert all(h["id"] != fact["id"] for h in theirs.recall("jack", "Jack likes tea"))


def test_openapi_schema_and_docs_are_served(client, db):
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert schema["openapi"].startswith("3.")
    assert {"/api/v1/subjects/{external_id}/turns", "/api/v1/subjects/{external_id}/episodes:import",
            "/api/v1/subjects/{external_id}/memories/{memory_id}/history"} <= set(schema["paths"])
    turn = schema["paths"]["/api/v1/subjects/{external_id}/turns"]["post"]
    assert {"201", "202", "400", "401", "403", "404", "409", "413", "422", "429", "503"} <= set(turn["responses"])
    assert schema["components"]["securitySchemes"]["agentToken"] == {
        "type": "http", "scheme": "bearer", "description": "A tenant agent token (`eng_…`), with scopes."}
    # Request bodies are closed, as the API refuses a field an operation does not take.
    requests = {n: c for n, c in schema["components"]["schemas"].items() if n.endswith("Request") and "oneOf" not in c}
    assert {"TurnCreateInputRequest", "ImportEpisodeRequest", "SemanticMemoryInputRequest"} <= set(requests)
    assert all(c["additionalProperties"] is False for c in requests.values())
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_a_repeated_turn_recalls_the_line_said_before_once(engram):
    said = {engram.turn("lee", "Did the plumber confirm Tuesday?")["id"] for _ in range(2)}
    engram.turn("lee", "The plumber is booked for the boiler")
    result = engram.turn("lee", "did the plumber confirm tuesday?", k=5)
    recalled = [m["id"] for m in result["recall"]]
    assert result["id"] not in recalled and len(recalled) == 2  # the line once (either copy), the other turn
    assert len(set(recalled) & said) == 1


def test_a_turn_longer_than_a_query_still_gets_its_recall(engram, settings):
    settings.ENGRAM_MAX_QUERY_CHARS = 30
    engram.turn("kai", "My printer is an HP LaserJet")
    result = engram.turn("kai", "The printer jams again and again " * 5)
    assert result["recall_error"] is None and result["recall"]


def test_a_token_without_memory_read_gets_no_memory_content(make_client):
    """Least privilege: memory:write writes; it does not read back the end-user's memory through a
    write's answer (a turn's recall, a write's echo, an outcome's playbook, a dry run's proposals)."""
    full, writer = make_client(), make_client("memory:write")
    full.turn("kim", "My cat is called Zorblax and she likes tuna.")
    playbook = full.write_playbook("kim", "Zorblax will not eat", "Warm the tuna a little.")
    turn = writer.turn("kim", "Zorblax still likes tuna?")
    assert turn["status"] == "applied" and turn["memory"] is None and turn["recall"] is None
    assert (turn["recall_error"]["code"], turn["recall_error"]["details"]) == (
        "insufficient_scope", {"required_scope": ["memory:read"]})
    fact = writer.write_fact("kim", "Kim's cat is called Zorblax.")
    assert fact["id"] and fact["memory"] is None
    outcome = writer.record_outcome("kim", playbook["id"], True)
    assert outcome["status"] == "applied" and outcome["memory"] is None
    status, queued = writer.request("POST", "subjects/kim/consolidate", json={})
    assert status == 202 and set(queued["run"]) >= {"id", "status"} and queued["changes"] is None
    with pytest.raises(EngramAPIError) as err:
        writer.request("POST", "subjects/kim/consolidate", json={"dry_run": True})
    assert (err.value.status, err.value.code, err.value.details) == (403, "insufficient_scope",
                                                                      {"required_scope": ["memory:read"]})
    status, dry = full.request("POST", "subjects/kim/consolidate", json={"dry_run": True})
    assert status == 200 and isinstance(dry["changes"], list)


def test_erasing_an_end_user_needs_tenant_admin_or_subject_erase(make_client):
    full = make_client()
    for name in ("lea", "max"):
        full.turn(name, "hello")
    with pytest.raises(EngramAPIError) as err:
        make_client("memory:read", "memory:write", "memory:forget").erase_subject("lea")
    assert (err.value.status, err.value.code) == (403, "insufficient_scope")
    assert err.value.details == {"required_scope": ["tenant:admin", "subject:erase"]}
    assert make_client("subject:erase").erase_subject("lea")["status"] == "applied"
    assert make_client("tenant:admin").erase_subject("max")["status"] == "applied"


def test_the_schemas_links_name_operations_and_the_parameters_they_take(client, db):
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operations = {op["operationId"]: op for methods in schema["paths"].values() for op in methods.values()}
    links = [(source, link) for source, op in operations.items() for answer in op["responses"].values()
             for link in answer.get("links", {}).values()]
    assert len(links) >= 40
    for source, link in links:
        target = operations[link["operationId"]]
        taken = {p["name"] for p in target.get("parameters", [])}
        assert set(link["parameters"]) <= taken, (source, link)
    # The chain a client follows to read, forget and read again what a turn stored.
    turn = operations["turn_create"]["responses"]["201"]["links"]
    assert turn["ReadMemory"]["parameters"]["memory_id"] == "$response.body#/id"
    assert operations["memory_get"]["responses"]["200"]["links"]["ForgetIt"]["operationId"] == "memory_forget"
    assert operations["memory_forget"]["responses"]["200"]["links"]["ReadForgotten"]["operationId"] == "memory_get"
