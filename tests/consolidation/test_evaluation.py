"""The consolidation eval's scoring arithmetic on a hand-made persona (no cluster needed)."""

from __future__ import annotations

from memory_app.consolidation.evaluation import _score_persona


def test_scoring_counts_matches_merges_contradictions_and_false_supersessions():
    persona = {
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
    _score_persona(persona, written, playbooks, totals)
    assert (totals["written"], totals["written_matched"], totals["gold"], totals["gold_matched"]) == (4, 3, 4, 3)
    assert (totals["merged_in"], totals["merged_in_correct"]) == (2, 1)  # t4 right, t9 wrong
    assert (totals["restated"], totals["restated_merged"]) == (1, 1)
    assert (totals["contradictions"], totals["detected"], totals["detected_kind"]) == (1, 1, 0)  # harsh ≠ natural
    assert (totals["links"], totals["false_links"]) == (2, 1)  # w4 → w3 has no gold supersession
    assert (totals["playbooks"], totals["playbooks_found"], totals["playbooks_exact"]) == (1, 1, 0)
