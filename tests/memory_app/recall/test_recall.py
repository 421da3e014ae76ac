"""Recall exposes nothing statistical: another tenant's writes leave a tenant's recall response
unchanged, byte for byte (shared indices: with linear fusion, as long as a leg's candidates stay
the same; with rank fusion, as long as its ranks do not move; dedicated: always)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from engram_core.errors import ValidationFailed

from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.recall import memory_recall
from tenants.models import Tenant
from tenants.services.clients import subject_es_client
from tenants.services.isolation_move import tenant_indices_ensure
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes

NOW = datetime(2026, 11, 1, tzinfo=UTC)
EXPLAIN_KEYS = {"bm25_rank", "dense_rank", "fusion", "linear_score", "rerank_score", "rerank_rank", "multipliers",
                "final_score"}


def _subject(slug: str, external_id: str, isolation: str = "shared"):
    tenant = Tenant.objects.create(slug=slug, name=slug.title(), isolation=isolation)
    tenant_indices_ensure(tenant=tenant)
    return subject_get_or_create(tenant=tenant, external_id=external_id, lifetimes=KeyLifetimes.from_settings())


def _recall(subject, query: str) -> bytes:
    hits = memory_recall(subject=subject, query=query, k=10, explain=True, now=NOW)
    return json.dumps(hits, sort_keys=True).encode()


def _ids(response: bytes) -> list[str]:
    return [h["id"] for h in json.loads(response)]


def test_explain_shows_ranks_and_factors_but_no_raw_score(memory):
    alice = _subject("acme", "alice")
    fact_write(subject=alice, text="The user likes zqapi17230 tea.")

    [hit] = memory_recall(subject=alice, query="zqapi17230", k=1, explain=True, now=NOW)

    assert set(hit["explain"]) == EXPLAIN_KEYS
    assert "bm25_score" not in json.dumps(hit) and "dense_score" not in json.dumps(hit)


def test_shared_tenant_recall_is_byte_identical_after_another_tenant_writes(memory):
    # The finding: bm25_score 8.78 -> 3.73 once another tenant wrote the word 30 times.
    alice = _subject("acme-home", "alice")
    fact_write(subject=alice, text="The user likes zqapi17230 tea.")
    episode_write(subject=alice, text="We talked about the garden fence.")
    mallory = _subject("rival", "mallory")
    before = _recall(alice, "zqapi17230")

    for n in range(30):
        episode_write(subject=mallory, text=f"zqapi17230 zqapi17230 note {n}")
    after = _recall(alice, "zqapi17230")

    assert _ids(before)[0] == _ids(after)[0]
    assert after == before


def _near_identical_world(isolation: str):
    # Ranks inside A's results hang on idf: "tea" is rarer than "garden" among A's memories,
    # so the tea memory ranks first, unless someone else makes "tea" common in A's indices.
    alice = _subject("acme", "alice", isolation=isolation)
    tea = episode_write(subject=alice, text="Tea with lemon and the garden")["id"]
    for text in ("Garden with roses", "Garden shed repairs", "Garden fence painting"):
        episode_write(subject=alice, text=text)
    mallory = _subject("globex", "mallory")
    return alice, mallory, tea


def _flood(mallory) -> None:
    for n in range(40):
        episode_write(subject=mallory, text=f"Tea with lemon, tea again {n}")


def _recall_around_a_flood(isolation: str) -> tuple[str, bytes, bytes]:
    """Alice's tea memory's id and her recall of "tea garden" before and after another tenant
    makes "tea" common."""
    alice, mallory, tea = _near_identical_world(isolation)
    before = _recall(alice, "tea garden")
    _flood(mallory)
    return tea, before, _recall(alice, "tea garden")


def test_shared_tenant_ranks_can_move_through_idf_under_rrf(memory, settings):
    # The residual channel of shared indices under rank fusion, documented in the README: this is
    # what dedicated indices, or linear fusion's own-memory statistics (next test), close.
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "fusion": "rrf"}
    _tea, before, after = _recall_around_a_flood("shared")

    assert _ids(before) != _ids(after)
    assert all(set(h["explain"]) == EXPLAIN_KEYS - {"linear_score"} | {"rrf_score"} for h in json.loads(after))


def test_linear_fusion_leaves_a_shared_tenant_s_recall_byte_identical_rank_order_included(memory):
    # Linear fusion (the default) scores and orders the lexical legs by word counts among the
    # end-user's own memories, so the flood that reorders RRF's ranks above changes nothing here.
    tea, before, after = _recall_around_a_flood("shared")

    assert _ids(before)[0] == tea
    assert after == before
    assert {h["explain"]["fusion"] for h in json.loads(after)} == {"linear"}


def test_dedicated_tenant_recall_is_byte_identical_rank_order_included(memory):
    tea, before, after = _recall_around_a_flood("dedicated")

    assert _ids(before)[0] == tea
    assert after == before


def test_linear_fusion_explains_its_score(memory):
    alice = _subject("acme", "alice")
    target = episode_write(subject=alice, text="Tea with lemon and the garden")["id"]
    episode_write(subject=alice, text="Garden shed repairs")

    [top, *_rest] = memory_recall(subject=alice, query="tea with lemon and the garden", k=5, explain=True, now=NOW)
    assert top["id"] == target and top["explain"]["fusion"] == "linear" and "rrf_score" not in top["explain"]
    # The best of both legs: 1.0 from each (ENGRAM_LINEAR_*_WEIGHT), times the multipliers.
    assert top["explain"]["linear_score"] == pytest.approx(2.0)
    assert top["score"] == pytest.approx(2.0 * top["explain"]["multipliers"]["time_decay"])


def test_a_recall_lists_a_text_once_and_names_its_copies(memory, settings):
    """Said on three days, one line is three episodes; a recall gives it one place (the best
    copy), the next places go to other memories, and explain names the copies left out."""
    alice = _subject("acme", "alice")
    days = [datetime(2026, 10, day, tzinfo=UTC) for day in (5, 12, 19)]
    said = [episode_write(subject=alice, text=text, occurred_at=day)["id"]
            for day, text in zip(days, ["Is the heater on a timer?", "is the heater on a  TIMER?",
                                        "Is the heater on a timer?"], strict=True)]
    other = episode_write(subject=alice, text="The heater timer was reset by the landlord")["id"]
    fact = fact_write(subject=alice, text="Is the heater on a timer?")["id"]  # another type: not a copy

    hits = memory_recall(subject=alice, query="heater timer", k=3, explain=True, now=NOW)
    ids = [h["id"] for h in hits]
    assert len(ids) == 3 and {other, fact} <= set(ids) and len(set(ids) & set(said)) == 1
    [kept] = [h for h in hits if h["id"] in said]
    assert sorted([kept["id"], *kept["explain"]["copies"]]) == sorted(said)
    assert all("copies" not in h["explain"] for h in hits if h is not kept)
    # A turn's recall leaves the turn out first: repeated, the line said before is what it gives back.
    again = memory_recall(subject=alice, query="heater timer", k=3, explain=True, now=NOW, exclude=kept["id"])
    [before] = [h for h in again if h["id"] in said]
    assert before["id"] != kept["id"] and len(before["explain"]["copies"]) == 1

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "collapse_copies": False}
    assert len({h["id"] for h in memory_recall(subject=alice, query="heater timer", k=5, now=NOW)} & set(said)) == 3


class _Recorder:
    """The end-user's own client, recording each ``_msearch`` it sends."""

    def __init__(self, es):
        self.es, self.sent = es, []

    def msearch(self, *, searches):
        self.sent.append(searches)
        return self.es.msearch(searches=searches)


@pytest.mark.parametrize("fusion", ["linear", "rrf"])
def test_the_lexical_legs_gather_index_statistics_first_under_rank_fusion_only(memory, settings, fusion):
    # Under rank fusion Elasticsearch's BM25 score orders a lexical leg, so its statistics are
    # gathered across the four indices first (DFS); linear fusion scores the leg from the
    # end-user's own memories and skips that round. Entity legs (no guard here) alike.
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "fusion": fusion, "entity_min_mentions": 0}
    alice = _subject("acme", "alice")
    target = episode_write(subject=alice, text="Melanie painted a sunset over the lake.")["id"]
    episode_write(subject=alice, text="Melanie went camping with her kids.")
    es = _Recorder(subject_es_client(subject=alice))

    hits = memory_recall(subject=alice, query="What did Melanie paint?", k=5, now=NOW, es=es)

    assert hits[0]["id"] == target
    [searches] = es.sent
    lexical = [header for header, body in zip(searches[::2], searches[1::2], strict=True)
               if "bool" in body.get("query", {}) and body.get("size")]  # the BM25 leg and the entity's
    # (counts have size 0; the dense leg's query is kNN)
    assert len(lexical) == 2
    search_types = [header.get("search_type") for header in searches[::2]]
    if fusion == "linear":
        assert search_types == [None] * len(search_types)
    else:
        assert [header.get("search_type") for header in lexical] == ["dfs_query_then_fetch"] * 2
        assert search_types.count("dfs_query_then_fetch") == 2


def test_as_of_returns_what_was_true_then(memory):
    """Recall as of a date (issue 69): the fact valid then, even superseded since; not the one
    that replaced it later; episodes up to then only."""
    subject = _subject("asof", "rosa")
    t1, t2 = datetime(2025, 1, 10, tzinfo=UTC), datetime(2025, 6, 10, tzinfo=UTC)
    episode_write(subject=subject, text="Our router is a Netgear R7000.", occurred_at=t1)
    episode_write(subject=subject, text="We swapped the Netgear for an Eero mesh.", occurred_at=t2)
    old = fact_write(subject=subject, text="User's router is a Netgear R7000.", valid_from=t1)
    new = fact_write(subject=subject, text="User's router is an Eero mesh.", supersedes=[old["id"]], valid_from=t2)

    def texts(**when) -> list[str]:
        return [h["text"] for h in memory_recall(subject=subject, query="which router does the user have", k=10,
                                                 now=NOW, **when)]

    back_then = texts(as_of=datetime(2025, 3, 1, tzinfo=UTC))
    assert old["text"] in back_then and new["text"] not in back_then
    assert "Our router is a Netgear R7000." in back_then
    assert "We swapped the Netgear for an Eero mesh." not in back_then
    later = texts(as_of="2025-07-01T00:00:00Z")
    assert new["text"] in later and old["text"] not in later
    assert new["text"] in texts() and old["text"] not in texts()
    assert old["text"] in texts(as_of=datetime(2025, 3, 1, tzinfo=UTC), include_superseded=True)
    with pytest.raises(ValidationFailed):
        memory_recall(subject=subject, query="router", as_of="last tuesday")
