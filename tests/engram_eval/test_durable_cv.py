"""The learned durable-fact scorer's cross-validation, on made-up pools (no Elasticsearch, no LoCoMo)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_eval.durable_cv import Pool, fit, held_out, pick_threshold, predict


def _pool(rng: np.random.Generator, n: int = 40, *, noise: float = 0.0) -> Pool:
    # One informative feature: facts that match an observation sit on the positive side.
    matched = rng.random(n) < 0.5
    signal = np.where(matched, 1.0, -1.0) + noise * rng.standard_normal(n)
    features = np.stack([signal, np.ones(n), np.ones(n)], axis=1)
    covers = [[i] for i in np.flatnonzero(matched)]  # each matching fact covers an observation of its own
    return Pool(features=features, gated=np.ones(n, dtype=bool), matched=matched, covers=covers,
                hand=[int(m) for m in matched])


def test_fit_separates_a_separable_label():
    rng = np.random.default_rng(0)
    pool = _pool(rng)
    w = fit(pool.features, pool.matched.astype(float), l2=1.0)
    scores = predict(w, pool.features)
    assert scores[pool.matched].min() > scores[~pool.matched].max()


def test_pick_threshold_takes_the_most_precise_one_over_the_coverage_floor():
    rng = np.random.default_rng(1)
    pool = _pool(rng)
    perfect = pool.matched.astype(float)
    assert pool.measure(pool.keep(perfect, pick_threshold([pool], [perfect], min_coverage=0.5)))[0] == 1.0
    # Unreachable floor: nothing is dropped.
    empty = Pool(features=pool.features, gated=pool.gated, matched=pool.matched, covers=[[]], hand=pool.hand)
    assert pick_threshold([empty], [perfect], min_coverage=0.5) == 0.0


def test_pattern_facts_pass_whatever_their_score():
    rng = np.random.default_rng(2)
    pool = _pool(rng)
    pool.gated[:5] = False
    assert pool.keep(np.zeros(len(pool.gated)), 0.5)[:5].all()
    assert not pool.keep(np.zeros(len(pool.gated)), 0.5)[5:].any()


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), label=st.sampled_from(["observation", "hand"]))
def test_held_out_never_loses_precision_on_a_clean_signal(seed, label):
    rng = np.random.default_rng(seed)
    pools = {c: _pool(rng, noise=0.1) for c in "abcd"}
    for figures in held_out(pools, label=label, l2=1.0, min_coverage=0.5).values():
        assert figures["after"][0] >= figures["before"][0]
        assert figures["after"][1] >= 0.5
        junk, labelled = figures["junk_after"]
        assert 0 <= junk <= labelled


def test_auc_is_the_chance_a_positive_outscores_a_negative():
    from engram_eval.durable_cv import auc

    assert auc(np.array([0.9, 0.8, 0.1]), np.array([True, True, False])) == 1.0
    assert auc(np.array([0.1, 0.8, 0.9]), np.array([True, False, False])) == 0.0
    assert auc(np.array([0.5, 0.5]), np.array([True, False])) == 0.5
    assert auc(np.array([0.5]), np.array([True])) is None
