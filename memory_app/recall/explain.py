"""Explain: a ranked hit as a recall returns it (with, on request, why it ranked there), and what
the search made of each name the question names, which the inspector shows beside the reading."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from language.passages import passages_of
from memory_app.recall.options import RecallOptions
from memory_app.recall.rank import Hit, Ranked
from memory_app.recall.read import Reading
from memory_app.recall.search import RANKED_FIELDS, Searched, enough_mentions, entity_legs_possible


def ranked_explain(ranked: Ranked, *, explain: bool, passages_max: int) -> list[dict[str, Any]]:
    """Each hit as the API returns a memory, with its ``score`` and, with ``explain``, why."""
    return [{**memory_public(hit), "score": hit.score,
             **({"explain": hit_explain(hit, copies=ranked.copies.get(hit.id), passages_max=passages_max)} if explain else {})}
            for hit in ranked.hits]


def memory_public(hit: Hit) -> dict[str, Any]:
    """The hit as the API returns a memory (the search fetched no vector, and no derived field but
    those ranking reads)."""
    return {"id": hit.id, **{k: v for k, v in hit.source.items() if k not in RANKED_FIELDS},
            "memory_type": hit.memory_type.value}


def hit_explain(hit: Hit, *, passages_max: int, copies: list[str] | None = None) -> dict[str, Any]:
    """Ranks, the fused score, the multipliers, the credit of a fact distilled from it and the
    fact's id, the reply credit, the sentence of the episode's own text its dense rank came from,
    the ids of its ``copies`` left out and, for a hit telling a superseded value, that fact and the
    hit holding the current value it was placed ``below`` or ``above``. Raw BM25 scores are never shown: they carry index-wide
    term statistics, which in shared indices move when another tenant writes; the fused score uses
    none."""
    return {
        "bm25_rank": hit.bm25_rank,
        "dense_rank": hit.dense_rank,
        "fusion": hit.fusion,
        f"{hit.fusion}_score": hit.fused,
        "rerank_score": hit.rerank_score,
        "rerank_rank": hit.rerank_rank,
        "multipliers": hit.multipliers,
        "final_score": hit.score,
        **({"extra_ranks": hit.extra_ranks} if hit.extra_ranks else {}),
        **({"fact_credit": hit.fact_credit, "credited_by": hit.credited_by} if hit.credited_by else {}),
        **({"reply_credit": hit.reply_credit, "replies_to": hit.replies_to} if hit.replies_to else {}),
        **({"neighbour_credit": hit.neighbour_credit, "neighbour": hit.neighbour} if hit.neighbour else {}),
        **({"dense_sentence": sentence} if (sentence := _dense_sentence(hit, passages_max=passages_max)) else {}),
        **({"copies": copies} if copies else {}),
        **({"superseded_fact": {"id": hit.stale_fact.id, "text": hit.stale_fact.text,
                                "superseded_by": list(hit.stale_fact.superseded_by),
                                "valid_to": hit.stale_fact.valid_to, "as": hit.stale_as,
                                **({hit.placed: hit.placed_by} if hit.placed else {}),
                                **({"kind": hit.placed_kind} if hit.placed_kind else {})}} if hit.stale_fact else {}),
    }


def _dense_sentence(hit: Hit, *, passages_max: int) -> str | None:
    # Passages are not stored as text: the offset indexes the same split of the episode's text.
    if hit.dense_passage is None:
        return None
    passages = passages_of(hit.source.get("text") or "", limit=passages_max)
    return passages[hit.dense_passage] if hit.dense_passage < len(passages) else None


@dataclass(frozen=True)
class EntityReading:
    """A name the question names: how many of the end-user's memories name it (counted up to
    ENGRAM_RECALL_ENTITY_MIN_MENTIONS; None when not counted) and whether it got legs of its own."""

    name: str
    mentions: int | None
    legs: bool


def entities_explain(reading: Reading, searched: Searched, *, options: RecallOptions) -> tuple[EntityReading, ...]:
    """Each name of ``reading`` with its count of naming memories and whether it got legs."""
    possible = entity_legs_possible(reading, options=options)

    def legs(count: int | None) -> bool:
        if not possible:
            return False
        return options.entity_min_mentions <= 0 or (count is not None and enough_mentions(count, options=options))

    counts = searched.mention_counts
    return tuple(EntityReading(name=e, mentions=counts.get(e), legs=legs(counts.get(e))) for e in reading.entities)
