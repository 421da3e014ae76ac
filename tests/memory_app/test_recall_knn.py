"""The dense leg's kNN clause against the real node: the scope filter runs inside the HNSW search."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engram_core.es.schema import MemoryType, alias_name
from memory_app import recall as rc
from memory_app.embeddings import get_embedder
from memory_app.services.imports import episodes_import
from tenants.selectors import memory_scope


def test_knn_filter_is_applied_inside_the_knn_search(make_subject, es_admin, settings):
    settings.ENGRAM_RECALL_BM25 = False
    settings.ENGRAM_RECALL_CANDIDATES = 5
    settings.ENGRAM_RECALL_NUM_CANDIDATES = 10
    alice, bob = make_subject("alice"), make_subject("bob")
    day = datetime(2025, 3, 1, tzinfo=UTC)
    # Bob holds 60 near-copies of the question; Alice one unrelated episode of two sentences (so it
    # has passages, memory_app.language.passages). A filter applied after the kNN search (post_filter, or a
    # query beside knn) would see only Bob's 10 nearest.
    episodes_import(subject=bob, episodes=[
        {"text": f"The garage door sensor battery is low again ({i})", "occurred_at": (day + timedelta(hours=i)).isoformat()}
        for i in range(60)])
    [own] = episodes_import(subject=alice, episodes=[
        {"text": "I planted tomatoes in the back garden. The soil was dry.", "occurred_at": day.isoformat()}])
    query = "garage door sensor battery low"
    body = rc.msearch_body(types=[MemoryType.EPISODIC], query=query, vector=get_embedder().embed_query(query),
                           scope=memory_scope(subject=alice), include_superseded=False, since=None, until=None,
                           index_for={MemoryType.EPISODIC: alias_name(MemoryType.EPISODIC)})
    # The dense leg: kNN over the memories' own vectors and over the episodes' sentences
    # (memory_app.language.passages), each with the scope filter inside the kNN query.
    [_header, search] = body
    own_vectors, passages = search["query"]["dis_max"]["queries"]
    assert passages["nested"]["query"]["knn"]["field"] == "passages.embedding"
    for knn in (own_vectors["knn"], passages["nested"]["query"]["knn"]):
        assert knn["filter"]
    assert "post_filter" not in search and "knn" not in search
    # Through the admin credential, so no DLS key hides Bob's documents: only the clause filters.
    [response] = es_admin.msearch(searches=body)["responses"]
    assert [hit["_id"] for hit in response["hits"]["hits"]] == [own]
    # Each kNN query on its own finds Alice's episode too (her sentences, then her whole vector).
    for knn in (passages, own_vectors):
        alone = [_header, {**search, "query": knn}]
        [response] = es_admin.msearch(searches=alone)["responses"]
        assert [hit["_id"] for hit in response["hits"]["hits"]] == [own]
