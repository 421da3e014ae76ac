"""The statement rules' cross-validation and the labelled samples it reports (no Elasticsearch)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from engram_eval.statement_cv import (
    LABELS,
    STATEMENTS,
    Scored,
    grid,
    labelled_sample,
    majority,
    own_sample,
    pick,
)
from memory_app.consolidation.extractors.speech import StatementRules

REPO = Path(__file__).resolve().parents[2]


def test_pick_takes_the_most_precise_setting_over_the_coverage_floor():
    loose, middle, tight = StatementRules(min_content=2), StatementRules(), StatementRules(min_anchors=2)
    table = {loose: {"a": Scored(10, 0.70, 0.60), "b": Scored(10, 0.60, 0.60)},
             middle: {"a": Scored(8, 0.60, 0.70), "b": Scored(8, 0.45, 0.66)},
             tight: {"a": Scored(5, 0.40, 0.80), "b": Scored(5, 0.30, 0.80)}}
    assert pick(table, ["a", "b"], min_coverage=0.5) == middle  # mean coverage 0.525
    assert pick(table, ["a", "b"], min_coverage=0.6) == loose
    assert pick(table, ["a", "b"], min_coverage=0.9) == loose  # none reaches it: the most coverage



def test_pick_can_take_the_hand_labelled_junk_off_the_precision():
    loose, tight = StatementRules(feelings=1), StatementRules(feelings=2)
    # The loose setting matches more observations but keeps more of what the hand labels call junk.
    table = {loose: {"a": Scored(10, 0.60, 0.72, labelled=20, junk=6), "b": Scored(10, 0.60, 0.72, labelled=20, junk=6)},
             tight: {"a": Scored(8, 0.55, 0.70, labelled=16, junk=2), "b": Scored(8, 0.55, 0.70, labelled=16, junk=2)}}
    assert pick(table, ["a", "b"], min_coverage=0.5) == loose
    assert pick(table, ["a", "b"], min_coverage=0.5, junk_weight=1.0) == tight  # 0.72 - 0.30 < 0.70 - 0.125


def test_the_grid_spans_every_combination():
    settings = grid({"min_content": (2, 3), "feelings": (0, 1, 2)})
    assert len(settings) == len(set(settings)) == 6
    assert {(s.min_content, s.feelings) for s in settings} == {(m, f) for m in (2, 3) for f in (0, 1, 2)}


def test_our_labelled_sentences_are_well_formed():
    rows = json.loads(STATEMENTS.read_text(encoding="utf-8"))["sentences"]
    assert len({r["id"] for r in rows}) == len(rows) == 100
    assert sum(r["fact"] for r in rows) == 50
    assert all(isinstance(r["fact"], bool) and r["text"].strip() and r["speaker"].strip() for r in rows)


def test_the_default_rules_keep_junk_under_a_tenth_of_our_labelled_sentences():
    report = own_sample(rules=StatementRules())
    assert report["junk_share"] < 0.10 and report["recall"] >= 0.85, report
    loose = own_sample(rules=StatementRules(min_content=2, feelings=0, modal=0))
    assert loose["junk_share"] > report["junk_share"]  # the rules are what keeps it down


def test_the_dev_labels_hold_ids_only():
    doc = json.loads(LABELS.read_text(encoding="utf-8"))
    for row in doc["labels"]:
        assert set(row) <= {"conversation", "turns", "fact_sha1", "label", "kind", "sample"}
        assert row["label"] in ("fact", "junk") and (row["label"] == "junk") == ("kind" in row)
        assert len(row["fact_sha1"]) == 12 and int(row["fact_sha1"], 16) >= 0


def _dev_directory() -> Path | None:
    for candidate in (os.environ.get("ENGRAM_LOCOMO_DEV"), REPO.parent / "shared" / "data" / "locomo-dev"):
        if candidate and (Path(candidate) / "26.json").exists():
            return Path(candidate)
    return None


@pytest.mark.skipif(_dev_directory() is None, reason="LoCoMo dev conversations not found (set ENGRAM_LOCOMO_DEV)")
def test_the_labelled_dev_facts_describe_the_current_output():
    paths = [_dev_directory() / f"{c}.json" for c in ("26", "30", "47", "49")]
    report = labelled_sample(paths, rules=StatementRules())
    # Sample "e" is every fact the defaults of sample "d" proposed that those before did not; the rest
    # of the output is what they proposed, so "d" still describes it, less the junk dropped. Of e's 10,
    # the one labelled junk is no longer proposed; 8 of its 9 facts are, word for word (the ninth now
    # reads without the word before an emoji, which ends a sentence since issue 68's thirteenth pass).
    assert report["e"]["all"]["still_proposed"] == 8 and report["e"]["all"]["junk"] == 0
    assert all(v["still_proposed"] >= 19 for c, v in report["d"].items() if c != "all")
    assert report["d"]["all"]["junk_share"] < 0.24  # its share when drawn
    # What the rules added since sample "a" was drawn dropped of it was mostly junk.
    first = StatementRules(feelings=2, vague=1, others=0, showing=False, alone=False)
    assert report["a"]["all"]["junk_share"] < labelled_sample(paths, rules=first)["a"]["all"]["junk_share"]
    # Sample "k" was drawn with `how_it_was` on, before the cross-validation turned it off (at the defaults
    # the 7 facts it rewords are proposed whole instead, all labelled facts); since then issue 68's
    # thirteenth pass stopped joining a feeling to the statement before it, rewording 3 more; the
    # fourteenth drops one junk fact of it (a liked thing named elsewhere: "... like this").
    drawn = labelled_sample(paths, rules=replace(StatementRules(), how_it_was=True))["k"]["all"]
    assert drawn["still_proposed"] >= 96 and drawn["junk"] == 24
    assert report["k"]["all"]["still_proposed"] >= 89 and report["k"]["all"]["junk"] == 24


def test_the_default_takes_per_rule_what_most_folds_picked():
    space = {"feelings": (1, 2), "others": (0, 1, 2)}
    table = {rules: {"a": Scored(5, 0.5, 0.6 + rules.others / 100), "b": Scored(5, 0.5, 0.6)}
             for rules in grid(space)}
    picks = [StatementRules(feelings=1, others=0), StatementRules(feelings=1, others=1),
             StatementRules(feelings=2, others=1), StatementRules(feelings=1, others=2)]
    chosen = majority(picks, table, space=space)
    assert (chosen.feelings, chosen.others) == (1, 1)
    # An even split goes to the tied value of higher precision over every conversation.
    chosen = majority(picks[:2], table, space=space)
    assert (chosen.feelings, chosen.others) == (1, 1)
