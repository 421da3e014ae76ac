"""Scoring consolidation against LoCoMo observations: the arithmetic on a hand-made conversation
(an embedder stand-in for the cosine; no cluster needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

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
