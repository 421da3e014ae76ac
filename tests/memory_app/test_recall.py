"""Recall's ranking: input checks, fusion, lexical scores, decay and outcome multipliers, explain."""

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from engram_core.errors import ValidationFailed
from memory_app.recall import (fuse, fusion, gauss_decay, keyword_query, lexical_ceiling, lexical_score,
                                lexical_words, outcome_multiplier)
from memory_app.selectors import memory_recall
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
    settings.ENGRAM_FUSION = "rrf"
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


def test_the_bm25_query_drops_question_words_and_pronouns(settings):
    assert keyword_query("When did Caroline's sister visit her in Berlin?") == "Caroline's sister visit Berlin?"
    assert keyword_query("What’s the wifi password?") == "wifi password?"
    assert keyword_query("what did you do?") == "what did you do?"  # nothing else left: unchanged
    settings.ENGRAM_QUERY_STOPWORDS = False
    assert keyword_query("When did Caroline visit?") == "When did Caroline visit?"


def test_fusion_weights_each_leg_and_equal_weights_are_plain_rrf(settings):
    def response(*ids):
        return {"hits": {"hits": [{"_id": i, "_score": 1.0, "_source": {"memory_type": "episodic"}} for i in ids]}}

    hits = fuse(responses=[response("a", "b"), response("b", "a")])
    assert hits["a"].fused == pytest.approx(1 / 31 + 0.5 / 32)
    assert hits["b"].fused == pytest.approx(1 / 32 + 0.5 / 31)
    settings.ENGRAM_RRF_DENSE_WEIGHT = 1.0
    hits = fuse(responses=[response("a", "b"), response("b", "a")])
    assert hits["a"].fused == hits["b"].fused == pytest.approx(1 / 31 + 1 / 32)
    assert {h.fusion for h in hits.values()} == {"rrf"}


def test_linear_fusion_sums_min_max_normalised_scores_at_each_leg_s_weight(settings):
    settings.ENGRAM_CONTEXT_BOOST = 0.3
    settings.ENGRAM_LINEAR_LEXICAL_NORM = "minmax"  # the lexical legs too (the default is below)

    def response(*scored):
        return {"hits": {"hits": [{"_id": i, "_score": s, "_source": {"memory_type": "episodic"}, **extra}
                                  for i, s, extra in scored]}}

    idf = {"word_text_0": 2.0, "word_text_1": 0.5}  # a rare word and a common one
    # Lexical legs score by the idf of the words a hit holds (Elasticsearch's _score is not used).
    bm25 = response(("b", 9.0, {"matched_queries": ["word_text_1"]}),
                    ("a", 8.0, {"matched_queries": ["word_text_0", "word_text_1"]}),
                    ("c", 7.0, {"matched_queries": ["word_context_0"]}))  # only in its context: × 0.3
    dense = response(("b", 0.90, {}), ("c", 0.89, {}), ("a", 0.70, {}))
    entity = response(("c", 5.0, {"matched_queries": ["word_text_1"]}))  # a leg's only match is its best
    hits = fuse(responses=[bm25, dense, entity], extra=[("entity1", 0.5)], fusion="linear", idf=idf)
    # Lexical scores a 2.5, c 0.6, b 0.5 -> 1.0, 0.05, 0.0; dense b 1.0, c 0.95, a 0.0.
    assert hits["a"].fused == pytest.approx(1.0 + 0.0)
    assert hits["b"].fused == pytest.approx(0.0 + 1.0)
    assert hits["c"].fused == pytest.approx(0.05 + 0.95 + 0.5)
    assert {h.fusion for h in hits.values()} == {"linear"}
    assert (hits["a"].bm25_rank, hits["c"].bm25_rank, hits["b"].bm25_rank) == (1, 2, 3)  # by its own score
    assert hits["a"].dense_rank == 3
    settings.ENGRAM_LINEAR_DENSE_WEIGHT = 0.5
    hits = fuse(responses=[bm25, dense, entity], extra=[("entity1_dense", 0.5)], fusion="linear", idf=idf)
    assert hits["c"].fused == pytest.approx(0.05 + 0.5 * 0.95 + 0.5 * 0.5)


def test_linear_fusion_scores_a_lexical_hit_by_the_share_of_the_question_it_holds(settings):
    settings.ENGRAM_CONTEXT_BOOST = 0.3
    assert settings.ENGRAM_LINEAR_LEXICAL_NORM == "coverage"  # the default

    def response(*scored):
        return {"hits": {"hits": [{"_id": i, "_score": s, "_source": {"memory_type": "episodic"}, **extra}
                                  for i, s, extra in scored]}}

    idf = {"word_text_0": 2.0, "word_text_1": 0.5, "word_text_2": 1.5}  # no memory holds the third word
    bm25 = response(("a", 8.0, {"matched_queries": ["word_text_0", "word_text_1"]}),
                    ("b", 9.0, {"matched_queries": ["word_text_1"]}))
    dense = response(("b", 0.90, {}), ("a", 0.70, {}))
    hits = fuse(responses=[bm25, dense], fusion="linear", idf=idf)
    # Shares of 4.0: a 2.5 / 4 (not 1.0 for being the leg's best), b 0.5 / 4 (not 0.0 for its last).
    assert hits["a"].fused == pytest.approx(0.625 + 0.0)
    assert hits["b"].fused == pytest.approx(0.125 + 1.0)
    assert (hits["a"].bm25_rank, hits["b"].bm25_rank) == (1, 2)
    # A lone weak match is still weak: one common word of three.
    hits = fuse(responses=[response(("b", 9.0, {"matched_queries": ["word_text_1"]})), dense],
                fusion="linear", idf=idf)
    assert hits["b"].fused == pytest.approx(0.125 + 1.0)
    assert fuse(responses=[bm25, dense], fusion="linear", idf={})["a"].fused == 0.0  # no words: no lexical share
    settings.ENGRAM_LINEAR_LEXICAL_NORM = "zscore"
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_LINEAR_LEXICAL_NORM"):
        fuse(responses=[bm25, dense], fusion="linear", idf=idf)


def test_a_lexical_score_counts_each_field_of_the_bm25_leg_at_its_boost(settings):
    settings.ENGRAM_CONTEXT_BOOST, settings.ENGRAM_CONCEPT_BOOST = 0.3, 0.3
    settings.ENGRAM_SYNONYM_WEIGHT = 0.5
    idf = {"word_text_0": 2.0, "word_text_1": 0.5, "kinds": 1.5}

    def score(*matched):
        return lexical_score({"matched_queries": list(matched)}, idf)

    assert score() == 0.0
    assert score("word_text_0", "word_context_0") == pytest.approx(2.0)  # its text holds it: context adds nothing
    assert score("word_context_0", "word_text_1") == pytest.approx(0.3 * 2.0 + 0.5)
    assert score("kinds") == pytest.approx(0.3 * 1.5)  # one of the kinds the question asks for (concepts)
    # A synonym of a word in its text: half the word's idf; never on top of the word or its context.
    assert score("word_synonym_0") == pytest.approx(0.5 * 2.0)
    assert score("word_synonym_0", "word_text_0") == pytest.approx(2.0)
    assert score("word_synonym_0", "word_context_0") == pytest.approx(0.5 * 2.0)
    # An episode the end-user said, for a word naming them (selectors.own_name): the word's idf, at
    # ENGRAM_OWN_NAME_WEIGHT; never on top of the word itself.
    settings.ENGRAM_OWN_NAME_WEIGHT = 1.0
    assert score("word_speaker_0") == pytest.approx(2.0)
    assert score("word_speaker_0", "word_text_0") == pytest.approx(2.0)
    settings.ENGRAM_OWN_NAME_WEIGHT = 0.5
    assert score("word_speaker_0", "word_context_0") == pytest.approx(0.5 * 2.0)
    assert lexical_ceiling(idf) == pytest.approx(2.0 + 0.5 + 0.3 * 1.5)


def test_the_fusion_setting_is_checked(settings):
    assert fusion() == "linear"
    settings.ENGRAM_FUSION = "RRF"
    assert fusion() == "rrf"
    settings.ENGRAM_FUSION = "convex"
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_FUSION"):
        fusion()


def test_lexical_words_are_the_bm25_query_s_distinct_words():
    assert lexical_words("What did Caroline's sister say about Berlin and berlin?") == [
        "caroline's", "sister", "say", "berlin"]


def test_decay_and_outcome_formulas():
    origin = datetime(2026, 1, 1, tzinfo=UTC)
    assert gauss_decay(value=origin - timedelta(days=100), origin=origin) == 1.0
    assert gauss_decay(value=origin - timedelta(days=180 + 1825), origin=origin) == pytest.approx(0.5)
    assert outcome_multiplier(successes=0, failures=0) == 1.0
    assert outcome_multiplier(successes=3, failures=3) == 1.0
    assert outcome_multiplier(successes=100, failures=0) == pytest.approx(1 + 0.1 * (2 * 101 / 102 - 1))
    assert outcome_multiplier(successes=0, failures=100) == pytest.approx(1 + 0.1 * (2 * 1 / 102 - 1))
    assert 0.9 < outcome_multiplier(successes=0, failures=10**6) < outcome_multiplier(successes=10**6, failures=0) < 1.1
