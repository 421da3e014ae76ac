import copy

from elasticsearch import helpers

from engram_core.es.schema import (
    IndexDefinition,
    MemoryType,
    alias_name,
    ensure_indices,
    index_definition,
    indices_present,
)


def test_setup_is_idempotent(es_admin, es_prefix):
    again = ensure_indices(es=es_admin)
    assert [r.action for r in again] == ["unchanged"] * len(MemoryType)
    assert all(r.index.endswith("-v1") for r in again)
    assert indices_present(es=es_admin) == {t.value: True for t in MemoryType}


def test_mapping_change_migrates_every_document(es_admin, es_prefix):
    alias = alias_name(MemoryType.SEMANTIC)
    dims = index_definition(MemoryType.SEMANTIC).body["mappings"]["properties"]["embedding"]["dims"]
    docs = [
        {"_index": alias, "_id": f"doc-{n}", "_source": {
            "tenant_id": "t1", "user_id": f"user-{n % 3}", "memory_type": "semantic",
            "text": f"fact number {n}", "embedding": [1.0] + [0.0] * (dims - 1), "use_count": n}}
        for n in range(1234)
    ]
    helpers.bulk(es_admin, docs, refresh="wait_for")

    changed = copy.deepcopy(index_definition(MemoryType.SEMANTIC).body)
    changed["mappings"]["properties"]["topic"] = {"type": "keyword"}
    results = ensure_indices(es=es_admin, definitions={MemoryType.SEMANTIC: IndexDefinition(MemoryType.SEMANTIC, changed)})

    semantic = next(r for r in results if r.alias == alias)
    assert (semantic.action, semantic.copied) == ("migrated", 1234)
    assert semantic.index == f"{alias}-v2"
    assert list(es_admin.indices.get_alias(name=alias)) == [f"{alias}-v2"]
    assert not es_admin.indices.exists(index=f"{alias}-v1")
    assert es_admin.count(index=alias)["count"] == 1234
    got = es_admin.mget(index=alias, ids=["doc-0", "doc-1233"])["docs"]
    assert [d["_source"]["text"] for d in got] == ["fact number 0", "fact number 1233"]
    # The vectors came along (Elasticsearch 9 leaves them out of a returned _source by default):
    # every copy is still found by a kNN search.
    assert es_admin.count(index=alias, query={"exists": {"field": "embedding"}})["count"] == 1234
    knn = es_admin.search(index=alias, knn={"field": "embedding", "query_vector": [1.0] + [0.0] * (dims - 1),
                                            "k": 5, "num_candidates": 50}, size=5)
    assert len(knn["hits"]["hits"]) == 5
    assert "topic" in es_admin.indices.get_mapping(index=alias)[f"{alias}-v2"]["mappings"]["properties"]
    # The other types were untouched, and running the changed setup again is a no-op.
    assert {r.action for r in results if r.alias != alias} == {"unchanged"}
    rerun = ensure_indices(es=es_admin, definitions={MemoryType.SEMANTIC: IndexDefinition(MemoryType.SEMANTIC, changed)})
    assert {r.action for r in rerun} == {"unchanged"}


def test_strict_mapping_rejects_unknown_fields(es_admin, es_prefix):
    import pytest
    from elasticsearch import BadRequestError

    with pytest.raises(BadRequestError) as exc:
        es_admin.index(index=alias_name(MemoryType.EPISODIC), document={"tenant_id": "t", "bogus": 1})
    assert "strict_dynamic_mapping_exception" in str(exc.value)


def test_english_analysis_stems_and_drops_stop_words(es_admin, es_prefix):
    tokens = es_admin.indices.analyze(index=alias_name(MemoryType.SEMANTIC), field="text",
                                      text="The dogs' owners were running to the Café")["tokens"]
    assert [t["token"] for t in tokens] == ["dog", "owner", "were", "run", "cafe"]


def test_setup_migrates_raw_client_ids_into_the_end_users_namespace(es_admin, es_prefix, make_subject):
    from memory_app.services import client_id_rekey, client_memory_id

    subject = make_subject("alice")
    alias = alias_name(MemoryType.EPISODIC)
    dims = index_definition(MemoryType.EPISODIC).body["mappings"]["properties"]["embedding"]["dims"]
    source = {"tenant_id": subject.tenant.slug, "user_id": str(subject.user_id), "memory_type": "episodic",
              "text": "imported long ago", "source": "import", "embedding": [1.0] + [0.0] * (dims - 1)}
    server_id = "0123456789abcdef0123456789abcdef-3"
    helpers.bulk(es_admin, [{"_index": alias, "_id": "raw-client-id", "_source": source},
                            {"_index": alias, "_id": server_id, "_source": source}], refresh="wait_for")
    changed = copy.deepcopy(index_definition(MemoryType.EPISODIC).body)
    changed["mappings"]["properties"]["topic"] = {"type": "keyword"}
    ensure_indices(es=es_admin, definitions={MemoryType.EPISODIC: IndexDefinition(MemoryType.EPISODIC, changed)},
                   rekey=client_id_rekey)
    new_id = client_memory_id(tenant_id=subject.tenant_id, external_id="alice", client_id="raw-client-id")
    got = {d["_id"]: d for d in es_admin.mget(index=alias, ids=["raw-client-id", new_id, server_id])["docs"]}
    assert not got["raw-client-id"]["found"] and got[server_id]["found"]
    assert got[new_id]["_source"]["client_id"] == "raw-client-id"
