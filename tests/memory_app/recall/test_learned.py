"""The learned re-ranker (recall.learned): a function of the candidates as a set, finite, and the
identity when its model is."""

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from engram_core.es.schema import MemoryType
from memory_app.recall.learned import FEATURES, features, learned_rescore, model
from memory_app.recall.rank import Hit
from memory_app.recall.read import Reading

_READING = Reading(query="What has Maria done?", keywords="maria done", words=(), synonyms=(), own_name=(),
                   entities=("Maria",), topic="done", kinds=None, time_window=None, intent=None)

_hit = st.builds(
    lambda i, score, bm25, dense, extra, speaker, listener, session, text, memory_type: _make(
        i, score, bm25, dense, extra, speaker, listener, session, text, memory_type),
    st.integers(0, 10**6),
    st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(1e-6, 10.0)),  # ties, as scores often are
    st.one_of(st.none(), st.integers(1, 300)),
    st.one_of(st.none(), st.integers(1, 300)),
    st.lists(st.sampled_from(["entity_bm25:maria", "hop_dense", "dated_bm25"]), max_size=3, unique=True),
    st.booleans(), st.booleans(),
    st.sampled_from(["s1", "s2", "s3", None]),
    st.sampled_from(["Maria: I went hiking.", "Joe: How was it, Maria?", "", "x" * 2000]),
    st.sampled_from([MemoryType.EPISODIC, MemoryType.EPISODIC, MemoryType.SEMANTIC]),
)


def _make(i, score, bm25, dense, extra, speaker, listener, session, text, memory_type) -> Hit:
    hit = Hit(id=f"m{i}", memory_type=memory_type, source={"text": text, "session_id": session},
              bm25_rank=bm25, dense_rank=dense, extra_ranks={name: 1 for name in extra})
    hit.score = score
    hit.multipliers = {**({"speaker": 1.1} if speaker else {}), **({"to_listener": 0.85} if listener else {})}
    hit.reply_credit = 0.1 if listener else 0.0
    return hit


def _pool() -> st.SearchStrategy[list[Hit]]:
    return st.lists(_hit, min_size=1, max_size=25, unique_by=lambda h: h.id)


def _copy(hits: list[Hit]) -> list[Hit]:
    return [replace(h, multipliers=dict(h.multipliers)) for h in hits]


def _order(hits: list[Hit]) -> list[str]:
    return [h.id for h in sorted(hits, key=lambda h: (-h.score, h.id))]


@settings(max_examples=40, deadline=None)
@given(_pool(), st.randoms(use_true_random=False), st.booleans())
def test_the_rescored_order_does_not_depend_on_the_order_the_candidates_come_in(hits, rnd, gathers):
    reading = replace(_READING, gathers=gathers)
    offset, weights = model()
    first, shuffled = _copy(hits), _copy(hits)
    rnd.shuffle(shuffled)
    learned_rescore(first, reading, offset=offset, weights=weights)
    learned_rescore(shuffled, reading, offset=offset, weights=weights)
    assert _order(first) == _order(shuffled)
    assert {h.id: h.score for h in first} == {h.id: h.score for h in shuffled}


@settings(max_examples=40, deadline=None)
@given(_pool(), st.booleans(), st.lists(st.floats(-5, 5), min_size=len(FEATURES), max_size=len(FEATURES)),
       st.floats(0.1, 3))
def test_scores_and_features_stay_finite_and_a_score_of_zero_or_another_type_is_left_alone(hits, gathers,
                                                                                        weights, offset):
    reading = replace(_READING, gathers=gathers)
    rows = features(hits, reading)
    assert all(len(row) == len(FEATURES) and all(math.isfinite(x) for x in row) for row in rows)
    before = {h.id: h.score for h in hits}
    learned_rescore(hits, reading, offset=offset, weights=tuple(weights))
    for hit in hits:
        assert math.isfinite(hit.score) and hit.score >= 0
        if before[hit.id] == 0 or hit.memory_type is not MemoryType.EPISODIC:
            assert hit.score == before[hit.id] and "learned" not in hit.multipliers
        else:
            assert hit.score > 0 and hit.multipliers["learned"] == hit.score / before[hit.id]


@settings(max_examples=30, deadline=None)
@given(_pool())
def test_the_identity_model_keeps_every_score_and_so_today_s_order(hits):
    before = [(h.id, h.score) for h in hits]
    order = _order(hits)
    learned_rescore(hits, _READING, offset=1.0, weights=(0.0,) * len(FEATURES))
    assert _order(hits) == order
    assert all(math.isclose(h.score, score, rel_tol=1e-12) for h, (_, score) in zip(hits, before, strict=True))


def test_the_shipped_model_names_today_s_features_and_holds_finite_numbers():
    offset, weights = model()
    assert len(weights) == len(FEATURES) and all(math.isfinite(w) for w in (offset, *weights)) and offset > 0
