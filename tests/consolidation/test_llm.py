"""The llm extractor against a local HTTP server speaking the OpenAI chat-completions protocol:
good answers, malformed JSON, schema violations, empty answers, 429s, 5xx and timeouts. A run
that cannot get a usable answer fails cleanly: nothing written, the watermark unmoved."""

from __future__ import annotations

import json

import pytest

from engram_core.es.schema import MemoryType
from memory_app import selectors
from memory_app.services.facts import fact_write, playbook_outcome_record, playbook_write
from memory_app.consolidation.extractors import ExtractorFailed
from memory_app.consolidation.extractors.llm import PROMPT_VERSION
from memory_app.consolidation.selectors import episodes_pending
from memory_app.consolidation.services import consolidation_run
from memory_app.models import ConsolidationRun
from tests.consolidation.llm_server import FakeLlm

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def llm(settings):
    fake = FakeLlm()
    settings.ENGRAM_LLM_URL = fake.url
    settings.ENGRAM_LLM_MODEL = "test-model"
    settings.ENGRAM_LLM_API_KEY = "sk-test"
    settings.ENGRAM_LLM_TIMEOUT = 0.5
    settings.ENGRAM_LLM_MAX_RETRIES = 2
    settings.ENGRAM_LLM_BACKOFF_SECONDS = 0.01
    yield fake
    fake.server.shutdown()


def _answer(ids, **extra):
    return json.dumps({"facts": [
        {"text": "User lives in Lisbon.", "slot": "home_city", "value": "Lisbon", "change": None,
         "supporting_episode_ids": [ids[0]], "confidence": 0.9},
        {"text": "User's daughter plays the cello.", "slot": None, "value": None, "change": None,
         "supporting_episode_ids": [ids[1]], "confidence": 0.8},
        {"text": "User owns a boat.", "supporting_episode_ids": ["not-an-episode-id"]},
    ], "playbooks": [], **extra})


def test_a_good_answer_is_validated_grounded_and_written(subject, say, current_facts, llm):
    ids = say(subject, "We live in Lisbon these days.", "My daughter plays the cello beautifully.")
    llm.script = [(200, llm.completion(_answer(ids), prompt_tokens=321, completion_tokens=45), 0)]
    run = consolidation_run(subject=subject, extractor="llm").run
    assert sorted(f["text"] for f in current_facts(subject).values()) == [
        "User lives in Lisbon.", "User's daughter plays the cello."]
    assert (run.status, run.extractor, run.extractor_version) == ("succeeded", "llm", PROMPT_VERSION)
    assert (run.prompt_tokens, run.completion_tokens) == (321, 45)
    request = llm.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "test-model"
    assert request["body"]["response_format"] == {"type": "json_object"}
    assert PROMPT_VERSION in request["body"]["messages"][0]["content"]
    sent = json.loads(request["body"]["messages"][1]["content"])
    assert [e["id"] for e in sent["episodes"]] == ids
    assert episodes_pending(subject=subject, limit=500) == []


def test_an_ungrounded_llm_fact_is_dropped(subject, say, current_facts, llm):
    ids = say(subject, "We live in Lisbon these days.")
    answer = json.dumps({"facts": [
        {"text": "User lives in Lisbon.", "supporting_episode_ids": [ids[0]]},
        {"text": "User is a famous surgeon in Lisbon.", "supporting_episode_ids": [ids[0]]}]})
    llm.script = [(200, llm.completion(answer), 0)]
    run = consolidation_run(subject=subject, extractor="llm").run
    assert [f["text"] for f in current_facts(subject).values()] == ["User lives in Lisbon."]
    assert run.candidates_dropped == 1


def test_a_fact_with_no_supporting_turn_is_dropped_and_counted_and_the_rest_written(subject, say, current_facts, llm):
    """Models leave supporting ids out, empty, made up, or name only a context turn (one already
    consolidated): each such fact is dropped as ungrounded and counted; the run still writes the rest."""
    earlier = say(subject, "We live in Lisbon these days.")
    consolidation_run(subject=subject, extractor="rules")  # consolidated: context for the next run
    ids = say(subject, "My daughter plays the cello beautifully.")
    answer = json.dumps({"facts": [
        {"text": "User's daughter plays the cello.", "supporting_episode_ids": ids},
        {"text": "User lives in Lisbon.", "supporting_episode_ids": earlier},  # context only
        {"text": "User likes music.", "supporting_episode_ids": []},
        {"text": "User has a daughter."},
        {"text": "User owns a cello.", "supporting_episode_ids": ["ep-made-up"]},
    ], "playbooks": [{"trigger": "cello string broke", "steps": "1. Replace it.", "supporting_episode_ids": []}]})
    llm.script = [(200, llm.completion(answer), 0)]
    run = consolidation_run(subject=subject, extractor="llm").run
    assert run.status == "succeeded" and len(llm.requests) == 1
    sent = json.loads(llm.requests[0]["body"]["messages"][1]["content"])
    assert [e["id"] for e in sent["context"]] == earlier and [e["id"] for e in sent["episodes"]] == ids
    texts = sorted(f["text"] for f in current_facts(subject).values())
    assert "User's daughter plays the cello." in texts and not {"User likes music.", "User has a daughter.",
                                                                "User owns a cello."} & set(texts)
    assert run.candidates == 6 and run.candidates_dropped == 5


def test_429_and_5xx_are_retried_with_backoff_and_tokens_summed(subject, say, current_facts, llm):
    ids = say(subject, "We live in Lisbon these days.", "My daughter plays the cello beautifully.")
    llm.script = [(429, {"error": {"message": "slow down"}}, 0), (503, {"error": "busy"}, 0),
                  (200, llm.completion(_answer(ids), prompt_tokens=10, completion_tokens=5), 0)]
    run = consolidation_run(subject=subject, extractor="llm").run
    assert run.status == "succeeded" and len(llm.requests) == 3
    assert len(current_facts(subject)) == 2


@pytest.mark.parametrize("script, code", [
    ([(200, "malformed", 0)] * 2, "llm_bad_answer"),
    ([(200, "schema", 0)] * 2, "llm_bad_answer"),
    ([(200, "empty", 0)] * 2, "llm_bad_answer"),
    ([(200, b"<html>not json</html>", 0)] * 2, "llm_bad_answer"),
    ([(429, {"error": "rate"}, 0)] * 3, "llm_unavailable"),
    ([(500, {"error": "down"}, 0)] * 3, "llm_unavailable"),
    ([(200, "good", 2.0)] * 3, "llm_unavailable"),  # every attempt times out
    ([(401, {"error": "bad key"}, 0)], "llm_refused"),
    ([(200, "refusal", 0)] * 2, "llm_bad_answer"),
    ([(200, "truncated", 0)] * 2, "llm_bad_answer"),
    ([(200, "cut", 0)] * 2, "llm_bad_answer"),
    ([(200, "sorry", 0)] * 2, "llm_bad_answer"),
    ([(200, "prose", 0)] * 2, "llm_bad_answer"),
], ids=["malformed-json", "schema-violation", "empty-answer", "not-json", "429s", "5xx", "timeouts", "401", "refusal",
        "truncated", "truncated-mid-json", "refusal-as-text", "json-in-prose"])
def test_a_run_without_a_usable_answer_fails_cleanly(subject, say, current_facts, llm, script, code, count_docs):
    ids = say(subject, "We live in Lisbon these days.", "My daughter plays the cello beautifully.")
    contents = {"malformed": '{"facts": [{"text": "User lives in', "schema": json.dumps({"facts": [{"text": ""}]}),
                "empty": "", "good": _answer(ids)}
    # A refusal as OpenAI's API shapes it (no content, a refusal); an answer cut at the token limit
    # whose prefix still parses as JSON.
    shaped = {"refusal": llm.completion(None, refusal="I can't help with that request."),
              "truncated": llm.completion(json.dumps({"facts": []}), finish_reason="length"),
              # cut at the token limit mid-string; a local model's refusal, said in the content;
              # the JSON wrapped in a sentence
              "cut": llm.completion('{"facts": [{"text": "User lives in Lis', finish_reason="length"),
              "sorry": llm.completion("I'm sorry, but I can't help with that."),
              "prose": llm.completion("Here are the facts: " + _answer(ids))}
    llm.script = [(status, shaped.get(body) or llm.completion(contents[body]) if isinstance(body, str) else body,
                   delay) for status, body, delay in script]
    docs = count_docs()
    with pytest.raises(ExtractorFailed) as caught:
        consolidation_run(subject=subject, extractor="llm")
    assert caught.value.code == code
    assert count_docs() == docs and current_facts(subject) == {}
    assert len(episodes_pending(subject=subject, limit=500)) == 2  # the watermark did not move
    run = ConsolidationRun.objects.get(subject=subject)
    assert run.status == "failed" and run.error["code"] == code
    assert len(llm.requests) == len(script)  # bounded: exactly the attempts scripted, no more


def test_one_call_sees_stored_facts_and_playbooks_and_decides_supersessions_and_outcomes(subject, say, current_facts,
                                                                                         llm, es_admin):
    # Stored first, as an agent would: a fact and a playbook with its counters.
    old = fact_write(subject=subject, text="User lives in Porto.")["id"]
    playbook = playbook_write(subject=subject, trigger="The hub is offline", steps="1. Unplug the hub")["id"]
    playbook_outcome_record(subject=subject, playbook_id=playbook, success=False)
    ids = say(subject, "We moved to Lisbon last month.", "The hub went offline again, I held the reset button "
                                                         "for ten seconds and that worked.")
    answer = json.dumps({"facts": [
        {"text": "User lives in Lisbon.", "slot": "home_city", "value": "Lisbon", "change": "natural",
         "supersedes": [old, "not-a-fact-id"], "supporting_episode_ids": [ids[0]]}],
        "playbooks": [
            {"playbook_id": playbook, "trigger": "The hub is offline", "steps": "1. Unplug the hub",
             "outcome": "success", "outcome_episode_id": ids[1],
             "refined_steps": "1. Held the reset button for ten seconds", "supporting_episode_ids": [ids[1]]}]})
    llm.script = [(200, llm.completion(answer), 0)]
    run = consolidation_run(subject=subject, extractor="llm").run
    assert run.status == "succeeded" and run.facts_superseded == 1 and run.outcomes_recorded == 1

    sent = json.loads(llm.requests[0]["body"]["messages"][1]["content"])
    assert sent["facts"] == [{"id": old, "text": "User lives in Porto.", "slot": None}]
    assert sent["playbooks"] == [{"id": playbook, "trigger": "The hub is offline", "steps": "1. Unplug the hub",
                                  "success_count": 0, "failure_count": 1}]
    facts = current_facts(subject)
    assert facts[old]["superseded_by"] and facts[old]["superseded_by"][0] in facts
    new = facts[facts[old]["superseded_by"][0]]
    assert new["text"] == "User lives in Lisbon." and new["supersedes"] == [old]
    stored = selectors.visible_document(subject=subject, memory_id=playbook,
                                        types=[MemoryType.PROCEDURAL]).source
    assert (stored["success_count"], stored["failure_count"]) == (1, 1)
    assert stored["refined_steps"] == "1. Held the reset button for ten seconds"


def test_an_unknown_playbook_id_is_not_trusted(subject, say, llm, es_admin):
    ids = say(subject, "My hub is offline.", "I unplugged it and that worked.")
    answer = json.dumps({"playbooks": [
        {"playbook_id": "someone-elses-playbook", "trigger": "The hub is offline", "steps": "1. Unplugged it",
         "outcome": "success", "outcome_episode_id": ids[1], "refined_steps": "ignored",
         "supporting_episode_ids": [ids[0], ids[1]]}]})
    llm.script = [(200, llm.completion(answer), 0)]
    run = consolidation_run(subject=subject, extractor="llm").run
    assert run.playbooks_created == 1  # proposed as a new playbook of this end-user instead
