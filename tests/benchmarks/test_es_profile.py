"""benchmarks/es_profile.py's sorting of a flight recording's samples (no node needed)."""

from __future__ import annotations

from benchmarks.es_profile import categorise, table

KNN = "org/apache/lucene/search/AbstractKnnVectorQuery.rewrite"
REWRITE = "org/apache/lucene/search/IndexSearcher.rewrite"
FETCH = "org/elasticsearch/search/fetch/FetchPhase.buildSearchHits"
POOL = "java/util/concurrent/ThreadPoolExecutor.runWorker"


def test_the_innermost_recognised_part_wins_and_the_rest_is_other():
    stacks = [
        ["org/apache/lucene/util/VectorUtil.dotProduct", KNN, REWRITE, POOL],  # a kNN search inside a rewrite
        ["org/apache/lucene/search/BooleanQuery.rewrite", REWRITE, POOL],
        ["org/apache/lucene/util/compress/LZ4.decompress", FETCH, POOL],
        ["java/util/HashMap.getNode", POOL],
        [],
    ]
    counts = categorise(stacks)
    assert counts == {"kNN search (HNSW, exact)": 1, "Lucene query rewrite": 1,
                      "fetch: stored fields and _source filtering": 1, "other": 2}
    lines = table(counts).splitlines()
    assert lines[2] == "| other | 2 | 40.0% |" and len(lines) == 2 + 4
