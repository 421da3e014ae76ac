"""The statement layer's defaults chosen by cross-validation over LoCoMo dev conversations.

Each conversation is read by the rules extractor alone (in process, no Elasticsearch: one batch,
no resolution against stored facts), its facts kept when grounded as consolidation grounds them,
and scored against the conversation's observations as ``memory_eval --consolidation --locomo``
scores written facts (coverage and precision at MiniLM cosine 0.6, a fact citing an evidence turn).
For each held-out conversation the settings of ``StatementRules`` are picked on the other ones:
the highest mean precision among the settings whose mean coverage over them is at least
``--min-coverage`` (0.50, the issue's floor), less ``--junk-weight`` (1 by default) times the share
of junk among their facts met in the hand labels (``corpora/locomo_fact_labels.json``, ids only):
the observations count many feelings and reactions as matches. The default takes, per rule, the value most folds
pick (``majority``).

    python -m engram_eval statement_cv ../shared/data/locomo-dev/{26,30,47,49}.json

The conversations are read where they lie; nothing of them is written anywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from memory_app.consolidation.extractors import Episode, FactCandidate
from memory_app.consolidation.extractors.rules import RulesExtractor
from memory_app.consolidation.extractors.speech import StatementRules
from memory_app.consolidation.grounding import episode_evidence, is_grounded

from .consolidation_locomo import WrittenFact, _dia, coverage, observations
from .locomo import locomo_episodes

# ``subject`` and ``strict_nouns`` are left out: alone, each costs 0.06-0.20 of coverage on every
# conversation (see docs/consolidation.md), so no fold can pick them under the coverage floor.
# ``min_content``, ``min_anchors``, ``modal``, ``after_pattern``, ``feelings`` and ``others`` are held at
# what every fold of the earlier, wider grids over them picked (3, 1, 2, off, 1, 0), so that the grid
# scores in minutes. ``others`` 2 is left out besides: it drops by construction what
# docs/consolidation.md calls a fact (a household's move, a pet adopted: "we moved into a flat near the harbour").
# ``trailing`` is held on, as every fold of the eleventh pass's grid picked it.
FIXED = {"min_content": 3, "min_anchors": 1, "modal": 2, "after_pattern": False, "feelings": 1, "others": 0,
         "trailing": True}
GRID = {"vague": (1, 2), "showing": (False, True), "alone": (False, True), "reactions": (False, True),
        "resolve": (False, True), "how_it_was": (False, True)}


# Every sentence the statement layer can read is kept (but the few-word floor of 2).
LOOSEST = StatementRules(min_content=2, min_anchors=1, subject=False, feelings=0, modal=0, strict_nouns=False,
                         after_pattern=True, vague=False, others=0, showing=False, alone=True)


@dataclass(frozen=True)
class Scored:
    facts: int
    coverage: float
    precision: float
    labelled: int = 0  # facts met again among the hand labels (corpora/locomo_fact_labels.json)
    junk: int = 0  # of those, labelled junk


def grid(space: Mapping[str, Iterable[Any]] = GRID, fixed: Mapping[str, Any] = FIXED) -> list[StatementRules]:
    keys = list(space)
    return [StatementRules(**{**fixed, **dict(zip(keys, values, strict=True))})
            for values in itertools.product(*space.values())]


def offline_facts(conversation: str, data: dict, *, rules: StatementRules) -> list[WrittenFact]:
    """The grounded facts the rules extractor proposes for the whole conversation, each citing its turns."""
    return [fact for fact, _ in offline_candidates(conversation, data, rules=rules)]


def offline_candidates(conversation: str, data: dict, *, rules: StatementRules
                       ) -> list[tuple[WrittenFact, FactCandidate]]:
    """``offline_facts``, each with the extractor's candidate (its slot, if any)."""
    raw = locomo_episodes(conversation, data)
    episodes = [Episode(id=e["id"], text=e["text"], occurred_at=e["occurred_at"].isoformat(),
                        session_id=e["session_id"]) for e in raw]
    dia = {e["id"]: _dia(e["metadata"]["dia_id"]) for e in raw}
    by_id = {e.id: e for e in episodes}
    out = []
    for candidate in RulesExtractor(statements=rules).extract(episodes=episodes, context=[]).facts:
        texts = [episode_evidence(by_id[i].text, by_id[i].occurred_at) for i in candidate.episode_ids if i in by_id]
        if texts and is_grounded(candidate.text, texts):
            out.append((WrittenFact(text=candidate.text, turns=tuple(dia[i] for i in candidate.episode_ids)),
                        candidate))
    return out


class CachedEmbed:
    """Embeddings of texts seen before are reused across settings (most facts recur)."""

    def __init__(self, embed: Callable[[list[str]], Any]):
        self.embed = embed
        self.cache: dict[Any, Any] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            self.cache.update(zip(new, np.asarray(self.embed(new), dtype=np.float32), strict=True))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)


LABELS = Path(__file__).parent / "corpora" / "locomo_fact_labels.json"


def _fact_key(fact: WrittenFact) -> tuple[tuple[str, ...], str]:
    return tuple(fact.turns), hashlib.sha1(fact.text.encode()).hexdigest()[:12]


def hand_labels(path: Path | None = None) -> dict[tuple[str, tuple[str, ...], str], str]:
    """(conversation, turns, text SHA-1) → "fact" or "junk", over every sample of the hand labels."""
    rows = json.loads((path or LABELS).read_text(encoding="utf-8"))["labels"]
    return {(row["conversation"], tuple(row["turns"]), row["fact_sha1"]): row["label"] for row in rows}


def score(conversation: str, data: dict, *, rules: StatementRules, embed: Callable[[list[str]], Any],
          threshold: float = 0.6, labels: Mapping[tuple[str, tuple[str, ...], str], str] | None = None) -> Scored:
    facts = offline_facts(conversation, data, rules=rules)
    matched = coverage(observations(data), facts, embed=embed, thresholds=(threshold,))
    key = f"{threshold:.1f}"
    met = [label for f in facts if (label := (labels or {}).get((conversation, *_fact_key(f))))]
    return Scored(facts=len(facts), coverage=matched["coverage"][key], precision=matched["precision"][key],
                  labelled=len(met), junk=sum(label == "junk" for label in met))


def pick(table: dict[StatementRules, dict[str, Scored]], conversations: list[str], *, min_coverage: float,
         junk_weight: float = 0.0) -> StatementRules:
    """The setting of highest mean precision over ``conversations`` whose mean coverage over them
    reaches ``min_coverage``; when none does, the one of highest mean coverage. With ``junk_weight``,
    the hand-labelled junk share of ``conversations`` (pooled) times it is taken off the precision:
    the metric's precision counts a feeling an observer wrote down as a fact, the hand labels do not."""
    def mean(rules, field):
        return sum(getattr(table[rules][c], field) for c in conversations) / len(conversations)

    def junk(rules):
        labelled = sum(table[rules][c].labelled for c in conversations)
        return sum(table[rules][c].junk for c in conversations) / labelled if labelled else 0.0

    eligible = [r for r in table if mean(r, "coverage") >= min_coverage]
    if eligible:
        return max(eligible, key=lambda r: (mean(r, "precision") - junk_weight * junk(r), mean(r, "coverage")))
    return max(table, key=lambda r: mean(r, "coverage"))


def majority(chosen: list[StatementRules], table: dict[StatementRules, dict[str, Scored]], *,
             space: Mapping[str, Iterable[Any]] = GRID) -> StatementRules:
    """Per rule of ``space``, the value most folds picked; where the folds split evenly, the tied
    values are tried together and the setting of highest precision summed over every conversation
    of ``table`` wins."""
    options = {}
    for key in space:
        votes = Counter(getattr(rules, key) for rules in chosen)
        options[key] = [value for value, n in votes.items() if n == max(votes.values())]
    candidates = [replace(chosen[0], **dict(zip(options, values, strict=True)))
                  for values in itertools.product(*options.values())]
    return max(candidates, key=lambda r: sum(s.precision for s in table[r].values()))


STATEMENTS = Path(__file__).parent / "corpora" / "statements.json"


def own_sample(*, rules: StatementRules, path: Path = STATEMENTS) -> dict[str, Any]:
    """The rules extractor over our own labelled chat sentences (``corpora/statements.json``), each
    read alone as one turn "Speaker: text": of the sentences it writes a grounded fact from, the
    share labelled a fact (precision; its complement is the junk share), and of the sentences
    labelled a fact, the share it writes one from (recall). Junk kept and facts missed by id."""
    rows = json.loads(path.read_text(encoding="utf-8"))["sentences"]
    extractor = RulesExtractor(statements=rules)
    kept = {}
    for row in rows:
        episode = Episode(id=row["id"], text=f"{row['speaker']}: {row['text']}",
                          occurred_at="2026-05-04T10:00:00+00:00", session_id="s1")
        facts = extractor.extract(episodes=[episode], context=[]).facts
        evidence = [episode_evidence(episode.text, episode.occurred_at)]
        kept[row["id"]] = any(is_grounded(f.text, evidence) for f in facts)
    labelled = {row["id"]: row["fact"] for row in rows}
    written = [i for i in kept if kept[i]]
    facts = [i for i in labelled if labelled[i]]
    precision = sum(labelled[i] for i in written) / len(written) if written else 0.0
    return {"sentences": len(rows), "facts_labelled": len(facts), "written": len(written),
            "precision": round(precision, 3), "junk_share": round(1 - precision, 3) if written else 0.0,
            "recall": round(sum(kept[i] for i in facts) / len(facts), 3) if facts else 0.0,
            "junk_kept": [i for i in written if not labelled[i]], "facts_missed": [i for i in facts if not kept[i]]}


def labelled_sample(paths: list[Path], *, rules: StatementRules, path: Path = LABELS) -> dict[str, Any]:
    """The hand labels of ``corpora/locomo_fact_labels.json`` (ids only) met again: per sample and
    conversation, how many labelled facts the extractor still proposes (same turns, same text by
    SHA-1) and how many of those are junk; over all, the junk share of those met."""
    labels = json.loads(path.read_text(encoding="utf-8"))["labels"]
    out: dict[str, Any] = {}
    for conversation_path in paths:
        conversation = conversation_path.stem
        mine = [row for row in labels if row["conversation"] == conversation]
        if not mine:
            continue
        data = json.loads(conversation_path.read_text(encoding="utf-8"))
        proposed = {(tuple(f.turns), hashlib.sha1(f.text.encode()).hexdigest()[:12])
                    for f in offline_facts(conversation, data, rules=rules)}
        for sample in sorted({row.get("sample", "a") for row in mine}):
            rows = [row for row in mine if row.get("sample", "a") == sample]
            met = [row for row in rows if (tuple(row["turns"]), row["fact_sha1"]) in proposed]
            out.setdefault(sample, {})[conversation] = {"labelled": len(rows), "still_proposed": len(met),
                                                        "junk": sum(row["label"] == "junk" for row in met)}
    for per in out.values():
        met, junk = sum(v["still_proposed"] for v in per.values()), sum(v["junk"] for v in per.values())
        per["all"] = {"still_proposed": met, "junk": junk, "junk_share": round(junk / met, 3) if met else None}
    return out


def cross_validate(paths: list[Path], *, embed: Callable[[list[str]], Any], min_coverage: float = 0.5,
                   space: Mapping[str, Iterable[Any]] = GRID, junk_weight: float = 0.0,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    data = {p.stem: json.loads(p.read_text()) for p in paths}
    cached = CachedEmbed(embed)
    labels = hand_labels()
    table: dict[StatementRules, dict[str, Scored]] = {}
    settings = grid(space)
    for n, rules in enumerate(settings, 1):
        table[rules] = {c: score(c, d, rules=rules, embed=cached, labels=labels) for c, d in data.items()}
        if n % 12 == 0:
            log(f"  {n}/{len(settings)} settings scored")
    folds = {}
    for held in data:
        chosen = pick(table, [c for c in data if c != held], min_coverage=min_coverage, junk_weight=junk_weight)
        folds[held] = {"chosen": asdict(chosen), "held_out": asdict(table[chosen][held])}
    default = majority([StatementRules(**f["chosen"]) for f in folds.values()], table, space=space)
    return {"folds": folds, "default": asdict(default),
            "table": [{**asdict(r), **{c: [s.facts, s.coverage, s.precision, s.labelled, s.junk] for c, s in scores.items()}}
                      for r, scores in table.items()],
            "default_scores": {c: asdict(s) for c, s in table[default].items()},
            "loosest": {c: asdict(score(c, d, rules=LOOSEST, embed=cached, labels=labels)) for c, d in data.items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--min-coverage", type=float, default=0.5)
    parser.add_argument("--junk-weight", type=float, default=0.0,
                        help="weight of the hand-labelled junk share against precision when picking (0: precision only)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--table", type=Path, help="write every setting's scores here (JSON)")
    args = parser.parse_args(argv)
    from embeddings.minilm import MiniLMEmbedder

    report = cross_validate(args.paths, embed=MiniLMEmbedder().embed_documents, min_coverage=args.min_coverage,
                            junk_weight=args.junk_weight, log=lambda line: print(line, file=sys.stderr))
    if args.table:
        args.table.write_text(json.dumps(report, indent=1), encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for held, fold in report["folds"].items():
        s = fold["held_out"]
        print(f"held out {held}: chosen {fold['chosen']} -> facts {s['facts']}, coverage {s['coverage']:.3f}, "
              f"precision {s['precision']:.3f}, hand-labelled junk {s['junk']}/{s['labelled']}")
    print(f"default: {report['default']}")
    for name in ("loosest", "default_scores"):
        print(name, {c: (s["coverage"], s["precision"]) for c, s in report[name].items()})
    default = StatementRules(**report["default"])
    print("own labelled sentences:", own_sample(rules=default))
    print("hand-labelled dev sample:", labelled_sample(args.paths, rules=default))


if __name__ == "__main__":
    main()
