"""Forget and erase: content-free tombstones, "not yours" as missing, every copy and counter gone."""

from datetime import UTC, datetime

import pytest

from engram_core.errors import NotFound
from engram_core.es.schema import MemoryType, alias_name
from memory_app.models import FactUsage, ForgetNote
from memory_app.selectors import memory_get, subject_export
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_outcome_record, playbook_write
from memory_app.services.forget import memory_forget, subject_erase
from memory_app.usage import usage_bump
from tenants.models import AuditEvent, SubjectKey


def test_forget_leaves_a_content_free_tombstone(subject):
    fact = fact_write(subject=subject, text="Alice's PIN is 4321.")
    memory_forget(subject=subject, memory_id=fact["id"], reason="sensitive", actor="agent:test")
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id=fact["id"])
    event = AuditEvent.objects.get(action="memory.forget")
    assert event.target_id == fact["id"] and event.details == {"memory_type": "semantic", "reason": "sensitive"}
    assert "4321" not in str(event.details)
    with pytest.raises(NotFound):
        memory_forget(subject=subject, memory_id=fact["id"], reason="sensitive", actor="agent:test")


def test_forgetting_someone_elses_memory_is_not_found(subject, make_subject):
    bob = make_subject("bob")
    fact = fact_write(subject=bob, text="Bob's locker code is 999.")
    with pytest.raises(NotFound):
        memory_forget(subject=subject, memory_id=fact["id"], reason="other", actor="agent:test")
    assert memory_get(subject=bob, memory_id=fact["id"])["text"] == "Bob's locker code is 999."


def test_export_and_erase(subject, make_subject, count_docs):
    bob = make_subject("bob")
    episode_write(subject=subject, text="I need a new phone.")
    fact_write(subject=subject, text="Alice wants a new phone.")
    playbook_write(subject=subject, trigger="phone upgrade", steps="Offer trade-in.")
    catalog_entry_write(tenant=subject.tenant, title="Phones", text="Trade-ins are accepted.")
    fact_write(subject=bob, text="Bob has a new phone.")

    exported = subject_export(subject=subject)
    assert {k: len(v) for k, v in exported["memories"].items()} == {"episodic": 1, "semantic": 1, "procedural": 1}
    assert all("embedding" not in d for items in exported["memories"].values() for d in items)

    assert subject_erase(subject=subject, actor="agent:test") == 3
    assert count_docs() == 2  # bob's fact and the catalog entry remain
    assert not SubjectKey.objects.filter(subject=subject, revoked_at__isnull=True).exists()
    assert AuditEvent.objects.filter(action="subject.erase", target_id=str(subject.user_id)).exists()


def test_forget_and_erase_delete_the_use_counters(make_subject):
    alice, bob = make_subject("alice"), make_subject("bob")
    kept, gone = (fact_write(subject=alice, text=t) for t in ("Alice hikes.", "Alice smokes."))
    bobs = fact_write(subject=bob, text="Bob sails.")
    at = datetime.now(UTC)
    usage_bump(ids=[kept["id"], gone["id"]], at=at, subject_id=alice.pk)
    usage_bump(ids=[bobs["id"]], at=at, subject_id=bob.pk)
    memory_forget(subject=alice, memory_id=gone["id"], reason="user_request", actor="test")
    ours = FactUsage.objects.filter(subject__in=[alice, bob])  # (rows of earlier tests' pool threads stay)
    assert set(ours.values_list("pk", flat=True)) == {kept["id"], bobs["id"]}
    subject_erase(subject=alice, actor="test")
    assert set(ours.values_list("pk", flat=True)) == {bobs["id"]}


def test_a_fact_derived_from_the_forgotten_episode_alone_goes_with_it(subject):
    episode = episode_write(subject=subject, text="I'm allergic to peanuts.")
    fact = fact_write(subject=subject, text="Alice is allergic to peanuts.", supporting_episode_ids=[episode["id"]])
    result = memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test")
    assert result["cascade"]["forgotten"] == [{"id": fact["id"], "memory_type": "semantic"}]
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id=fact["id"])


def test_a_fact_with_support_left_keeps_only_that_support_and_is_flagged_for_review(subject):
    said, again = (episode_write(subject=subject, text=t)["id"] for t in ("I love jazz.", "Jazz is my favourite."))
    fact = fact_write(subject=subject, text="Alice loves jazz.", supporting_episode_ids=[said, again])
    result = memory_forget(subject=subject, memory_id=said, reason="user_request", actor="test")
    kept = memory_get(subject=subject, memory_id=fact["id"])
    assert kept["supporting_episode_ids"] == [again]
    assert kept["metadata"]["review"]["reason"] == "supporting_episodes_forgotten"
    assert result["cascade"] == {"forgotten": [], "flagged": [{"id": fact["id"], "memory_type": "semantic"}],
                                 "kept": []}
    flagged = AuditEvent.objects.get(action="memory.flagged", target_id=fact["id"])
    assert flagged.details == {"memory_type": "semantic", "reason": "user_request", "cascade_of": [said]}


def test_forgetting_a_fact_leaves_its_episodes(subject):
    episode = episode_write(subject=subject, text="I'm allergic to peanuts.")
    fact = fact_write(subject=subject, text="Alice is allergic to peanuts.", supporting_episode_ids=[episode["id"]])
    result = memory_forget(subject=subject, memory_id=fact["id"], reason="inaccurate", actor="test")
    assert memory_get(subject=subject, memory_id=episode["id"])["text"] == "I'm allergic to peanuts."
    assert result["cascade"] == {"forgotten": [], "flagged": [], "kept": []}


def test_an_agent_that_opts_out_of_the_cascade_keeps_the_derived_memories_and_it_is_audited(subject):
    episode = episode_write(subject=subject, text="I'm allergic to peanuts.")
    fact = fact_write(subject=subject, text="Alice is allergic to peanuts.", supporting_episode_ids=[episode["id"]])
    result = memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test",
                           cascade=False)
    kept = memory_get(subject=subject, memory_id=fact["id"])
    assert kept["text"] == "Alice is allergic to peanuts." and not kept.get("supporting_episode_ids")
    assert "review" not in kept["metadata"]
    assert result["cascade"]["kept"] == [{"id": fact["id"], "memory_type": "semantic"}]
    event = AuditEvent.objects.get(action="memory.forget", target_id=episode["id"])
    assert event.details["cascade"] is False and event.details["derived"] == {"kept": [fact["id"]]}


def test_an_agents_playbook_is_flagged_not_forgotten_when_the_episode_of_its_outcome_goes(subject):
    playbook = playbook_write(subject=subject, trigger="router offline", steps="Restart it.")
    episode = episode_write(subject=subject, text="Restarting the router worked!")
    playbook_outcome_record(subject=subject, playbook_id=playbook["id"], success=True, episode_id=episode["id"])
    result = memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test")
    kept = memory_get(subject=subject, memory_id=playbook["id"])
    assert kept["success_count"] == 1 and not kept.get("supporting_episode_ids")
    assert result["cascade"]["flagged"] == [{"id": playbook["id"], "memory_type": "procedural"}]


def test_a_forget_cut_short_after_the_delete_completes_its_cascade_when_retried(subject, monkeypatch):
    from memory_app.services.forget import cascade

    episode = episode_write(subject=subject, text="I'm allergic to peanuts.")
    fact = fact_write(subject=subject, text="Alice is allergic to peanuts.", supporting_episode_ids=[episode["id"]])
    real = cascade.derived_follow
    monkeypatch.setattr(cascade, "derived_follow", lambda **kw: (_ for _ in ()).throw(ConnectionError("cut")))
    with pytest.raises(ConnectionError):
        memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test")
    monkeypatch.setattr(cascade, "derived_follow", real)
    with pytest.raises(NotFound):  # the episode is gone; its retry still takes the fact along
        memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test")
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id=fact["id"])


def test_a_forget_note_is_kept_outside_the_audit_chain_and_erased_with_the_end_user(subject):
    fact = fact_write(subject=subject, text="Alice's PIN is 4321.")
    memory_forget(subject=subject, memory_id=fact["id"], reason="other", note="Ticket 88: she called",
                  actor="test")
    event = AuditEvent.objects.get(action="memory.forget", target_id=fact["id"])
    assert "Ticket" not in str(event.chain_fields())
    assert ForgetNote.objects.get(audit_event=event).note == "Ticket 88: she called"
    subject_erase(subject=subject, actor="test")
    assert not ForgetNote.objects.filter(subject=subject).exists()


def test_a_forget_note_quoting_what_it_forgets_is_redacted_with_it(subject):
    fact = fact_write(subject=subject, text="Alice's PIN is 4321.")
    memory_forget(subject=subject, memory_id=fact["id"], reason="other", actor="test",
                  note="she said: Alice's PIN is 4321.")
    assert ForgetNote.objects.get(memory_id=fact["id"]).note == "she said: [forgotten]"  # the quote, not the note


def test_an_erased_end_user_is_never_given_a_new_key(subject):
    from tenants.services.clients import subject_es_client

    episode_write(subject=subject, text="hello")
    subject_erase(subject=subject, actor="test")
    with pytest.raises(NotFound):  # a read that still holds the end-user, e.g. a run in flight
        subject_es_client(subject=subject)
    assert not SubjectKey.objects.filter(subject=subject, revoked_at__isnull=True).exists()


def test_a_write_in_flight_when_the_end_user_is_erased_leaves_nothing_behind(subject, count_docs, monkeypatch):
    from memory_app.services import context

    real = context.episode_vectors

    def erased_meanwhile(*args, **kwargs):
        vectors = real(*args, **kwargs)
        subject_erase(subject=subject, actor="test")  # while the turn is being embedded
        return vectors

    monkeypatch.setattr(context, "episode_vectors", erased_meanwhile)
    with pytest.raises(NotFound):
        episode_write(subject=subject, text="I was just about to say something")
    assert count_docs() == 0


def test_forget_finds_the_turns_written_within_the_refresh_interval(subject, es_admin):
    """Review finding: the context searches ran without a refresh, so a turn stored without waiting
    for one kept the forgotten text in its derived context (and vector) or its quoted context."""
    from tests.api.conftest import slow_refresh

    with slow_refresh(es_admin) as index:
        said = episode_write(subject=subject, text="My garage code is 8812.", session_id="s1")
        later = episode_write(subject=subject, text="Please keep it safe.", session_id="s1", defer_refresh=True)
        quoted = episode_write(subject=subject, text="Noted.", context="USER: my garage code is 8812.",
                               defer_refresh=True)
        memory_forget(subject=subject, memory_id=said["id"], reason="user_request", actor="test")
        stored = {d["_id"]: d["_source"] for d in es_admin.mget(index=index, ids=[later["id"], quoted["id"]])["docs"]}
    assert stored[later["id"]].get("derived_context") is None and stored[later["id"]].get("context_ids") is None
    assert stored[quoted["id"]]["context"] == "USER: [forgotten]"


def test_a_forget_cut_short_after_its_delete_has_purged_the_copies(subject, monkeypatch):
    """Review finding: retried, such a forget finds the memory missing (NotFound) and, its text gone,
    never purged the copies. They are purged before the delete now."""
    from memory_app.models import IdempotencyRecord, OutboxEntry
    from memory_app.services.forget import cascade
    from tenants.services.tokens import agent_token_create

    episode = episode_write(subject=subject, text="My garage code is 8812.")
    own = {"tenant": subject.tenant, "external_id": subject.external_id}
    queued = OutboxEntry.objects.create(**own, operation="episode", memory_id="queued-turn-0001", actor="t",
                                        reason="backlog", payload={"text": "Thanks, my garage code is 8812.",
                                                                   "context": "USER: My garage code is 8812.\nAGENT: ok"})
    token, _ = agent_token_create(tenant=subject.tenant, name="agent", scopes=["memory:write"], actor="test")
    stored = IdempotencyRecord.objects.create(
        **own, token=token, key="k-1", method="POST", path="/x", fingerprint="f", memory_id="turn-0002",
        status_code=201, response_body={"id": "turn-0002", "text": "what is my garage code?",
                                        "recall": [{"id": episode["id"], "text": "My garage code is 8812."}]})
    monkeypatch.setattr(cascade, "derived_follow", lambda **kw: (_ for _ in ()).throw(ConnectionError("cut")))
    with pytest.raises(ConnectionError):
        memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test")
    monkeypatch.undo()
    with pytest.raises(NotFound):
        memory_forget(subject=subject, memory_id=episode["id"], reason="user_request", actor="test")
    queued.refresh_from_db()
    stored.refresh_from_db()
    # The queued write keeps its own text; only the quote in its context goes.
    assert queued.payload == {"text": "Thanks, my garage code is 8812.", "context": "USER: [forgotten]\nAGENT: ok"}
    assert stored.response_body == {"id": "turn-0002", "text": "what is my garage code?",
                                    "recall": [{"id": episode["id"], "forgotten": True}]}


def test_forgetting_a_short_turn_changes_only_what_it_forgets(subject, es_admin):
    """The issue's cases: forgetting "ok" rewrote "booked it, ok?" into "bo[forgotten]ed it,
    [forgotten]?" and a stored answer of an unrelated turn into "[forgotten]"; a queued write quoting
    nothing of it was redacted too."""
    from memory_app.models import IdempotencyRecord, OutboxEntry
    from tenants.services.tokens import agent_token_create

    ok = episode_write(subject=subject, text="ok")
    booked = episode_write(subject=subject, text="Done.", context="I looked at the cookbook and booked it, ok?")
    alarm = episode_write(subject=subject, text="The smoke alarm in the kitchen is broken")
    own = {"tenant": subject.tenant, "external_id": subject.external_id}
    token, _ = agent_token_create(tenant=subject.tenant, name="agent", scopes=["memory:write"], actor="test")
    answer = {"status": "applied", "id": alarm["id"], "memory": {"id": alarm["id"], "text": alarm["text"]},
              "recall": [{"id": booked["id"], "text": "Done.", "context": "the cookbook"}]}
    replayed = IdempotencyRecord.objects.create(**own, token=token, key="alarm", method="POST", path="/turns",
                                                fingerprint="f", memory_id=alarm["id"], status_code=201,
                                                response_body=answer)
    pending = {"text": "Took a look, booked the oven, OK  thanks", "context": "cookbook; ok then"}
    queued = OutboxEntry.objects.create(**own, operation="episode", memory_id="queued-turn-0002", actor="t",
                                        reason="backlog", payload=pending)
    memory_forget(subject=subject, memory_id=ok["id"], reason="user_request", actor="test")
    docs = {d["_id"]: d["_source"] for d in es_admin.mget(index=alias_name(MemoryType.EPISODIC),
                                                          ids=[booked["id"], alarm["id"]])["docs"]}
    assert docs[booked["id"]]["context"] == "I looked at the cookbook and booked it, [forgotten]?"
    assert docs[alarm["id"]]["text"] == "The smoke alarm in the kitchen is broken"
    replayed.refresh_from_db()
    queued.refresh_from_db()
    assert replayed.response_body == answer  # names neither the memory nor quotes it: byte-identical
    assert queued.payload == {"text": "Took a look, booked the oven, OK  thanks", "context": "cookbook; [forgotten] then"}
