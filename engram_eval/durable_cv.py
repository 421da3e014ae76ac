"""A learned "is this a durable fact" scorer, tried against the statement rules by leaving one
LoCoMo dev conversation out.

Each conversation's facts are the rules extractor's (``statement_cv.offline_facts`` under
``--rules``: the defaults, or ``loose``: feelings and vague off, so the scorer decides those).
A fact's features are its MiniLM sentence embedding (the project's model) and whether it is a
general statement (no slot). Logistic regression (numpy, L2 penalty ``--l2``) is trained on three
conversations with the label ``--label``: ``observation`` (the fact matches an observation of a turn
it cites, precision's rule at cosine 0.6) or ``hand`` (the facts of
``corpora/locomo_fact_labels.json``, fact or junk). Its threshold is picked on those three by
leaving each out in turn (the highest mean precision whose mean coverage reaches ``--min-coverage``),
then applied to the held-out conversation, whose general statements below it are dropped (pattern
facts pass). Reported per held-out conversation: the AUC of the scores against their label,
precision and coverage before and after, and the hand-labelled junk among the labelled facts kept;
first, the share of the hand-labelled facts and of the junk that match an observation.

    python -m engram_eval durable_cv ../shared/data/locomo-dev/{26,30,47,49}.json

The conversations are read where they lie; nothing of them is written anywhere, and no weights
are kept: the scorer did not beat the rules held out (docs/consolidation.md, "Limits").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memory_app.consolidation.extractors.speech import StatementRules

from .consolidation_locomo import observations
from .statement_cv import LABELS, CachedEmbed, offline_candidates

RULES = {"default": StatementRules(), "loose": StatementRules(feelings=0, vague=0)}
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.0, 0.9, 0.02))


@dataclass
class Pool:
    """One conversation's facts: features, whether each may be dropped, its match with the
    observations and its hand label (1 fact, 0 junk, None unlabelled)."""

    features: np.ndarray
    gated: np.ndarray  # general statements; pattern facts always pass
    matched: np.ndarray  # the fact matches an observation of a turn it cites
    covers: list[list[int]]  # per observation, the facts matching it
    hand: list[int | None]

    def measure(self, keep: np.ndarray) -> tuple[float, float, int]:
        """(precision, coverage, facts kept)."""
        kept = int(keep.sum())
        precision = float(self.matched[keep].mean()) if kept else 0.0
        covered = sum(any(keep[i] for i in facts) for facts in self.covers)
        return precision, covered / len(self.covers) if self.covers else 0.0, kept

    def keep(self, scores: np.ndarray, threshold: float) -> np.ndarray:
        return (scores >= threshold) | ~self.gated


def fit(x: np.ndarray, y: np.ndarray, *, l2: float, steps: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method; the last column (the bias) is not penalised."""
    w = np.zeros(x.shape[1])
    penalty = l2 * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        step = np.linalg.solve((x * (p * (1 - p))[:, None]).T @ x + penalty, x.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x @ w))


def pick_threshold(pools: Sequence[Pool], scores: Sequence[np.ndarray], *, min_coverage: float) -> float:
    """The threshold of highest mean precision over ``pools`` whose mean coverage reaches
    ``min_coverage`` (0, keep everything, when none does)."""
    best: tuple[float, float] | None = None
    for t in THRESHOLDS:
        figures = [pool.measure(pool.keep(s, t)) for pool, s in zip(pools, scores, strict=True)]
        precision = float(np.mean([f[0] for f in figures]))
        if np.mean([f[1] for f in figures]) >= min_coverage and (best is None or precision > best[0]):
            best = (precision, t)
    return best[1] if best else 0.0


def _training(pools: Sequence[Pool], label: str) -> tuple[np.ndarray, np.ndarray]:
    if label == "observation":
        return (np.vstack([p.features for p in pools]),
                np.concatenate([p.matched.astype(float) for p in pools]))
    rows = [(p.features[i], h) for p in pools for i, h in enumerate(p.hand) if h is not None]
    return np.stack([r[0] for r in rows]), np.array([r[1] for r in rows], dtype=float)


def held_out(pools: dict[str, Pool], *, label: str, l2: float, min_coverage: float) -> dict[str, dict[str, Any]]:
    """Per held-out conversation: the threshold picked on the others, the figures before and after."""
    out = {}
    for held in pools:
        train = [c for c in pools if c != held]
        inner = {}
        for c in train:
            inner[c] = predict(fit(*_training([pools[o] for o in train if o != c], label), l2=l2), pools[c].features)
        threshold = pick_threshold([pools[c] for c in train], [inner[c] for c in train], min_coverage=min_coverage)
        pool = pools[held]
        scores = predict(fit(*_training([pools[c] for c in train], label), l2=l2), pool.features)
        keep = pool.keep(scores, threshold)
        everything = np.ones(len(pool.gated), dtype=bool)
        out[held] = {"threshold": threshold, "auc": _auc(pool, scores, label),
                     "before": pool.measure(everything), "after": pool.measure(keep),
                     "junk_before": _junk(pool, everything), "junk_after": _junk(pool, keep)}
    return out


def auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve: the chance a positive outscores a negative (ties count half)."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return None
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def _auc(pool: Pool, scores: np.ndarray, label: str) -> float | None:
    """The held-out scores against the label they were trained on."""
    if label == "observation":
        return auc(scores, pool.matched)
    labelled = np.array([h is not None for h in pool.hand])
    return auc(scores[labelled], np.array([h == 1 for h in pool.hand if h is not None], dtype=bool))


def _junk(pool: Pool, keep: np.ndarray) -> tuple[int, int]:
    """(junk, labelled) among the kept facts that carry a hand label."""
    labelled = [h for h, k in zip(pool.hand, keep, strict=True) if k and h is not None]
    return sum(h == 0 for h in labelled), len(labelled)


def build_pool(conversation: str, data: dict, *, rules: StatementRules, embed: Callable[[list[str]], Any],
               hand: dict[tuple[str, tuple[str, ...], str], str]) -> Pool:
    pairs = offline_candidates(conversation, data, rules=rules)
    facts = [f for f, _ in pairs]
    vectors = np.asarray(embed([f.text for f in facts]), dtype=np.float32)
    gated = np.array([c.slot is None for _, c in pairs], dtype=bool)
    observed = observations(data)
    obs_vectors = np.asarray(embed([o.text for o in observed]), dtype=np.float32)
    by_turn: dict[str, list[int]] = {}
    for i, fact in enumerate(facts):
        for turn in fact.turns:
            by_turn.setdefault(turn, []).append(i)
    matched = np.zeros(len(facts), dtype=bool)
    covers = []
    for o, vector in zip(observed, obs_vectors, strict=True):
        candidates = sorted({i for t in o.turns for i in by_turn.get(t, [])})
        hits = [i for i in candidates if float(vectors[i] @ vector) >= 0.6]
        matched[hits] = True
        covers.append(hits)
    labels = [hand.get((conversation, f.turns, hashlib.sha1(f.text.encode()).hexdigest()[:12])) for f in facts]
    features = np.hstack([vectors, gated[:, None].astype(np.float32), np.ones((len(facts), 1), dtype=np.float32)])
    return Pool(features=features, gated=gated, matched=matched, covers=covers,
                hand=[None if h is None else int(h == "fact") for h in labels])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--rules", choices=sorted(RULES), default="default")
    parser.add_argument("--label", choices=("observation", "hand"), default="observation")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--min-coverage", type=float, default=0.5)
    args = parser.parse_args(argv)
    from embeddings.minilm import MiniLMEmbedder

    embed = CachedEmbed(MiniLMEmbedder().embed_documents)
    hand = {(row["conversation"], tuple(row["turns"]), row["fact_sha1"]): row["label"]
            for row in json.loads(LABELS.read_text(encoding="utf-8"))["labels"]}
    pools = {p.stem: build_pool(p.stem, json.loads(p.read_text()), rules=RULES[args.rules], embed=embed, hand=hand)
             for p in args.paths}
    print(f"rules {args.rules}, label {args.label}, l2 {args.l2}", file=sys.stderr)
    # How far LoCoMo's precision sees junk: the share of hand-labelled facts and junk that match.
    labelled = [(h, m) for pool in pools.values() for h, m in zip(pool.hand, pool.matched, strict=True)
                if h is not None]
    for value, name in ((1, "facts"), (0, "junk")):
        hits = [m for h, m in labelled if h == value]
        print(f"hand-labelled {name}: {len(hits)}, matching an observation {np.mean(hits):.3f}")
    for held, r in held_out(pools, label=args.label, l2=args.l2, min_coverage=args.min_coverage).items():
        (p0, c0, n0), (p1, c1, n1) = r["before"], r["after"]
        area = "n/a" if r["auc"] is None else f"{r['auc']:.3f}"
        print(f"held out {held}: AUC {area}, threshold {r['threshold']:.2f}; precision/coverage {p0:.3f}/{c0:.3f} ({n0} facts) "
              f"-> {p1:.3f}/{c1:.3f} ({n1}); hand-labelled junk {r['junk_before'][0]}/{r['junk_before'][1]} "
              f"-> {r['junk_after'][0]}/{r['junk_after'][1]}")


if __name__ == "__main__":
    main()
