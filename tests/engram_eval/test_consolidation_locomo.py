"""Scoring consolidation against LoCoMo observations: the arithmetic on a hand-made conversation
(an embedder stand-in for the cosine; no cluster needed), and the whole eval with the llm extractor
against a local chat-completions server (Elasticsearch needed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from engram_eval.consolidation_locomo import Turn, WrittenFact, coverage, fact_supported, observations

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURNS = {"D1:1": Turn("D1:1", "Melanie", "I went swimming with the kids yesterday.", WHEN),
         "D1:2": Turn("D1:2", "Caroline", "I'm not into sports.", WHEN)}


def test_observations_read_evidence_written_as_strings_or_lists():
    data = {"session_1": [], "session_1_observation": {
        "Melanie": [["Melanie swam with her kids.", "D1:1"]],
        "Caroline": [["Caroline does not like sports.", ["D1:2", "D1:3"]], ["No evidence.", ""]]}}
    assert [(o.speaker, o.turns) for o in observations(data)] == [("Melanie", ("D1:1",)),
                                                                  ("Caroline", ("D1:2", "D1:3"))]


def test_a_fact_is_supported_by_its_turn_its_speaker_and_the_date_the_turn_names():
    assert fact_supported(WrittenFact("Melanie went swimming with the kids on 7 May 2023.", ("D1:1",)), TURNS)
    assert not fact_supported(WrittenFact("Caroline went swimming with the kids.", ("D1:1",)), TURNS)  # speaker
    assert not fact_supported(WrittenFact("Melanie went swimming with the kids on 9 May 2023.", ("D1:1",)), TURNS)
    assert not fact_supported(WrittenFact("Melanie went sailing.", ("D1:1",)), TURNS)  # a word the turn lacks
    assert not fact_supported(WrittenFact("Melanie never went swimming.", ("D1:1",)), TURNS)  # negation added
    assert fact_supported(WrittenFact("Caroline is not into sports.", ("D1:2",)), TURNS)
    assert not fact_supported(WrittenFact("Melanie went swimming.", ("D9:9",)), TURNS)  # cites no known turn


def test_coverage_needs_the_evidence_turn_and_the_same_meaning():
    vectors = {"obs a": [1, 0], "obs b": [0, 1], "fact a": [0.8, 0.6], "fact b elsewhere": [0, 1]}

    def embed(texts):
        return np.asarray([vectors[t] for t in texts], dtype=np.float32)

    from engram_eval.consolidation_locomo import Observation

    observed = [Observation("M", "obs a", ("D1:1",)), Observation("M", "obs b", ("D1:2",))]
    facts = [WrittenFact("fact a", ("D1:1",)), WrittenFact("fact b elsewhere", ("D1:5",))]
    result = coverage(observed, facts, embed=embed, thresholds=(0.6, 0.9))
    # "fact b" says the same as "obs b" but cites another turn: it does not count.
    assert result["coverage"] == {"0.6": 0.5, "0.9": 0.0}
    assert result["cites_evidence"] == 0.5


# Our own conversation in LoCoMo's format, with its observations (no LoCoMo text).
OWN_CONVERSATION = {
    "speaker_a": "Rosa", "speaker_b": "Tomas",
    "session_1_date_time": "9:00 am on 2 June, 2025",
    "session_1": [{"speaker": "Rosa", "dia_id": "D1:1", "text": "I adopted a grey cat called Pebble last week."},
                  {"speaker": "Tomas", "dia_id": "D1:2", "text": "Lovely! I started a new job as a baker in Leeds."},
                  {"speaker": "Rosa", "dia_id": "D1:3", "text": "Congrats! I'm so happy."},
                  {"speaker": "Tomas", "dia_id": "D1:4", "text": "Thanks, I bake bread every morning at five."}],
    "session_1_observation": {
        "Rosa": [["Rosa adopted a grey cat called Pebble.", "D1:1"]],
        "Tomas": [["Tomas started a new job as a baker in Leeds.", "D1:2"],
                  ["Tomas bakes bread every morning at five.", "D1:4"]]},
}
# What the stand-in model answers for each turn: a match, a match, a grounded fact no observation
# holds (a reaction), and a fact citing no turn (dropped by the service).
MODEL_FACTS = {"D1:1": ("Rosa adopted a grey cat called Pebble.", True),
               "D1:2": ("Tomas started a new job as a baker in Leeds.", True),
               "D1:3": ("Rosa is so happy.", True),
               "D1:4": ("Tomas bakes bread every morning at five.", False)}


@pytest.mark.django_db(transaction=True)
def test_the_llm_extractor_is_scored_the_same_way_against_a_chat_completions_server(
        es_admin, invalidate_minted_keys, tmp_path, settings):
    """``memory_eval --consolidation --locomo --extractor llm``: the same import, runs and scoring,
    the extractor calling a local server that speaks the chat-completions protocol."""
    from engram_eval.consolidation_locomo import evaluate_consolidation_locomo
    from tests.consolidation.llm_server import FakeLlm

    fake = FakeLlm()
    dia = {f"{t['speaker']}: {t['text']}": t["dia_id"] for t in OWN_CONVERSATION["session_1"]}

    def respond(body: dict) -> dict:
        sent = json.loads(body["messages"][1]["content"])
        facts = []
        for episode in sent["episodes"]:
            text, cites = MODEL_FACTS[dia[episode["text"]]]
            facts.append({"text": text, "supporting_episode_ids": [episode["id"]] if cites else []})
        return fake.completion(json.dumps({"facts": facts, "playbooks": []}))

    fake.respond = respond
    settings.ENGRAM_LLM_URL, settings.ENGRAM_LLM_MODEL, settings.ENGRAM_LLM_TIMEOUT = fake.url, "stand-in", 10
    path = tmp_path / "92.json"
    path.write_text(json.dumps(OWN_CONVERSATION))
    try:
        report = evaluate_consolidation_locomo(paths=[path], extractor="llm", log=lambda _: None)
    finally:
        fake.server.shutdown()
    figures = report["conversations"]["92.json"]
    assert report["extractor"] == "llm"
    assert figures["facts"] == 3 and figures["observations"] == 3
    assert figures["coverage"]["0.6"] == 0.667 and figures["precision"]["0.6"] == 0.667
    assert figures["grounded_share"] == 1.0 and figures["runs"]["candidates_dropped"] == 1
    assert figures["extractor_facts_proposed"] == 4  # the extractor alone: the unsupported one too
    # extractor alone, dry run, the run that wrote: every call a chat completion
    assert [r["path"] for r in fake.requests] == ["/v1/chat/completions"] * 3
