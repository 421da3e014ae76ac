"""Consolidation runs against the real Elasticsearch: create, merge, supersede, idempotence,
dry run, forgotten episodes, playbooks, the run record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram_core.errors import Conflict, NotFound
from engram_core.es.schema import MemoryType, alias_name
from memory_app.consolidation.selectors import consolidation_runs_list, episodes_pending, fact_neighbours
from memory_app.consolidation.services import consolidation_run
from memory_app.management.commands.seed_demo import CONVERSATION, HISTORY, SUBJECTS, seed_history
from memory_app.providers import get_embedder
from memory_app.recall import memory_recall
from memory_app.models import ConsolidationRun
from memory_app.services.facts import fact_write
from memory_app.services.episodes import episode_write
from memory_app.services.forget import memory_forget
from memory_app.services.store import write_target
from memory_app.selectors import subject_export
from tenants.models import Tenant
from tenants.services.subjects import subject_get_or_create
from tests.consolidation.conftest import T0
from tenants.services.keys import KeyLifetimes

pytestmark = pytest.mark.django_db(transaction=True)


def _texts(facts: dict[str, dict], *, current: bool = True) -> list[str]:
    return sorted(f["text"] for f in facts.values() if current is None or (not f.get("superseded_by")) == current)


def test_facts_name_the_end_user_by_display_name_else_the_user(subject, say, current_facts):
    subject.display_name = "Alice  Moreau"
    subject.save()
    say(subject, "I have a cat, so please no loud alarms after 10pm.", "I work as a nurse at the city hospital.")
    consolidation_run(subject=subject)
    assert _texts(current_facts(subject)) == ["Alice Moreau has a cat, so please no loud alarms after 10pm.",
                                              "Alice Moreau works as a nurse at the city hospital."]
    subject.display_name = "  "
    subject.save()
    say(subject, "My favourite colour is teal.", session="s2")
    consolidation_run(subject=subject)
    assert "The user's favourite colour is teal." in _texts(current_facts(subject))


def test_creates_grounded_facts_and_advances_the_watermark(subject, say, current_facts):
    ids = say(subject, "My favourite colour is blue.", "I work as a nurse at the city hospital.",
              "What's the weather like tomorrow?")
    run = consolidation_run(subject=subject).run
    facts = current_facts(subject)
    assert _texts(facts) == ["The user works as a nurse at the city hospital.", "The user's favourite colour is blue."]
    by_text = {f["text"]: f for f in facts.values()}
    assert by_text["The user's favourite colour is blue."]["supporting_episode_ids"] == [ids[0]]
    assert by_text["The user's favourite colour is blue."]["source"] == "consolidation"
    assert run.status == "succeeded" and run.episodes_read == 3 and run.facts_created == 2
    assert run.extractor == "rules" and run.duration_ms is not None
    assert episodes_pending(subject=subject, limit=500) == []
    assert consolidation_runs_list(subject=subject, limit=5) == [run]


def test_near_duplicate_merges_and_raises_confidence(subject, say, current_facts):
    first = say(subject, "My favourite colour is blue.")
    consolidation_run(subject=subject)
    again = say(subject, "As I said, my favorite color is blue!")
    run = consolidation_run(subject=subject).run
    facts = current_facts(subject)
    assert len(facts) == 1
    fact = next(iter(facts.values()))
    assert fact["supporting_episode_ids"] == [*first, *again]
    assert fact["confidence"] > 0.8
    assert run.facts_merged == 1 and run.facts_created == 0


def test_a_candidate_this_similar_to_a_fact_the_demo_wrote_merges_into_it(subject, say, current_facts):
    # The demo's pair: an agent wrote the first; consolidation reads the second from a turn.
    subject.display_name = "Alice"
    subject.save()
    stored = fact_write(subject=subject, text="Alice has a cat and wants no loud alarms after 22:00.")["id"]
    turn = say(subject, "I have a cat, so please no loud alarms after 10pm.")
    run = consolidation_run(subject=subject).run
    facts = current_facts(subject)
    assert list(facts) == [stored] and facts[stored]["supporting_episode_ids"] == turn
    assert run.facts_merged == 1 and run.facts_created == 0


def test_numbers_that_differ_are_never_merged(subject, say, current_facts):
    say(subject, "I have 2 kids and a dog named Rex.", "I love the 1990 Lakers.")
    say(subject, "I love the 1998 Lakers.")
    consolidation_run(subject=subject)
    assert _texts(current_facts(subject)) == ["The user has 2 kids and a dog named Rex.", "The user likes the 1990 Lakers.",
                                              "The user likes the 1998 Lakers."]


def test_same_slot_change_supersedes_naturally_and_correction_harshly(subject, say, current_facts):
    say(subject, "I live in Paris.", "My favourite colour is blue.")
    consolidation_run(subject=subject)
    say(subject, "I moved to Berlin last month.", "Actually, it's green.")  # corrects the last fact: the city
    consolidation_run(subject=subject)
    facts = current_facts(subject)
    by_text = {f["text"]: (i, f) for i, f in facts.items()}
    berlin_id, berlin = by_text["The user lives in Berlin."]
    paris_id, paris = by_text["The user lives in Paris."]
    assert berlin["supersedes"] == [paris_id] and berlin["contradiction"] == "natural"
    assert paris["superseded_by"] == [berlin_id]
    # "Actually, it's green" in the second run follows "I moved to Berlin": it corrects the city, harshly.
    green_id, green = by_text["The user lives in green."]
    assert green["contradiction"] == "harsh" and green["supersedes"] == [berlin_id]
    assert green["confidence"] == pytest.approx(0.7)
    # The colour is another slot: untouched.
    assert not by_text["The user's favourite colour is blue."][1].get("superseded_by")


def test_unrelated_facts_never_retire_each_other(subject, say, current_facts):
    say(subject, "My sister's name is Anna.", "My brother's name is Tom.", "I like jazz.", "I like tennis.",
        "My car is a red Volvo.", "My bike is a red Trek.")
    consolidation_run(subject=subject)
    say(subject, "I no longer like jazz.", "My car is now a blue Tesla.")
    consolidation_run(subject=subject)
    facts = current_facts(subject)
    assert _texts(facts) == sorted([
        "The user's sister's name is Anna.", "The user's brother's name is Tom.", "The user likes tennis.",
        "The user no longer likes jazz.", "The user's bike is a red Trek.", "The user's car is a blue Tesla."])
    assert _texts(facts, current=False) == ["The user likes jazz.", "The user's car is a red Volvo."]


def test_switch_from_x_to_y_supersedes_the_fact_holding_x(subject, say, current_facts):
    say(subject, "My phone is an Android.", "My laptop is a ThinkPad.")
    consolidation_run(subject=subject)
    say(subject, "I switched from Android to an iPhone.")
    consolidation_run(subject=subject)
    facts = current_facts(subject)
    assert _texts(facts) == ["The user switched from Android to an iPhone.", "The user's laptop is a ThinkPad."]


def test_agent_written_fact_is_resolved_by_its_inferred_slot(subject, say, current_facts):
    old = fact_write(subject=subject, text="The user lives in Lisbon.")
    say(subject, "I moved to Porto.")
    consolidation_run(subject=subject)
    facts = current_facts(subject)
    assert facts[old["id"]]["superseded_by"]
    assert _texts(facts) == ["The user lives in Porto."]


def test_rerun_over_the_same_episodes_changes_nothing(subject, say, current_facts, es_admin):
    say(subject, "I live in Paris.", "My favourite colour is blue.", "I moved to Berlin.", "I like jazz.",
        "My router keeps dropping the connection.", "I restarted the router.", "That worked, thanks!")
    consolidation_run(subject=subject)
    before = current_facts(subject)
    playbooks_before = _all(es_admin, MemoryType.PROCEDURAL, subject)
    # Move the watermark back: every episode is read and extracted again.
    index = alias_name(MemoryType.EPISODIC)
    for hit in es_admin.search(index=index, size=100, query={"term": {"user_id": str(subject.user_id)}})["hits"]["hits"]:
        es_admin.update(index=index, id=hit["_id"], doc={"consolidated_at": None}, refresh=True)
    assert len(episodes_pending(subject=subject, limit=500)) == 7
    run = consolidation_run(subject=subject).run
    assert current_facts(subject) == before
    assert _all(es_admin, MemoryType.PROCEDURAL, subject) == playbooks_before
    assert (run.facts_created, run.facts_merged, run.facts_superseded, run.playbooks_created,
            run.outcomes_recorded) == (0, 0, 0, 0, 0)
    assert run.facts_unchanged == 4


def _all(es_admin, memory_type, subject):
    index = alias_name(memory_type)
    es_admin.indices.refresh(index=index)
    return {h["_id"]: h["_source"] for h in es_admin.search(
        index=index, size=100, query={"term": {"user_id": str(subject.user_id)}},
        source_excludes=["embedding"])["hits"]["hits"]}


def test_dry_run_proposes_and_writes_nothing(subject, say, current_facts, count_docs):
    say(subject, "I live in Paris.")
    consolidation_run(subject=subject)
    say(subject, "I moved to Rome.", "My favourite colour is blue.")
    docs = count_docs()
    result = consolidation_run(subject=subject, dry_run=True)
    assert count_docs() == docs
    assert len(episodes_pending(subject=subject, limit=500)) == 2
    actions = {c["text"]: c for c in result.changes}
    assert actions["The user lives in Rome."]["action"] == "supersede"
    assert actions["The user lives in Rome."]["target_text"] == "The user lives in Paris."
    assert actions["The user's favourite colour is blue."]["action"] == "create"
    assert result.run.status == "dry_run" and result.run.facts_superseded == 1


def test_ungrounded_candidates_are_dropped_and_counted(subject, say, current_facts, monkeypatch):
    from memory_app.consolidation.extractors import Extraction, FactCandidate, rules

    ids = say(subject, "I live in Paris.")
    monkeypatch.setattr(rules.RulesExtractor, "extract", lambda self, *, episodes, context, **_: Extraction(facts=[
        FactCandidate(text="The user lives in Paris.", episode_ids=(ids[0],), slot="home", value="Paris"),
        FactCandidate(text="The user owns a yacht in Monaco.", episode_ids=(ids[0],))]))
    run = consolidation_run(subject=subject).run
    assert _texts(current_facts(subject)) == ["The user lives in Paris."]
    assert run.candidates == 2 and run.candidates_dropped == 1 and run.facts_created == 1


def test_forgotten_episodes_are_not_rederived_and_what_was_derived_goes_with_them(subject, say, current_facts):
    ids = say(subject, "My favourite colour is blue.", "I live in Oslo.")
    consolidation_run(subject=subject)
    waiting = say(subject, "I like sailing.")
    memory_forget(subject=subject, memory_id=waiting[0], reason="user_request", actor="test")
    memory_forget(subject=subject, memory_id=ids[0], reason="user_request", actor="test")
    run = consolidation_run(subject=subject).run
    facts = {f["text"]: f for f in current_facts(subject).values()}
    assert "The user likes sailing." not in facts  # forgotten before consolidation: never derived
    assert "The user's favourite colour is blue." not in facts  # forgotten with its episode
    assert "review" not in facts["The user lives in Oslo."]["metadata"]
    assert run.facts_flagged == 0


def test_a_fact_whose_episode_went_before_forgets_cascaded_follows_it_at_the_next_run(subject, say, current_facts):
    ids = say(subject, "My favourite colour is blue.", "I live in Oslo.")
    consolidation_run(subject=subject)
    # As a forget before this release left it: the episode gone, the fact still there.
    writer = write_target(tenant=subject.tenant)[0]
    writer.delete(index=alias_name(MemoryType.EPISODIC), id=ids[0], refresh=True)
    run = consolidation_run(subject=subject).run
    assert sorted(f["text"] for f in current_facts(subject).values()) == ["The user lives in Oslo."]
    assert run.facts_flagged == 1
    assert consolidation_run(subject=subject).run.facts_flagged == 0  # once


def test_a_playbook_consolidated_from_episodes_follows_them(subject, say, es_admin):
    ids = say(subject, "My thermostat won't connect to the wifi.", "I reset the thermostat by holding the button.",
              "That worked!", session="a")
    consolidation_run(subject=subject)
    [playbook] = _all(es_admin, MemoryType.PROCEDURAL, subject).values()
    assert sorted(playbook["supporting_episode_ids"]) == sorted(ids)
    for episode_id in ids:
        memory_forget(subject=subject, memory_id=episode_id, reason="user_request", actor="test")
    assert _all(es_admin, MemoryType.PROCEDURAL, subject) == {}


def test_a_fact_derived_while_its_episode_was_being_forgotten_follows_it(subject, say, current_facts, monkeypatch):
    """The run read the episode; the forget deleted it and found nothing derived yet; the run then
    wrote the fact. The fact must not outlive its episode."""
    from memory_app.consolidation import services

    ids = say(subject, "My favourite colour is blue.")
    real = services._plan

    def plan_then_forget(**kwargs):
        planned = real(**kwargs)
        memory_forget(subject=subject, memory_id=ids[0], reason="user_request", actor="test")
        return planned

    monkeypatch.setattr(services, "_plan", plan_then_forget)
    consolidation_run(subject=subject)
    assert current_facts(subject) == {}


def test_playbooks_are_proposed_and_outcomes_counted_once(subject, say, es_admin):
    say(subject, "My thermostat won't connect to the wifi.", "I tried restarting the router.",
        "Still not working.", "I reset the thermostat by holding the button for 10 seconds.", "That worked!",
        session="a")
    run = consolidation_run(subject=subject).run
    playbooks = list(_all(es_admin, MemoryType.PROCEDURAL, subject).values())
    assert len(playbooks) == 1
    assert playbooks[0]["trigger"] == "The thermostat won't connect to the wifi"
    assert "Reset the thermostat" in playbooks[0]["steps"]
    assert (playbooks[0]["success_count"], playbooks[0]["failure_count"]) == (1, 0)
    assert run.playbooks_created == 1
    say(subject, "The thermostat won't connect to the wifi again.", "I reset the thermostat by holding the button.",
        "Still broken.", session="b")
    run = consolidation_run(subject=subject).run
    playbooks = list(_all(es_admin, MemoryType.PROCEDURAL, subject).values())
    assert len(playbooks) == 1 and (playbooks[0]["success_count"], playbooks[0]["failure_count"]) == (1, 1)
    assert run.outcomes_recorded == 1


def test_an_outcome_counts_only_for_the_playbook_of_its_own_thread(subject, say, es_admin):
    from tenants.models import AuditEvent

    say(subject, "The hallway motion sensor stopped working.", "I replaced the batteries in the sensor.",
        "That worked!", session="a")
    consolidation_run(subject=subject)
    # A week later the same trouble, something else done about it, and a question that is no step.
    say(subject, "The hallway motion sensor stopped working this morning.",
        "I changed the front door lock yesterday, is that why?", "I re-paired the sensor with the hub.",
        "That did the trick.", session="b")
    consolidation_run(subject=subject)
    by_steps = {p["steps"]: p for p in _all(es_admin, MemoryType.PROCEDURAL, subject).values()}
    assert sorted(by_steps) == ["1. Re-paired the sensor with the hub", "1. Replaced the batteries in the sensor"]
    assert [(p["success_count"], p["failure_count"]) for p in by_steps.values()] == [(1, 0), (1, 0)]
    # The same steps tried again in a third thread are that playbook's outcome.
    say(subject, "The hallway motion sensor stopped working again.", "I replaced the batteries in the sensor.",
        "Still not working.", session="c")
    run = consolidation_run(subject=subject).run
    batteries = next(p for p in _all(es_admin, MemoryType.PROCEDURAL, subject).values() if "batteries" in p["steps"])
    assert (batteries["success_count"], batteries["failure_count"]) == (1, 1) and run.outcomes_recorded == 1
    outcomes = AuditEvent.objects.filter(action="playbook.outcome", subject=subject)
    assert outcomes.count() == 3 and set(outcomes.values_list("actor", flat=True)) == {"consolidation"}


def test_a_failed_run_is_recorded_and_leaves_the_watermark(subject, say, monkeypatch):
    from memory_app.consolidation.extractors import ExtractorFailed, rules

    say(subject, "I live in Paris.")

    def fail(self, *, episodes, context, **_):
        raise ExtractorFailed("boom", code="llm_bad_answer")

    monkeypatch.setattr(rules.RulesExtractor, "extract", fail)
    with pytest.raises(ExtractorFailed):
        consolidation_run(subject=subject)
    run = ConsolidationRun.objects.get(subject=subject)
    assert run.status == "failed" and run.error["code"] == "llm_bad_answer"
    assert len(episodes_pending(subject=subject, limit=500)) == 1


def test_a_node_lost_mid_run_fails_the_run_as_an_outage_not_an_internal_error(subject, say, monkeypatch):
    from elasticsearch import ConnectionError as TransportConnectionError

    from engram_core.errors import ServiceUnavailable
    from memory_app.consolidation.extractors import rules

    say(subject, "I live in Paris.")

    def lost(self, *, episodes, context, **_):
        raise TransportConnectionError("Connection refused")

    monkeypatch.setattr(rules.RulesExtractor, "extract", lost)
    with pytest.raises(ServiceUnavailable) as raised:  # the task retries an outage
        consolidation_run(subject=subject)
    assert raised.value.code == "elasticsearch_unreachable"
    run = ConsolidationRun.objects.get(subject=subject)
    assert run.status == "failed" and run.error["code"] == "elasticsearch_unreachable"
    assert len(episodes_pending(subject=subject, limit=500)) == 1


def test_a_supersession_cut_short_is_completed_by_the_rerun(subject, say, current_facts, es_admin):
    say(subject, "I live in Paris.")
    consolidation_run(subject=subject)
    say(subject, "I moved to Rome.")
    consolidation_run(subject=subject)
    facts = {f["text"]: (i, f) for i, f in current_facts(subject).items()}
    paris_id, rome_id = facts["The user lives in Paris."][0], facts["The user lives in Rome."][0]
    # As if the worker died after storing the new fact and before marking the old one, and
    # before the watermark moved.
    index = alias_name(MemoryType.SEMANTIC)
    es_admin.update(index=index, id=paris_id, doc={"superseded_by": None, "superseded_at": None}, refresh=True)
    episodic = alias_name(MemoryType.EPISODIC)
    for hit in es_admin.search(index=episodic, size=10, query={"match": {"text": "Rome"}})["hits"]["hits"]:
        es_admin.update(index=episodic, id=hit["_id"], doc={"consolidated_at": None}, refresh=True)
    run = consolidation_run(subject=subject).run
    after = current_facts(subject)
    assert after[paris_id]["superseded_by"] == [rome_id]
    assert len(after) == 2 and run.facts_unchanged == 1 and run.facts_created == 0


def test_neighbours_by_vector_are_the_end_users_current_facts(subject, make_subject, es_admin):
    kept = fact_write(subject=subject, text="The user's sister Ana lives in Lisbon.")
    old = fact_write(subject=subject, text="The user rides a red bicycle to work.")
    newer = fact_write(subject=subject, text="The user rides a blue scooter to work.", supersedes=[old["id"]])
    fact_write(subject=make_subject("bob"), text="The user's sister Ana lives in Lisbon.")
    es_admin.indices.refresh(index=alias_name(MemoryType.SEMANTIC))
    vector = get_embedder().embed_query("The user's sister Ana lives in Lisbon.")
    # A text with no word of any fact: whatever is found, the kNN query found.
    [found] = fact_neighbours(subject=subject, texts=["qqq"], vectors=[vector], k=10)
    cosine = {f.id: f.cosine for f in found}
    assert set(cosine) == {kept["id"], newer["id"]}  # not the superseded fact, not bob's twin
    assert cosine[kept["id"]] > 0.99 > cosine[newer["id"]]



def test_a_change_told_in_other_words_also_searches_the_words_of_the_facts_it_ends(subject, es_admin):
    # "We got married" shares no word with "my new SO": the words of the facts it may end
    # (``changes.neighbour_words``) are a lexical search of their own, beside the text's.
    near = fact_write(subject=subject, text="The user got a new bike for the wedding trip.")
    stage = fact_write(subject=subject, text="The user's new SO is called Mina.")
    es_admin.indices.refresh(index=alias_name(MemoryType.SEMANTIC))
    vector = get_embedder().embed_query("The user got a new bike for the wedding trip.")
    texts = ["The user got married at the wedding."]
    [plain] = fact_neighbours(subject=subject, texts=texts, vectors=[vector], k=1)
    [worded] = fact_neighbours(subject=subject, texts=texts, vectors=[vector], k=1, words=["partner SO engaged"])
    assert {f.id for f in plain} == {near["id"]}
    assert {f.id for f in worded} == {near["id"], stage["id"]}


SUPPORT_CONVERSATION = [
    # (days after the first turn, session, text)
    (0, "s1", "Hi! We just moved to Denver last month."),
    (0, "s1", "I live here with my wife Priya and our kids, Arun who is 7 and Maya who is 4."),
    (0, "s1", "I'm allergic to penicillin."),
    (0, "s1", "Our internet provider is Comcast."),
    (0, "s1", "Our router keeps dropping the wifi every evening."),
    (0, "s1", "I restarted the router."),
    (0, "s1", "Still not working."),
    (0, "s1", "I moved the router away from the microwave and changed the channel."),
    (0, "s1", "That fixed it, thanks!"),
    (0, "s1", "We drive a blue Subaru Outback."),
    (0, "s1", "Sorry, I meant it's a green Subaru Outback, not blue."),
    (7, "s2", "Actually, Arun is 8, not 7."),
    (7, "s2", "We switched from Comcast to Verizon Fios."),
]


def test_a_support_conversation_yields_family_playbook_and_corrections(subject, current_facts):
    ids = [episode_write(subject=subject, text=text, session_id=session,
                                  occurred_at=T0 + timedelta(days=days, minutes=n))["id"]
           for n, (days, session, text) in enumerate(SUPPORT_CONVERSATION)]
    run = consolidation_run(subject=subject).run
    assert run.status == "succeeded"
    facts = current_facts(subject)
    current = _texts(facts)
    for expected in ("The user lives in Denver.", "The user's wife is Priya.", "Arun is the user's kid.", "Maya is the user's kid.",
                     "The user's kid Maya is 4 years old.", "The user's kid Arun is 8 years old.",
                     "The user is allergic to penicillin.", "The user drives a green Subaru Outback.",
                     "The user switched from Comcast to Verizon Fios."):
        assert expected in current, (expected, current)
    by_text = {f["text"]: (i, f) for i, f in facts.items()}
    superseded = {f["text"]: f for f in facts.values() if f.get("superseded_by")}
    assert set(superseded) == {"The user's kid Arun is 7 years old.", "The user drives a blue Subaru Outback.",
                               "The user's internet provider is Comcast."}
    car_id, car = by_text["The user drives a green Subaru Outback."]
    # The correction and the turn it corrects: the fact's words come from both.
    assert car["contradiction"] == "harsh" and car["supporting_episode_ids"] == [ids[9], ids[10]]
    assert by_text["The user's kid Arun is 8 years old."][1]["supporting_episode_ids"] == [ids[1], ids[11]]
    assert by_text["The user's kid Arun is 8 years old."][1]["contradiction"] == "harsh"
    assert by_text["The user switched from Comcast to Verizon Fios."][1]["contradiction"] == "natural"
    assert superseded["The user drives a blue Subaru Outback."]["superseded_by"] == [car_id]
    assert not any("blue" in t for t in current)
    [playbook] = subject_export(subject=subject)["memories"]["procedural"]
    assert playbook["trigger"] == "The router keeps dropping the wifi every evening"
    assert "Moved the router away from the microwave" in playbook["steps"]
    assert (playbook["success_count"], playbook["failure_count"]) == (1, 0)
    assert ids[8] in playbook["supporting_episode_ids"]  # the "that fixed it" that counted the success


def test_a_run_queued_right_after_a_turn_reads_the_turn(subject, es_admin, settings):
    """The issue's second reproduction: "consolidate now" right after a conversation consolidated
    nothing, because the turn was stored but not yet searchable. The run is in a worker process,
    whose cache does not hold the turn's refresh mark."""
    from django.core.cache import cache

    from tests.api.conftest import slow_refresh

    with slow_refresh(es_admin):
        episode_write(subject=subject, text="I'm allergic to peanuts and shellfish.", defer_refresh=True)
        cache.clear()  # another process: no refresh mark
        run = consolidation_run(subject=subject).run
    assert run.episodes_read == 1 and run.facts_created == 1


def test_a_run_stops_writing_once_its_end_user_is_erased(subject, say, count_docs, monkeypatch):
    from memory_app.consolidation import services
    from memory_app.services.forget import subject_erase

    say(subject, "My favourite colour is blue.", "I live in Oslo.")
    real = services._plan

    def plan_then_erase(**kwargs):
        planned = real(**kwargs)
        subject_erase(subject=subject, actor="test")  # while the run holds its plan
        return planned

    monkeypatch.setattr(services, "_plan", plan_then_erase)
    with pytest.raises(NotFound):
        consolidation_run(subject=subject)
    assert count_docs() == 0
    run = ConsolidationRun.objects.get(subject=subject)
    assert run.status == "failed" and run.error["code"] == "subject_erased"


def test_a_run_waits_for_the_end_users_queued_writes(subject, say, current_facts):
    """A forget accepted into the outbox (Elasticsearch was down, or writes queued before it) is
    not overtaken: the run does not derive a fact from the episode it forgets."""
    from memory_app.models import OutboxEntry
    from memory_app.outbox import outbox_replay

    [said] = say(subject, "My favourite colour is blue.")
    OutboxEntry.objects.create(tenant=subject.tenant, external_id=subject.external_id, operation="forget",
                               memory_id=said, payload={"reason": "user_request"}, actor="test", reason="outage")
    with pytest.raises(Conflict) as waiting:
        consolidation_run(subject=subject)
    assert waiting.value.code == "writes_queued"
    assert current_facts(subject) == {}
    assert outbox_replay().applied == 1
    assert consolidation_run(subject=subject).run.episodes_read == 0 and current_facts(subject) == {}


def test_a_slow_run_keeps_its_lease_so_no_twin_takes_over(subject, say, settings, monkeypatch):
    """The lease is renewed while its run is alive: a run slower than the lease (an LLM taking its
    time) is not taken for dead, and a second run is refused instead of marking it worker_lost
    and writing beside it."""
    import threading
    import time

    from django.db import connection

    from memory_app.consolidation.extractors import rules

    settings.ENGRAM_CONSOLIDATION_LEASE_SECONDS = 2
    say(subject, "My favourite colour is blue.")
    real, started = rules.RulesExtractor.extract, threading.Event()

    def slow(self, **kwargs):
        started.set()
        time.sleep(5)  # well past the lease
        return real(self, **kwargs)

    monkeypatch.setattr(rules.RulesExtractor, "extract", slow)
    results = {}

    def first():
        try:
            results["first"] = consolidation_run(subject=subject).run
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(10)
    time.sleep(3)  # the lease as first taken has expired
    with pytest.raises(Conflict) as twin:
        consolidation_run(subject=subject)
    assert twin.value.code == "consolidation_running"
    thread.join(30)
    assert results["first"].status == "succeeded" and results["first"].facts_created == 1


def test_dana_asks_which_provider_now_and_the_switch_ranks_above_the_old_one(memory):
    """The demo's end-user (issue 69): after "We switched from Virgin Media to BT last week." the
    fact of Virgin Media is superseded, valid until the switch's turn, and a question about now
    ranks BT first; a question about before ranks the Virgin Media turn first."""
    tenant = Tenant.objects.create(slug="demo-like", name="Demo-like")
    dana = subject_get_or_create(tenant=tenant, external_id="dana", display_name="Dana",
                                 lifetimes=KeyLifetimes.from_settings())
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    switch_at = None
    for session, (days_ago, turns) in enumerate(CONVERSATION):
        for n, text in enumerate(turns):
            at = now - timedelta(days=days_ago) + timedelta(minutes=2 * n)
            switch_at = at if "switched" in text else switch_at
            episode_write(subject=dana, text=text, occurred_at=at, session_id=f"dana-{session}")
        assert consolidation_run(subject=dana).run.status == "succeeded"
    facts = {f["text"]: f for f in subject_export(subject=dana)["memories"]["semantic"]}
    old = next(f for t, f in facts.items() if "Virgin Media" in t and "BT" not in t)
    new = next(f for t, f in facts.items() if "BT" in t)
    assert old["superseded_by"] == [new["id"]] and new["contradiction"] == "natural"
    assert datetime.fromisoformat(old["valid_to"]) == datetime.fromisoformat(new["valid_from"]) == switch_at

    hits = memory_recall(subject=dana, query="Which internet provider does Dana use now?", now=now, explain=True)
    assert "BT" in hits[0]["text"], [h["text"] for h in hits[:3]]
    stale = next(h for h in hits if h["text"] == "Our internet provider is Virgin Media.")
    assert stale["explain"]["multipliers"]["superseded"] < 1
    assert stale["explain"]["superseded_fact"]["superseded_by"] == [new["id"]]
    before = memory_recall(subject=dana, query="Which internet provider did Dana have before?", now=now)
    assert before[0]["text"] == "Our internet provider is Virgin Media.", [h["text"] for h in before[:3]]


def test_alice_s_demo_history_consolidates_into_her_facts_and_playbooks_counted_from_their_threads(memory):
    """The demo's Alice (issue 68): her support threads consolidate into facts that name her, state
    no question or request, and replace none of her current facts (her chain ends at 19/21
    degrees), and into playbooks whose outcomes come from their own threads: at most one per
    thread that reports it (the thermostat's two successes are threads 1 and 14)."""
    tenant = Tenant.objects.create(slug="demo-alice", name="Demo-like")
    external_id, name, _ = SUBJECTS[0]
    alice = subject_get_or_create(tenant=tenant, external_id=external_id, display_name=name,
                                  lifetimes=KeyLifetimes.from_settings())
    assert seed_history(tenant) > sum(len(turns) for _, _, turns in HISTORY)
    run = consolidation_run(subject=alice).run
    assert run.status == "succeeded" and run.facts_superseded == 0
    memories = subject_export(subject=alice)["memories"]
    facts = [f for f in memories["semantic"] if f.get("source") == "consolidation"]
    texts = [f["text"] for f in facts]
    assert "Miso is Alice's cat." in texts and len(texts) >= 8, texts
    for text in texts:
        assert "User" not in text and not text.rstrip(".").endswith("?"), text
        assert not text.lower().startswith(("please", "can ", "could ", "thanks")), text
    current = {f["id"] for f in memories["semantic"] if not f.get("superseded_by")}
    assert "demo-fact-v2" in current and current >= {f["id"] for f in facts}
    thread = {e["id"]: e["session_id"] for e in memories["episodic"]}
    playbooks = [p for p in memories["procedural"] if p.get("source") == "consolidation"]
    assert len(playbooks) >= 5
    for playbook in playbooks:
        threads = {thread[i] for i in playbook["supporting_episode_ids"]}
        assert playbook["success_count"] + playbook["failure_count"] <= len(threads), playbook
    thermostat = next(p for p in playbooks if "thermostat keeps dropping" in p["trigger"])
    assert thermostat["success_count"] == 2 and thermostat["failure_count"] == 0


def _turn(text: str, n: int = 1):
    from memory_app.consolidation.extractors.base import Episode

    return Episode(id=f"e{n}", text=text, occurred_at=datetime(2026, 3, n, tzinfo=UTC).isoformat())


def test_the_remarks_the_change_reader_sets_aside_are_counted_not_kept():
    # The reader decides (``changes.episode_probes``); consolidation keeps what it adds and counts
    # what it set aside.
    from memory_app.consolidation.services import changes_read

    remark = "The front door has a Yale smart lock."
    labelled, own = _turn(f"Dana: {remark}"), _turn(remark, 2)
    kept, _, dropped = changes_read(facts=[], new_episodes=[labelled, own], episodes={"e1": labelled, "e2": own},
                                    display_name="")
    assert [c.episode_ids for c in kept] == [("e2",)]
    assert [(d["reason"], d["supporting_episode_ids"]) for d in dropped] == [("remark", ["e1"])]


@pytest.mark.parametrize("step", ["I replaced the bulb in the hall.", "I reset the router by holding its button.",
                                  "The hall lights are flickering again."])
def test_a_turn_a_playbook_cites_adds_no_fact_of_its_own(step):
    # A device's trouble and the steps tried are the playbook's (docs/consolidation.md): the change
    # reader adds no fact from a turn the procedure layer cites, and counts it as set aside.
    from memory_app.consolidation.services import changes_read

    turn = _turn(step)
    kept, _, _ = changes_read(facts=[], new_episodes=[turn], episodes={"e1": turn}, display_name="")
    assert [c.episode_ids for c in kept] == [("e1",)]  # outside a procedure, the reader adds it
    kept, _, dropped = changes_read(facts=[], new_episodes=[turn], episodes={"e1": turn}, display_name="",
                                    procedure={"e1"})
    assert kept == []
    assert [d["reason"] for d in dropped] == ["procedure"]
