"""benchmarks/es_cost.py's body variants: each takes away exactly the part it names (no node needed)."""

from __future__ import annotations

import copy

from benchmarks.es_cost import VARIANTS

BODY = [
    {"index": "a,b", "search_type": "dfs_query_then_fetch"},
    {"size": 80, "_source": {"excludes": ["embedding"]}, "query": {"match": {"text": "lisbon"}}},
    {"index": "a,b"},
    {"size": 80, "_source": {"excludes": ["embedding"]}, "knn": {"field": "embedding", "k": 80}},
    {"index": "a"},
    {"size": 80, "_source": {"excludes": ["embedding"]}, "knn": {"field": "passages.embedding", "k": 80}},
]


def test_as_sent_is_an_equal_copy_and_no_variant_changes_the_recorded_body():
    before = copy.deepcopy(BODY)
    assert VARIANTS["as sent"](BODY) == BODY
    for variant in VARIANTS.values():
        variant(BODY)
    assert BODY == before


def test_each_variant_takes_away_only_its_part():
    no_source = VARIANTS["no _source"](BODY)
    assert [part.get("_source") for part in no_source[1::2]] == [False, False, False]
    assert no_source[::2] == BODY[::2]

    ten = VARIANTS["10 hits per search"](BODY)
    assert [part["size"] for part in ten[1::2]] == [10, 10, 10]

    no_dfs = VARIANTS["no DFS"](BODY)
    assert no_dfs[0] == {"index": "a,b"} and no_dfs[1:] == BODY[1:]

    no_passages = VARIANTS["no passage search"](BODY)
    assert no_passages == BODY[:4]
