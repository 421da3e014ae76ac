"""benchmarks/es_cost.py's body variants: each takes away exactly the part it names (no node needed)."""

from __future__ import annotations

import copy

from benchmarks.es_cost import VARIANTS

BODY = [
    {"index": "a,b", "search_type": "dfs_query_then_fetch"},
    {"size": 80, "_source": {"excludes": ["embedding"]}, "query": {"match": {"text": "lisbon"}}},
    {"index": "x-episodic-v1,x-semantic-v1"},
    {"size": 80, "_source": {"excludes": ["embedding"]}, "query": {"dis_max": {"queries": [
        {"knn": {"field": "embedding", "k": 80}},
        {"nested": {"path": "passages", "score_mode": "max", "ignore_unmapped": True,
                    "query": {"knn": {"field": "passages.embedding", "k": 80}}}}]}}},
]
WORDS = [  # linear fusion's parts: a lexical leg with a named word clause, then the word counts
    {"index": "a,b"},
    {"size": 80, "query": {"bool": {"should": [
        {"match": {"text": "lisbon"}},
        {"multi_match": {"query": "lisbon", "fields": ["text"], "boost": 0.0, "_name": "word_text_0"}}]}}},
    {"index": "a,b"},
    {"size": 0, "aggs": {"words": {"filters": {"filters": {"word_text_0": {"match": {"text": "lisbon"}}}}}}},
]


def test_as_sent_is_an_equal_copy_and_no_variant_changes_the_recorded_body():
    before = copy.deepcopy(BODY)
    assert VARIANTS["as sent"](BODY) == BODY
    assert VARIANTS["index per type"](BODY) == BODY  # the same bodies; only the aliases move
    for variant in VARIANTS.values():
        variant(BODY)
    assert BODY == before


def test_each_variant_takes_away_only_its_part():
    no_source = VARIANTS["no _source"](BODY)
    assert [part.get("_source") for part in no_source[1::2]] == [False, False]
    assert no_source[::2] == BODY[::2]

    ten = VARIANTS["10 hits per search"](BODY)
    assert [part["size"] for part in ten[1::2]] == [10, 10]

    no_dfs = VARIANTS["no DFS"](BODY)
    assert no_dfs[0] == {"index": "a,b"} and no_dfs[1:] == BODY[1:]

    no_passages = VARIANTS["no passage search"](BODY)
    assert no_passages[:3] == BODY[:3]
    assert no_passages[3] == {"size": 80, "_source": {"excludes": ["embedding"]},
                              "query": {"knn": {"field": "embedding", "k": 80}}}


def test_knn_sections_ask_each_knn_query_as_a_top_level_search_and_the_passages_apart():
    entity = [{"index": "x-episodic-v1,x-semantic-v1"},
              {"size": 80, "query": {"knn": {"field": "embedding", "k": 80, "filter": [{"term": {"e": 1}}]}}}]
    sections = VARIANTS["kNN sections"](BODY + entity + WORDS)
    assert sections[:3] == BODY[:3] and sections[-4:] == WORDS
    assert sections[3:-4] == [
        {"size": 80, "_source": {"excludes": ["embedding"]}, "knn": {"field": "embedding", "k": 80}},
        {"index": "x-episodic-v1"},
        {"size": 80, "_source": {"excludes": ["embedding"]}, "knn": {"field": "passages.embedding", "k": 80}},
        entity[0],
        {"size": 80, "knn": {"field": "embedding", "k": 80, "filter": [{"term": {"e": 1}}]}},
    ]


def test_the_word_variants_take_away_linear_fusion_s_parts_only():
    assert VARIANTS["no word counts"](BODY + WORDS) == BODY + WORDS[:2]
    stripped = VARIANTS["no word clauses"](BODY + WORDS)
    assert stripped[:-4] == BODY and stripped[-2:] == WORDS[-2:]
    assert stripped[-3]["query"]["bool"]["should"] == [{"match": {"text": "lisbon"}}]


def test_with_dfs_marks_the_lexical_legs_only():
    body = VARIANTS["with DFS"](BODY + WORDS)
    assert [header.get("search_type") for header in body[::2]] == ["dfs_query_then_fetch", None,
                                                                  "dfs_query_then_fetch", None]


def test_counts_in_the_bm25_leg_move_the_count_aggregation_under_the_scope_filter():
    words = copy.deepcopy(WORDS)  # the lexical leg with a bool query, then the count search
    words[3]["query"] = {"bool": {"filter": [{"term": {"user_id": "u"}}]}}
    moved = VARIANTS["counts in the BM25 leg"](BODY + words)
    assert moved == BODY + [words[0], {**words[1], "aggs": {"all": {"global": {}, "aggs": {"allowed": {
        "filter": {"term": {"user_id": "u"}}, "aggs": {"words": words[3]["aggs"]["words"]}}}}}}]
