"""Cross-validated sweeps of one setting over LoCoMo conversations.

For each fold, the value best on the other conversations is judged on the held-out ones, so the
figure a sweep reports is never the figure its value was chosen on. Pure functions over
per-conversation summaries (``Scores.summary()``); ``engram_eval.locomo.sweep_locomo`` asks the
questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean
from typing import Any

Summary = dict[str, dict[str, float]]  # group ("overall", "category 1") -> {"n", "R@5", "R@10", ...}

@dataclass(frozen=True)
class Sweep:
    """A field of the ranking (memory_app/recall/ranking.py, e.g. "dated_weight") and the values to
    try, typed as the field is."""

    setting: str
    values: tuple[Any, ...]


def parse_sweep(spec: str, ranking: Any) -> Sweep:
    """``"NAME=v1,v2"``: NAME a field of ``ranking`` (a RankingConfig, whose ``changed`` reads each
    value), two or more distinct values. Raises ValueError saying what is wrong. (A Django setting
    that acts when memories are written is swept by running the command once per value with the
    setting in the environment: changing settings inside a running process is for tests only.)"""
    name, sep, raw = spec.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"--sweep takes NAME=v1,v2,…, not {spec!r}")
    values = tuple(getattr(ranking.changed({name: v}), name) for v in raw.split(",") if v.strip())
    if len(values) < 2:
        raise ValueError(f"--sweep {name}: give at least two values")
    if len(set(values)) != len(values):
        raise ValueError(f"--sweep {name}: a value is given twice")
    return Sweep(setting=name, values=values)


def folds_of(conversations: list[str], folds: int) -> list[list[str]]:
    """The conversations dealt into ``folds`` held-out groups in the order given (one each when
    there are as many folds as conversations). Raises ValueError unless 2 <= folds <= conversations."""
    if not 2 <= folds <= len(conversations):
        raise ValueError(f"--folds must be between 2 and the number of conversations ({len(conversations)}), "
                         f"not {folds}")
    return [conversations[i::folds] for i in range(folds)]


def mean_of(summaries: list[Summary]) -> Summary:
    """Each group's figures averaged over the conversations that have it (a conversation with no
    category 3 question does not count as 0 there); ``n`` is the questions summed."""
    groups: dict[str, list[dict[str, float]]] = {}
    for summary in summaries:
        for group, values in summary.items():
            groups.setdefault(group, []).append(values)
    out: Summary = {}
    for group in sorted(groups, key=lambda g: (g != "overall", g)):
        rows = groups[group]
        metrics = [m for m in rows[0] if m != "n"]
        out[group] = {"n": sum(int(r["n"]) for r in rows), **{m: round(mean(r[m] for r in rows), 4) for m in metrics}}
    return out


def cross_validate(*, values: tuple[Any, ...], figures: list[dict[str, Summary]], folds: list[list[str]],
                   metric: str = "R@10", tie_break: str = "R@5") -> dict[str, Any]:
    """``figures[i][conversation]``: the conversation's summary under ``values[i]``. For each fold,
    the value whose mean ``metric`` over the other conversations is highest (then ``tie_break``,
    then the earlier value) and its figures on the held-out ones. ``cross_validated``: the mean of
    the held-out conversations' figures, each conversation counted once."""
    if len(figures) != len(values):
        raise ValueError("one set of figures per value")
    report_folds = []
    held_out: list[Summary] = []
    for fold in folds:
        train = [c for c in figures[0] if c not in fold]
        ranked = []
        for i in range(len(values)):
            train_mean = mean_of([figures[i][c] for c in train])["overall"]
            ranked.append(((train_mean[metric], train_mean[tie_break], -i), i, train_mean))
        _, best, train_figures = max(ranked)
        left = [figures[best][c] for c in fold]
        held_out.extend(left)
        report_folds.append({"held_out": list(fold), "chosen": values[best], "train": train_figures,
                             "held_out_figures": mean_of(left)})
    return {"values": list(values), "metric": metric, "folds": report_folds,
            "in_sample": [mean_of(list(each.values())) for each in figures],
            "cross_validated": mean_of(held_out)}


def format_sweep(report: dict[str, Any], *, metrics: tuple[str, ...] = ("R@5", "R@10")) -> str:
    """The in-sample mean per value (for reading only: chosen on the figures shown), each fold's
    choice and held-out figures, and the cross-validated mean."""
    groups = [g for g in report["cross_validated"]]
    head = f"{'':<22}" + "".join(f"{_short(g):>12}" for g in groups)
    lines = [f"sweep {report['setting']}: mean of the conversations, in sample (R@5 / R@10)", head]
    for value, figures in zip(report["values"], report["in_sample"], strict=True):
        lines.append(f"{str(value):<22}" + "".join(
            f"{_pair(figures.get(g), metrics):>12}" for g in groups))
    lines.append(f"folds (chosen on the other conversations by mean {report['metric']}):")
    for fold in report["folds"]:
        lines.append(f"{'held out ' + ','.join(fold['held_out']):<22}" + "".join(
            f"{_pair(fold['held_out_figures'].get(g), metrics):>12}" for g in groups)
                     + f"   chosen {fold['chosen']} (train {report['metric']} {fold['train'][report['metric']]:.3f})")
    lines.append(f"{'cross-validated':<22}" + "".join(
        f"{_pair(report['cross_validated'].get(g), metrics):>12}" for g in groups))
    lines.append("cross-validated, n = questions:")
    for group, values in report["cross_validated"].items():
        lines.append(f"  {group:<14}{values['n']:>5}" + "".join(f"{values[m]:>8.3f}" for m in metrics))
    return "\n".join(lines)


def _short(group: str) -> str:
    return group.replace("category ", "cat ")


def _pair(values: dict[str, float] | None, metrics: tuple[str, ...]) -> str:
    return "-" if values is None else "/".join(f"{values[m]:.3f}".lstrip("0") for m in metrics)
