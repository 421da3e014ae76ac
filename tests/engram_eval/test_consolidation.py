"""The consolidation eval: its scoring arithmetic on a hand-made persona (no cluster needed), and one
persona through the real node."""

from __future__ import annotations

import json

import pytest

from engram_eval.consolidation import (
    FINDINGS,
    _score_persona,
    evaluate_consolidation,
    format_findings,
    gold_facts,
    new_totals,
)


def test_scoring_counts_matches_merges_contradictions_and_false_supersessions():
    persona = {
        "external_id": "p",
        "facts": [
            {"key": "home-1", "text": "I live in Paris.", "value": "Paris", "turns": ["t1"]},
            {"key": "home-2", "text": "I moved to Rome.", "value": "Rome", "turns": ["t2"], "supersedes": "home-1",
             "contradiction": "natural"},
            {"key": "colour", "text": "My colour is blue.", "value": "blue", "turns": ["t3", "t4"]},
            {"key": "job", "text": "I work as a nurse.", "value": "a nurse", "turns": ["t5"]},
        ],
        "playbooks": [{"trigger": "The hub is offline", "success": 1, "failure": 0}],
    }
    written = [
        {"id": "w1", "text": "User lives in Paris.", "supporting_episode_ids": ["t1"]},
        {"id": "w2", "text": "User lives in Rome.", "supporting_episode_ids": ["t2"], "supersedes": ["w1"],
         "contradiction": "harsh"},
        {"id": "w3", "text": "User's colour is blue.", "supporting_episode_ids": ["t3", "t4", "t9"]},
        {"id": "w4", "text": "User's dog is Rex.", "supporting_episode_ids": ["t6"], "supersedes": ["w3"]},
    ]
    playbooks = [{"trigger": "The hub is offline", "success_count": 1, "failure_count": 1}]
    totals = dict.fromkeys(["written", "written_matched", "gold", "gold_matched", "merged_in", "merged_in_correct",
                            "restated", "restated_merged", "contradictions", "detected", "detected_kind", "links",
                            "false_links", "playbooks", "playbooks_exact", "playbooks_found"], 0)
    findings = {k: [] for k in FINDINGS}
    _score_persona(persona, written, playbooks, totals, findings=findings)
    assert (totals["written"], totals["written_matched"], totals["gold"], totals["gold_matched"]) == (4, 3, 4, 3)
    assert (totals["merged_in"], totals["merged_in_correct"]) == (2, 1)  # t4 right, t9 wrong
    assert (totals["restated"], totals["restated_merged"]) == (1, 1)
    assert (totals["contradictions"], totals["detected"], totals["detected_kind"]) == (1, 1, 0)  # harsh ≠ natural
    assert (totals["links"], totals["false_links"]) == (2, 1)  # w4 → w3 has no gold supersession
    assert (totals["playbooks"], totals["playbooks_found"], totals["playbooks_exact"]) == (1, 1, 0)
    # Each shortfall is listed with the turns it cites, so a figure can be checked fact by fact.
    assert findings["false_positives"] == [{"persona": "p", "text": "User's dog is Rex.", "turns": ["t6"]}]
    assert [f["text"] for f in findings["missed"]] == ["I work as a nurse."]
    assert [f["note"] for f in findings["wrong_merges"]] == ["merged in: t9"]
    assert [f["note"] for f in findings["false_supersessions"]] == ["supersedes \"User's colour is blue.\""]
    assert findings["missed_contradictions"] == []
    assert "  false positive: p: \"User's dog is Rex.\" (t6)" in format_findings(findings)


def test_a_fact_matching_no_gold_is_not_judged_as_a_merge_and_the_original_gold_is_kept():
    persona = {
        "external_id": "p",
        "facts": [
            {"key": "daughter", "text": "My daughter's name is Lea.", "value": "Lea", "turns": ["t1"]},
            {"key": "home", "text": "I live in Porto.", "value": "Porto", "turns": ["t3"],
             "original": {"turns": ["t9"]}, "changed": "why"},
            {"key": "job", "text": "I work as a nurse.", "value": "a nurse", "turns": ["t4"], "added": "why"},
        ],
        "playbooks": [],
    }
    written = [
        {"id": "w1", "text": "User's daughter's name is Lea.", "supporting_episode_ids": ["t1"]},
        # True, outside the gold, and read from two turns at once (the naming turn and the age).
        {"id": "w2", "text": "User's daughter Lea is 7 years old.", "supporting_episode_ids": ["t1", "t2"]},
        {"id": "w3", "text": "User lives in Porto.", "supporting_episode_ids": ["t3"]},
        {"id": "w4", "text": "User works as a nurse.", "supporting_episode_ids": ["t4"]},
    ]
    corrected, first = new_totals(), new_totals()
    found, first_found = {k: [] for k in FINDINGS}, {k: [] for k in FINDINGS}
    _score_persona(persona, written, [], corrected, findings=found)
    _score_persona(persona, written, [], first, findings=first_found, original=True)
    assert (corrected["written_matched"], corrected["gold"], corrected["merged_in"]) == (3, 3, 0)
    assert found["wrong_merges"] == [] and [f["text"] for f in found["false_positives"]] == [
        "User's daughter Lea is 7 years old."]
    # As first written: no nurse, the home on another turn, and every second citation a merge.
    assert [g["key"] for g in gold_facts(persona, original=True)] == ["daughter", "home"]
    assert gold_facts(persona, original=True)[1]["turns"] == ["t9"]
    assert (first["written_matched"], first["gold"], first["merged_in"], first["merged_in_correct"]) == (1, 2, 1, 0)
    assert [f["note"] for f in first_found["wrong_merges"]] == ["merged in: t2"]


@pytest.mark.django_db(transaction=True)
def test_the_eval_scores_supporting_turns_by_corpus_id_although_stored_ids_are_namespaced(tmp_path, es_admin,
                                                                                          invalidate_minted_keys):
    # Imported episodes are stored under ids namespaced to the end-user; the eval must map a
    # fact's supporting episodes back to the corpus's turn ids (it matched no fact before).
    persona = {"external_id": "ana",
               "turns": [{"id": "ana-s1-01", "session_id": "s1", "occurred_at": "2025-01-06T09:00:01Z",
                          "text": "My name is Ana Ribeiro."},
                         {"id": "ana-s1-02", "session_id": "s1", "occurred_at": "2025-01-06T09:00:02Z",
                          "text": "I live in Porto, in an old flat near the river."}],
               "facts": [{"key": "name", "text": "My name is Ana Ribeiro.", "value": "Ana Ribeiro",
                          "turns": ["ana-s1-01"]},
                         {"key": "home", "text": "I live in Porto.", "value": "Porto", "turns": ["ana-s1-02"]}],
               "playbooks": []}
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"personas": [persona]}))
    figures = evaluate_consolidation(path=path, log=lambda _m: None)
    assert figures["counts"]["gold"] == 2 and figures["counts"]["gold_matched"] == 2
    assert figures["extraction_recall"] == 1.0
    assert figures["original_gold"]["extraction_recall"] == 1.0  # no correction in this corpus
