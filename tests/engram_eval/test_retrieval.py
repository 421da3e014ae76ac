"""The recall eval's own arithmetic and gate (the fixture run itself is in scripts/test)."""

import pytest

from engram_eval.retrieval import FixtureReport, Scores, format_table, gate_failures, question_scores


def test_recall_at_k_is_the_share_of_expected_ids_found_and_mrr_the_first_hit():
    ranked = ["x", "a", "y", "z", "w", "b"]
    scores = question_scores(ranked, ["a", "b"])
    assert scores == {"R@1": 0.0, "R@5": 0.5, "R@10": 1.0, "MRR": 0.5}
    assert question_scores(ranked, ["q"])["MRR"] == 0.0


def test_scores_aggregate_overall_and_per_group():
    scores = Scores()
    scores.add("semantic", {"R@5": 1.0})
    scores.add("semantic", {"R@5": 0.0})
    scores.add("episodic", {"R@5": 1.0})
    summary = scores.summary()
    assert list(summary) == ["overall", "episodic", "semantic"]
    assert summary["overall"] == {"n": 3, "R@5": pytest.approx(2 / 3, abs=1e-4)}
    assert summary["semantic"] == {"n": 2, "R@5": 0.5}


def test_the_table_prints_one_row_per_group_with_three_decimals():
    table = format_table({"overall": {"n": 3, "R@5": 0.6667}, "semantic": {"n": 2, "R@5": 0.5}}, metrics=("R@5",))
    assert table.splitlines() == [f"{'':<16}{'n':>5}{'R@5':>8}",
                                  f"{'overall':<16}{3:>5}{'0.667':>8}",
                                  f"{'semantic':<16}{2:>5}{'0.500':>8}"]


def test_the_gate_names_every_figure_below_its_floor_and_any_leak():
    def report(r10, r5, mrr, leaks=0):
        return FixtureReport(scores={"overall": {"n": 1, "R@1": 0.0, "R@5": r5, "R@10": r10, "MRR": mrr}},
                             questions=1, leak_probes=1, leaks=leaks, leak_examples=[])

    floors = {"min_r10": 0.9, "min_r5": 0.8, "min_mrr": 0.65}
    assert gate_failures(report(0.95, 0.85, 0.7), **floors) == []
    assert gate_failures(report(0.89, 0.85, 0.6, leaks=2), **floors) == ["R@10 0.890 < 0.9", "MRR 0.600 < 0.65",
                                                                         "2 leaks"]
