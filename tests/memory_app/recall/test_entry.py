"""The recall entry point: input refused at the edge, and explain's ranks, fusion and multipliers."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from engram_core.errors import ValidationFailed
from memory_app.recall import memory_recall
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"k": 0}, "k_out_of_range"),
    ({"k": 101}, "k_out_of_range"),
    ({"k": "5"}, "k_out_of_range"),
    ({"types": ["episodic", "dreams"]}, "unknown_memory_type"),
    ({"types": []}, "invalid_types"),
    ({"since": "last week"}, "invalid_datetime"),
    ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "invalid_time_range"),
    ({"query": ""}, "empty_text"),
    ({"query": "q" * 2001}, "text_too_long"),
])
def test_bad_recall_input_is_refused(subject, kwargs, code):
    with pytest.raises(ValidationFailed) as exc:
        memory_recall(subject=subject, **{"query": "anything", **kwargs})
    assert exc.value.code == code


def test_explain_shows_ranks_fusion_and_every_multiplier(subject, settings):
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "fusion": "rrf"}
    now = datetime(2026, 11, 1, tzinfo=UTC)
    old = episode_write(subject=subject, text="We adopted a beagle puppy named Max.",
                        occurred_at=now - timedelta(days=900))
    fact = fact_write(subject=subject, text="Alice has a beagle called Max.")
    catalog_entry_write(tenant=subject.tenant, title="Pets", text="Pet cameras support beagle-sized dogs.")
    results = memory_recall(subject=subject, query="beagle Max", k=5, explain=True, now=now)
    by_id = {r["id"]: r for r in results}
    e = by_id[old["id"]]["explain"]
    assert e["bm25_rank"] >= 1 and e["dense_rank"] >= 1
    # Leg weights: BM25 1.0, dense 0.5 (ENGRAM_RRF_*_WEIGHT).
    assert e["rrf_score"] == pytest.approx(1 / (30 + e["bm25_rank"]) + 0.5 / (30 + e["dense_rank"]))
    # 900 days old, offset 180 d, scale 1825 d, decay 0.5 at offset + scale.
    sigma_sq = -(1825**2) / (2 * math.log(0.5))
    assert e["multipliers"] == {"time_decay": pytest.approx(math.exp(-(720**2) / (2 * sigma_sq)))}
    assert e["final_score"] == pytest.approx(e["rrf_score"] * e["multipliers"]["time_decay"])
    assert set(by_id[fact["id"]]["explain"]["multipliers"]) == {"time_decay", "use_count"}
    catalog = next(r for r in results if r["memory_type"] == "catalog")
    assert catalog["explain"]["multipliers"] == {"catalog_prior": 0.85}
