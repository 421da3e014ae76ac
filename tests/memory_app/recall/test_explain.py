"""The explain stage: a hit as a recall returns it, and what the search made of each name (no node)."""

from dataclasses import replace

from engram_core.es.schema import MemoryType
from memory_app.recall.explain import entities_explain, hit_explain, ranked_explain
from memory_app.recall.options import RecallOptions
from memory_app.recall.rank import Hit, Ranked
from memory_app.recall.read import Reading
from memory_app.recall.search import Searched


def _hit(**fields) -> Hit:
    return Hit(id="m1", memory_type=MemoryType.EPISODIC, fusion="linear",
               source={"memory_type": "episodic", "text": "We swam. Then we ate.", "role": "user"}, **fields)


def test_a_hit_is_returned_as_a_memory_with_its_score_and_on_request_why():
    hit = _hit(bm25_rank=2, dense_rank=1, fused=1.5, multipliers={"time_decay": 0.5}, score=0.75, dense_passage=1)
    [plain] = ranked_explain(Ranked(hits=[hit], copies={}), explain=False, passages_max=12)
    assert plain == {"id": "m1", "memory_type": "episodic", "text": "We swam. Then we ate.", "role": "user",
                     "score": 0.75}
    [explained] = ranked_explain(Ranked(hits=[hit], copies={"m1": ["m2", "m3"]}), explain=True, passages_max=12)
    assert explained["explain"] == {
        "bm25_rank": 2, "dense_rank": 1, "fusion": "linear", "linear_score": 1.5, "rerank_score": None,
        "rerank_rank": None, "multipliers": {"time_decay": 0.5}, "final_score": 0.75,
        "dense_sentence": "Then we ate.", "copies": ["m2", "m3"]}
    assert list(explained["explain"])[:8] == ["bm25_rank", "dense_rank", "fusion", "linear_score", "rerank_score",
                                              "rerank_rank", "multipliers", "final_score"]


def test_explain_names_the_entity_ranks_and_the_question_a_reply_took_credit_from():
    hit = _hit(extra_ranks={"entity1": 3}, reply_credit=0.1, replies_to="q1", dense_passage=7,
               neighbour_credit=0.05, neighbour="t2")
    explained = hit_explain(hit, passages_max=12)
    assert explained["extra_ranks"] == {"entity1": 3}
    assert (explained["reply_credit"], explained["replies_to"]) == (0.1, "q1")
    assert (explained["neighbour_credit"], explained["neighbour"]) == (0.05, "t2")
    assert "dense_sentence" not in explained and "copies" not in explained  # no 8th sentence: none named


def _reading(topic: str = "books read?") -> Reading:
    return Reading(query="What books did Melanie and Gina read?", keywords="books Melanie Gina read?", words=(),
                   synonyms=(), own_name=(), entities=("Melanie", "Gina"), topic=topic, kinds=None, time_window=None,
                   intent=None)


def test_each_name_says_its_count_and_whether_it_got_legs(settings):
    options = replace(RecallOptions.from_settings(), entity_min_mentions=5)
    searched = Searched(legs=(), sources={}, idf={}, mention_counts={"Melanie": 5, "Gina": 1})
    assert [(e.name, e.mentions, e.legs) for e in entities_explain(_reading(), searched, options=options)] == [
        ("Melanie", 5, True), ("Gina", 1, False)]
    # No guard: every name gets legs, uncounted; nothing asked besides the names, or no weight: none.
    unguarded = entities_explain(_reading(), Searched(legs=(), sources={}, idf={}, mention_counts={}),
                                 options=replace(options, entity_min_mentions=0))
    assert [(e.mentions, e.legs) for e in unguarded] == [(None, True), (None, True)]
    assert not any(e.legs for e in entities_explain(_reading(topic=""), searched, options=options))
    assert not any(e.legs for e in entities_explain(_reading(), searched, options=replace(options, entity_weight=0)))
