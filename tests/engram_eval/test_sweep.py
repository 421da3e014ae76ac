"""Cross-validated sweeps: parsing a sweep, dealing folds, and choosing on the other conversations only."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram_eval.sweep import cross_validate, folds_of, format_sweep, mean_of, parse_sweep
from memory_app.recall.ranking import RankingConfig

RANKING = RankingConfig()


def test_a_sweep_reads_its_values_as_the_ranking_field_s_type():
    assert parse_sweep("dated_weight=1, 0,1.5", RANKING).values == (1.0, 0.0, 1.5)
    assert parse_sweep("entity_legs=0,2", RANKING).values == (0, 2)
    assert parse_sweep("event_dates=true,off", RANKING).values == (True, False)
    assert parse_sweep("fusion=linear,rrf", RANKING).values == ("linear", "rrf")


@pytest.mark.parametrize(("spec", "message"), [
    ("dated_weight", "NAME=v1,v2"),
    ("=1,2", "NAME=v1,v2"),
    ("ENGRAM_DERIVED_CONTEXT_TURNS=0,2", "'ENGRAM_DERIVED_CONTEXT_TURNS' is not a ranking setting"),
    ("dated_weight=0.5", "at least two values"),
    ("dated_weight=0.5,,", "at least two values"),
    ("dated_weight=0.5,0.50", "given twice"),
    ("entity_legs=1,2.5", "entity_legs must be a number"),
    ("event_dates=true,maybe", "event_dates must be a bool"),
    ("fusion=linear,cosine", "fusion must be"),
])
def test_a_bad_sweep_says_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_sweep(spec, RANKING)


def test_folds_deal_the_conversations_in_order():
    assert folds_of(["26", "30", "47", "49"], 4) == [["26"], ["30"], ["47"], ["49"]]
    assert folds_of(["26", "30", "47", "49"], 2) == [["26", "47"], ["30", "49"]]
    for bad in (1, 5):
        with pytest.raises(ValueError, match="between 2 and the number of conversations"):
            folds_of(["26", "30", "47", "49"], bad)


@given(st.lists(st.text(min_size=1, max_size=3), min_size=2, max_size=9, unique=True), st.data())
def test_every_conversation_is_held_out_exactly_once(conversations, data):
    folds = folds_of(conversations, data.draw(st.integers(2, len(conversations))))
    assert sorted(c for fold in folds for c in fold) == sorted(conversations)
    assert all(folds)


def test_the_mean_counts_each_conversation_once_and_only_where_it_has_the_group():
    a = {"overall": {"n": 100, "R@10": 0.9}, "category 3": {"n": 10, "R@10": 0.5}}
    b = {"overall": {"n": 10, "R@10": 0.5}}
    assert mean_of([a, b]) == {"overall": {"n": 110, "R@10": 0.7}, "category 3": {"n": 10, "R@10": 0.5}}


def _summary(r10, r5=0.5):
    return {"overall": {"n": 10, "R@5": r5, "R@10": r10}}


def test_each_fold_chooses_on_the_other_conversations_and_reports_the_held_out_one():
    # Value "b" is best on conversation 1 alone: held out, conversation 1 is scored with the value
    # the other three chose ("a", 0.2), not with its own best (b's 1.0).
    figures = [{"1": _summary(0.2), "2": _summary(0.8), "3": _summary(0.8), "4": _summary(0.8)},
               {"1": _summary(1.0), "2": _summary(0.3), "3": _summary(0.3), "4": _summary(0.3)}]
    report = cross_validate(values=("a", "b"), figures=figures, folds=folds_of(["1", "2", "3", "4"], 4))
    assert [f["chosen"] for f in report["folds"]] == ["a", "a", "a", "a"]
    assert report["folds"][0]["held_out_figures"]["overall"]["R@10"] == 0.2
    assert report["folds"][0]["train"]["R@10"] == 0.8
    assert report["cross_validated"]["overall"] == {"n": 40, "R@5": 0.5, "R@10": 0.65}
    assert [s["overall"]["R@10"] for s in report["in_sample"]] == [0.65, 0.475]
    text = format_sweep({"setting": "ENGRAM_X", **report})
    assert "cross-validated" in text and "chosen a (train R@10 0.800)" in text


def test_a_fold_may_choose_differently_and_ties_go_to_the_better_r5_then_the_earlier_value():
    figures = [{"1": _summary(0.9), "2": _summary(0.1), "3": _summary(0.5)},
               {"1": _summary(0.1), "2": _summary(0.9), "3": _summary(0.5)}]
    report = cross_validate(values=(0, 1), figures=figures, folds=folds_of(["1", "2", "3"], 3))
    # Holding out 1, value 1 wins on 2 and 3 (0.7 against 0.3); holding out 2, value 0; holding
    # out 3, both have 0.5 and 0.5: the earlier value.
    assert [f["chosen"] for f in report["folds"]] == [1, 0, 0]
    assert report["cross_validated"]["overall"]["R@10"] == round((0.1 + 0.1 + 0.5) / 3, 4)
    tied = [{"1": _summary(0.5, r5=0.3), "2": _summary(0.5)}, {"1": _summary(0.5, r5=0.4), "2": _summary(0.5)}]
    assert cross_validate(values=(0, 1), figures=tied, folds=[["2"], ["1"]])["folds"][0]["chosen"] == 1


def test_one_set_of_figures_per_value():
    with pytest.raises(ValueError, match="one set of figures per value"):
        cross_validate(values=(1, 2), figures=[{"1": _summary(0.5)}], folds=[["1"]])


@pytest.mark.parametrize(("args", "message"), [
    (["--sweep", "session_coverage=0,0.5"], "--sweep needs --locomo FILES"),
    (["--locomo", "{a}", "{b}", "--sweep", "ENGRAM_NO_SUCH=0,1"], "'ENGRAM_NO_SUCH' is not a ranking setting"),
    (["--locomo", "{a}", "{b}", "--sweep", "session_coverage=0"], "at least two values"),
    (["--locomo", "{a}", "{b}", "--sweep", "session_coverage=0,0.5"], r"--folds must be between 2 and .*\(2\), not 4"),
    (["--locomo", "{a}", "{b}", "--sweep", "session_coverage=0,x", "--folds", "2"], "must be a number"),
])
def test_the_command_refuses_a_bad_sweep_before_it_imports_anything(tmp_path, args, message):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    files = {"a": tmp_path / "1.json", "b": tmp_path / "2.json"}  # never read: the sweep is refused first
    with pytest.raises(CommandError, match=message):
        call_command("memory_eval", *[a.format(**{k: str(v) for k, v in files.items()}) for a in args])
