"""A learned re-ranker over the candidates, after every multiplier and credit: each candidate's
score becomes score ** offset × exp(w · features), with ``offset`` and ``w`` fitted offline
(scripts outside the repo, docs/retrieval-quality.md says how) and shipped in ``learned_ranker.json``.

Pure: the features come from the hits and the Reading alone (no search, no setting).
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

from engram_core.es.schema import MemoryType
from memory_app.recall.read import Reading

MODEL = Path(__file__).with_name("learned_ranker.json")
# A candidate no plain leg found takes this rank there (beyond the legs' pools).
_ABSENT = 200
# How many of the first candidates count as "near the top" for the session feature.
_TOP = 10

FEATURES = (
    "bm25_in", "bm25_top10", "bm25_log", "dense_in", "dense_top10", "dense_log", "extra_legs", "hop",
    "speaker", "listener", "reply", "neighbour", "session_top", "entity_in_text", "length",
    "gathers_speaker", "gathers_listener", "gathers_bm25_top10", "gathers_session_top", "rank_log",
)


def features(hits: list, reading: Reading) -> list[list[float]]:
    """One row of ``FEATURES`` per hit of ``hits`` (the candidates with their scores so far)."""
    order = sorted(range(len(hits)), key=lambda i: (-hits[i].score, hits[i].id))
    rank = {i: r for r, i in enumerate(order, start=1)}
    top_sessions: dict[str, int] = {}
    for i in order[:_TOP]:
        if session := hits[i].source.get("session_id"):
            top_sessions[session] = top_sessions.get(session, 0) + 1
    entities = [e.casefold() for e in reading.entities]
    gathers = 1.0 if reading.gathers else 0.0
    rows = []
    for i, hit in enumerate(hits):
        text = hit.source.get("text") or ""
        bm25, dense = hit.bm25_rank, hit.dense_rank
        session = hit.source.get("session_id")
        near = top_sessions.get(session, 0) - (1 if rank[i] <= _TOP else 0) if session else 0
        session_top = min(3, max(0, near)) / 3
        speaker = 1.0 if "speaker" in hit.multipliers else 0.0
        listener = 1.0 if "to_listener" in hit.multipliers else 0.0
        bm25_top10 = 1.0 if bm25 is not None and bm25 <= 10 else 0.0
        folded = text.casefold()
        rows.append([
            1.0 if bm25 is not None else 0.0,
            bm25_top10,
            -math.log(bm25 or _ABSENT) / math.log(_ABSENT),
            1.0 if dense is not None else 0.0,
            1.0 if dense is not None and dense <= 10 else 0.0,
            -math.log(dense or _ABSENT) / math.log(_ABSENT),
            min(3, len(hit.extra_ranks)) / 3,
            1.0 if any(name.startswith("hop") for name in hit.extra_ranks) else 0.0,
            speaker,
            listener,
            1.0 if hit.reply_credit > 0 else 0.0,
            1.0 if hit.neighbour_credit > 0 else 0.0,
            session_top,
            1.0 if any(e in folded for e in entities) else 0.0,
            min(1.0, math.log1p(len(text)) / math.log(1000)),
            gathers * speaker,
            gathers * listener,
            gathers * bm25_top10,
            gathers * session_top,
            -math.log(rank[i]) / math.log(_ABSENT),
        ])
    return rows


@cache
def model() -> tuple[float, tuple[float, ...]]:
    """(offset, weights) from ``learned_ranker.json``."""
    data = json.loads(MODEL.read_text())
    assert tuple(data["features"]) == FEATURES, "learned_ranker.json was fitted on other features"
    return float(data["offset"]), tuple(float(w) for w in data["weights"])


def learned_rescore(hits: list, reading: Reading, *, offset: float, weights: tuple[float, ...]) -> None:
    """Each episode's score as score ** ``offset`` × exp(``weights`` · its features), recorded as
    its ``learned`` multiplier; other memory types keep theirs (the model saw only episodes)."""
    episodes = [h for h in hits if h.memory_type is MemoryType.EPISODIC]
    for hit, row in zip(episodes, features(episodes, reading), strict=True):
        if hit.score <= 0:
            continue
        new = math.exp(offset * math.log(hit.score) + sum(w * x for w, x in zip(weights, row, strict=True)))
        hit.multipliers["learned"] = new / hit.score
        hit.score = new
