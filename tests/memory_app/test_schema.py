import copy
import threading
from functools import partial

import numpy as np
import pytest

from elasticsearch import helpers

from engram_core.es.schema import (
    SOURCE_WITH_VECTORS,
    IndexDefinition,
    IndexOptions,
    MemoryType,
    alias_name,
    ensure_indices,
    index_base,
    index_definition,
    indices_present,
)
from engram_core.es.prefixes import scratch_prefix, shared_prefix
from tenants.models import Tenant
from tenants.selectors import index_prefix_for


def test_a_scratch_prefix_names_every_index_inside_its_block_and_its_own_context_only(settings):
    settings.ES_INDEX_PREFIX = "real"
    elsewhere = {}
    with scratch_prefix("real-eval-1"):
        assert shared_prefix() == "real-eval-1"
        assert alias_name(MemoryType.EPISODIC) == "real-eval-1-episodic"
        assert index_base() == "real-eval-1-memories"
        assert index_prefix_for(tenant=Tenant(slug="Acme", isolation="dedicated")) == "real-eval-1-t-acme"
        # Another thread (a request being served meanwhile) keeps the real prefix.
        thread = threading.Thread(target=lambda: elsewhere.update(prefix=shared_prefix()))
        thread.start()
        thread.join()
        with scratch_prefix("inner"):
            assert alias_name(MemoryType.SEMANTIC) == "inner-semantic"
        assert shared_prefix() == "real-eval-1"
    assert shared_prefix() == "real" and elsewhere == {"prefix": "real"}
    assert index_prefix_for(tenant=Tenant(slug="acme", isolation="shared")) == "real"


def test_setup_is_idempotent(es_admin, es_prefix):
    again = ensure_indices(es=es_admin)
    assert [r.action for r in again] == ["unchanged"] * len(MemoryType)
    assert {r.index for r in again} == {f"{index_base()}-v1"}
    assert indices_present(es=es_admin) == {t.value: True for t in MemoryType}


def test_every_type_alias_leads_to_one_index_and_sees_its_own_type(es_admin, es_prefix):
    """One index, one shard: a search through all four aliases is one shard request; each alias's
    filter keeps a search through it to its type, while a get by id through any alias finds the
    document (Elasticsearch applies no alias filter there, which the readers check)."""
    aliases = [alias_name(t) for t in MemoryType]
    assert set(es_admin.indices.get_alias(name=",".join(aliases))) == {f"{index_base()}-v1"}
    dims = index_definition(options=IndexOptions.from_settings()).body["mappings"]["properties"]["embedding"]["dims"]
    for n, memory_type in enumerate(MemoryType):
        es_admin.index(index=alias_name(memory_type), id=f"doc-{n}", refresh="wait_for", document={
            "tenant_id": "t1", "memory_type": memory_type.value, "text": "the same words",
            "embedding": [1.0] + [0.0] * (dims - 1)})
    for n, memory_type in enumerate(MemoryType):
        hits = es_admin.search(index=alias_name(memory_type), query={"match": {"text": "words"}})["hits"]["hits"]
        assert [h["_id"] for h in hits] == [f"doc-{n}"]
    everything = es_admin.search(index=",".join(aliases), query={"match": {"text": "words"}})
    assert everything["hits"]["total"]["value"] == len(MemoryType) and everything["_shards"]["total"] == 1
    assert es_admin.get(index=alias_name(MemoryType.CATALOG), id="doc-0")["_source"]["memory_type"] == "episodic"


def test_vectors_are_flat_and_graph_options_are_written_only_for_a_graph(settings):
    """Vectors are searched exactly by default (no graph). m and ef_construction left at 0 are
    Elasticsearch's defaults and absent from the mapping, so an index made before the settings
    existed keeps its schema hash; a flat type never carries them (Elasticsearch refuses them)."""
    def options():
        properties = index_definition(options=IndexOptions.from_settings()).body["mappings"]["properties"]
        return properties["embedding"]["index_options"], index_definition(options=IndexOptions.from_settings()).schema_hash

    default, default_hash = options()
    assert default == {"type": "flat"}
    settings.ENGRAM_HNSW_EF_CONSTRUCTION, settings.ENGRAM_HNSW_M = 50, 24
    assert options() == (default, default_hash)
    settings.ENGRAM_VECTOR_INDEX_TYPE = "hnsw"
    tuned, tuned_hash = options()
    assert tuned == {"type": "hnsw", "m": 24, "ef_construction": 50} and tuned_hash != default_hash
    passages = index_definition(options=IndexOptions.from_settings()).body["mappings"]["properties"]["passages"]
    assert passages["properties"]["embedding"]["index_options"] == tuned


def test_mapping_change_migrates_every_document(es_admin, es_prefix):
    alias = alias_name(MemoryType.SEMANTIC)
    dims = index_definition(options=IndexOptions.from_settings()).body["mappings"]["properties"]["embedding"]["dims"]
    docs = [
        {"_index": alias, "_id": f"doc-{n}", "_source": {
            "tenant_id": "t1", "user_id": f"user-{n % 3}", "memory_type": "semantic",
            "text": f"fact number {n}", "embedding": [1.0] + [0.0] * (dims - 1), "use_count": n}}
        for n in range(1234)
    ]
    helpers.bulk(es_admin, docs, refresh="wait_for")

    changed = copy.deepcopy(index_definition(options=IndexOptions.from_settings()).body)
    changed["mappings"]["properties"]["topic"] = {"type": "keyword"}
    results = ensure_indices(es=es_admin, definition=IndexDefinition(changed))

    semantic = next(r for r in results if r.alias == alias)
    assert (semantic.action, semantic.copied) == ("migrated", 1234)
    assert semantic.index == f"{index_base()}-v2"
    assert {r.copied for r in results if r.alias != alias} == {0}
    assert list(es_admin.indices.get_alias(name=alias)) == [f"{index_base()}-v2"]
    assert not es_admin.indices.exists(index=f"{index_base()}-v1")
    assert es_admin.count(index=alias)["count"] == 1234
    got = es_admin.mget(index=alias, ids=["doc-0", "doc-1233"])["docs"]
    assert [d["_source"]["text"] for d in got] == ["fact number 0", "fact number 1233"]
    # The vectors came along (Elasticsearch 9 leaves them out of a returned _source by default):
    # every copy is still found by a kNN search.
    assert es_admin.count(index=alias, query={"exists": {"field": "embedding"}})["count"] == 1234
    knn = es_admin.search(index=alias, knn={"field": "embedding", "query_vector": [1.0] + [0.0] * (dims - 1),
                                            "k": 5, "num_candidates": 50}, size=5)
    assert len(knn["hits"]["hits"]) == 5
    assert "topic" in es_admin.indices.get_mapping(index=alias)[f"{index_base()}-v2"]["mappings"]["properties"]
    # Running the changed setup again is a no-op.
    rerun = ensure_indices(es=es_admin, definition=IndexDefinition(changed))
    assert {r.action for r in rerun} == {"unchanged"}


def test_the_earlier_layout_of_one_index_per_type_is_migrated_into_one(es_admin, es_prefix):
    """Indices of the release before (``<prefix>-<type>-v<N>``, unfiltered aliases) are copied into
    the one index with their vectors, the aliases move at once, and the old indices are dropped."""
    from engram_core.es.schema import drop_indices

    from memory_app.providers import get_embedder

    drop_indices(es=es_admin, prefix=es_prefix)
    body = copy.deepcopy(index_definition(options=IndexOptions.from_settings()).body)
    body["mappings"]["_meta"] = {"engram_vector_space": get_embedder().space}
    dims = body["mappings"]["properties"]["embedding"]["dims"]
    for n, memory_type in enumerate(MemoryType):
        alias = alias_name(memory_type)
        es_admin.indices.create(index=f"{alias}-v3", aliases={alias: {"is_write_index": True}}, **body)
        helpers.bulk(es_admin, [{"_index": alias, "_id": f"{memory_type.value}-{i}", "_source": {
            "tenant_id": "t1", "user_id": "u1", "memory_type": memory_type.value, "text": f"memory {i}",
            "embedding": [1.0] + [0.0] * (dims - 1)}} for i in range(n + 2)], refresh="wait_for")
    results = {r.alias: r for r in ensure_indices(es=es_admin)}
    for n, memory_type in enumerate(MemoryType):
        alias = alias_name(memory_type)
        assert (results[alias].action, results[alias].copied) == ("migrated", n + 2)
        assert not es_admin.indices.exists(index=f"{alias}-v3")
        assert es_admin.count(index=alias)["count"] == n + 2
        assert es_admin.count(index=alias, query={"exists": {"field": "embedding"}})["count"] == n + 2
    assert set(es_admin.indices.get_alias(name=",".join(results))) == {f"{index_base()}-v1"}
    assert {r.action for r in ensure_indices(es=es_admin)} == {"unchanged"}


def test_an_index_of_graph_vectors_is_migrated_to_exact_ones(es_admin, es_prefix, settings):
    """The release before wrote HNSW graph vectors; ``es_setup`` on this release copies its
    documents, vectors and sentence vectors included, into a flat index, where a kNN search
    scores them exactly (cosine 1 is Elasticsearch's score 1.0)."""
    from engram_core.es.schema import drop_indices
    from memory_app.recall.options import RecallOptions
    from memory_app.recall.search import knn_clause, passage_query

    drop_indices(es=es_admin, prefix=es_prefix)
    settings.ENGRAM_VECTOR_INDEX_TYPE = "hnsw"
    ensure_indices(es=es_admin)
    alias = alias_name(MemoryType.EPISODIC)
    before = es_admin.indices.get_mapping(index=alias)[f"{index_base()}-v1"]["mappings"]["properties"]
    assert before["embedding"]["index_options"]["type"] == "hnsw"
    dims = index_definition(options=IndexOptions.from_settings()).body["mappings"]["properties"]["embedding"]["dims"]
    unit = [1.0] + [0.0] * (dims - 1)
    helpers.bulk(es_admin, [{"_index": alias, "_id": f"ep-{i}", "_source": {
        "tenant_id": "t1", "user_id": "u1", "memory_type": "episodic", "text": f"turn {i}. And more.",
        "embedding": unit if i == 0 else [0.0, 1.0] + [0.0] * (dims - 2),
        "passages": [{"embedding": unit}, {"embedding": [0.0, 0.0, 1.0] + [0.0] * (dims - 3)}]}}
        for i in range(3)], refresh="wait_for")

    settings.ENGRAM_VECTOR_INDEX_TYPE = "flat"
    results = ensure_indices(es=es_admin)
    assert {(r.action, r.index) for r in results} == {("migrated", f"{index_base()}-v2")}
    properties = es_admin.indices.get_mapping(index=alias)[f"{index_base()}-v2"]["mappings"]["properties"]
    assert properties["embedding"]["index_options"] == {"type": "flat"}
    assert properties["passages"]["properties"]["embedding"]["index_options"] == {"type": "flat"}
    # The recall's own clauses (memory_app.recall.search), unscoped: the test's documents are all there is.
    options = RecallOptions.from_settings()
    own = es_admin.search(index=alias, size=3,
                          query={"knn": knn_clause(field="embedding", vector=unit, filters=[], options=options)})
    assert [(h["_id"], h["_score"]) for h in own["hits"]["hits"]][0] == ("ep-0", 1.0)
    by_passage = es_admin.search(index=alias, size=3, query=passage_query(vector=unit, filters=[], options=options))
    assert sorted((h["_id"], h["_score"]) for h in by_passage["hits"]["hits"]) == [
        ("ep-0", 1.0), ("ep-1", 1.0), ("ep-2", 1.0)]
    assert {r.action for r in ensure_indices(es=es_admin)} == {"unchanged"}


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


def _episode_source(subject, **fields) -> dict:
    dims = index_definition(options=IndexOptions.from_settings()).body["mappings"]["properties"]["embedding"]["dims"]
    return {"tenant_id": subject.tenant.slug, "user_id": str(subject.user_id), "memory_type": "episodic",
            "embedding": [1.0] + [0.0] * (dims - 1), **fields}


def _store_then_migrate(es_admin, docs: dict[str, dict], rekey) -> None:
    """Store ``docs`` (id -> source) in the episodic index as an earlier release left them, then
    migrate the index (a mapping change) through ``rekey``, as es_setup does."""
    alias = alias_name(MemoryType.EPISODIC)
    helpers.bulk(es_admin, [{"_index": alias, "_id": i, "_source": src} for i, src in docs.items()],
                 refresh="wait_for")
    changed = copy.deepcopy(index_definition(options=IndexOptions.from_settings()).body)
    changed["mappings"]["properties"]["topic"] = {"type": "keyword"}
    ensure_indices(es=es_admin, definition=IndexDefinition(changed), rekey=rekey)


def test_setup_migrates_raw_client_ids_into_the_end_users_namespace(es_admin, es_prefix, make_subject):
    from memory_app.services.migration import client_id_rekey
    from memory_app.services.store import client_memory_id

    subject = make_subject("alice")
    alias = alias_name(MemoryType.EPISODIC)
    source = _episode_source(subject, text="imported long ago", source="import")
    server_id = "0123456789abcdef0123456789abcdef-3"
    _store_then_migrate(es_admin, {"raw-client-id": source, server_id: source}, client_id_rekey)
    new_id = client_memory_id(tenant_id=subject.tenant_id, external_id="alice", client_id="raw-client-id")
    got = {d["_id"]: d for d in es_admin.mget(index=alias, ids=["raw-client-id", new_id, server_id])["docs"]}
    assert not got["raw-client-id"]["found"] and got[server_id]["found"]
    assert got[new_id]["_source"]["client_id"] == "raw-client-id"


def test_setup_gives_memories_stored_before_concepts_theirs(es_admin, es_prefix, make_subject):
    from memory_app.providers import concepts_of  # with the configured options, as a write reads them
    from memory_app.services.migration import migration_rekey

    subject = make_subject("alice")
    source = _episode_source(subject, text="We flew to Lisbon in May.", source="agent")
    kept = {**source, "text": "Just a violin.", "concepts": "kept as stored"}
    _store_then_migrate(es_admin, {"0" * 32: source, "1" * 32: kept}, partial(migration_rekey, concepts=True))
    alias = alias_name(MemoryType.EPISODIC)
    got = {d["_id"]: d["_source"] for d in es_admin.mget(index=alias, ids=["0" * 32, "1" * 32])["docs"]}
    assert got["0" * 32]["concepts"] == concepts_of("We flew to Lisbon in May.") and "city" in got["0" * 32]["concepts"]
    assert got["1" * 32]["concepts"] == "kept as stored"


def test_setup_migrates_episodes_that_name_times_the_calendar_cannot_hold(es_admin, es_prefix, make_subject):
    from memory_app.services.migration import migration_rekey

    subject = make_subject("alice")
    texts = {"0" * 32: "The castle near us was built 4500 years ago.", "1" * 32: "That was 1000000 days ago",
             "2" * 32: "In 10000 years nobody will remember this, we said last Friday."}
    docs = {i: _episode_source(subject, text=t, source="agent", occurred_at="2026-12-04T10:00:00+00:00")
            for i, t in texts.items()}
    _store_then_migrate(es_admin, docs, partial(migration_rekey, concepts=True))
    got = {d["_id"]: d["_source"] for d in es_admin.mget(index=alias_name(MemoryType.EPISODIC), ids=list(docs))["docs"]}
    assert {i: src["text"] for i, src in got.items()} == texts  # every one migrated, none lost
    assert got["0" * 32]["event_dates"] is None and got["1" * 32]["event_dates"] is None  # named nothing it can hold
    assert got["2" * 32]["event_dates"] == [{"gte": "2026-11-27", "lt": "2026-11-28"}]  # "last Friday" still read


def _vectors(es_admin, memory_type, ids):
    hits = es_admin.search(index=alias_name(memory_type), query={"ids": {"values": ids}}, size=len(ids),
                           source=SOURCE_WITH_VECTORS)["hits"]["hits"]
    return {h["_id"]: (h["_source"]["embedding"], [p["embedding"] for p in h["_source"].get("passages", [])])
            for h in hits}


def test_each_index_records_the_vector_space_of_its_embedder(es_admin, es_prefix):
    from memory_app.providers import get_embedder

    space = get_embedder().space
    for memory_type in MemoryType:
        alias = alias_name(memory_type)
        meta = next(iter(es_admin.indices.get_mapping(index=alias).values()))["mappings"]["_meta"]
        assert meta["engram_vector_space"] == space


def test_an_index_without_a_record_is_taken_as_float_minilm_and_stamped(es_admin, es_prefix, settings):
    from engram_core.es.vectors import UNRECORDED_SPACE
    from memory_app.providers import clear_cache

    # An index written before the record existed, by that release's default (float MiniLM).
    settings.ENGRAM_EMBEDDER_RUNTIME = "onnx"
    clear_cache()
    alias = alias_name(MemoryType.SEMANTIC)
    index = next(iter(es_admin.indices.get_alias(name=alias)))
    schema_hash = es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]["engram_schema_hash"]
    es_admin.indices.put_mapping(index=index, meta={"engram_schema_hash": schema_hash})
    assert "engram_vector_space" not in es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
    try:
        results = {r.alias: r for r in ensure_indices(es=es_admin)}
        assert results[alias].action == "unchanged" and results[alias].index == index  # no copy
        meta = es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
        assert meta == {"engram_schema_hash": schema_hash, "engram_vector_space": UNRECORDED_SPACE}
    finally:
        clear_cache()


def test_a_new_embedder_gets_every_vector_computed_again_by_setup(es_admin, es_prefix, make_subject, settings):
    """Indices written with float weights, then set up with int8 ones: every vector (episodes with
    derived and explicit context and their passages, facts, playbooks, catalog entries) is what a
    write with the new embedder gives, and recall finds the memories with the new query vectors."""
    from memory_app.services.episodes import episode_write
    from memory_app.services.facts import catalog_entry_write, fact_write, playbook_write
    from memory_app.providers import clear_cache, get_embedder
    from memory_app.recall import memory_recall

    settings.ENGRAM_EMBEDDER_RUNTIME = "onnx"
    clear_cache()
    subject = make_subject("alice")
    float_space = get_embedder().space
    for memory_type in MemoryType:  # as if created by the float embedder
        index = next(iter(es_admin.indices.get_alias(name=alias_name(memory_type))))
        meta = es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
        es_admin.indices.put_mapping(index=index, meta={**meta, "engram_vector_space": float_space})
    texts = ["We are planning a trip to Lisbon in May.", "Book the hotel near the river. Ask for a quiet room.",
             "The budget is two thousand euros."]
    turns = [episode_write(subject=subject, text=t, session_id="s1",
                           occurred_at=f"2025-03-01T10:0{n}:00Z") for n, t in enumerate(texts)]
    explicit = episode_write(subject=subject, text="Yes, the blue one.", context="Which suitcase?",
                             session_id="s2")
    fact = fact_write(subject=subject, text="Alice is allergic to peanuts.")
    playbook = playbook_write(subject=subject, trigger="user asks for a refund",
                              steps="check the order; refund to the card")
    entry = catalog_entry_write(tenant=subject.tenant, title="Opening hours", text="Open 9 to 5 on weekdays.")
    episode_ids = [t["id"] for t in turns] + [explicit["id"]]
    assert turns[2]["context_ids"] == [turns[0]["id"], turns[1]["id"]]

    settings.ENGRAM_EMBEDDER_RUNTIME = "onnx-int8"
    clear_cache()
    int8_space = get_embedder().space
    assert int8_space != float_space
    # What writes with the int8 embedder store, computed the way the write path does.
    from memory_app.services import context as derived
    expected_episodes = derived.episode_vectors(
        [(texts[0], []), (texts[1], [texts[0]]), (texts[2], texts[:2]), ("Yes, the blue one.", ["Which suitcase?"])],
        options=derived.ContextOptions.from_settings())
    embedder = get_embedder()

    results = {r.alias: r for r in ensure_indices(es=es_admin)}
    for memory_type in MemoryType:
        result = results[alias_name(memory_type)]
        assert (result.action, result.revectored) == ("migrated", True), memory_type
        meta = next(iter(es_admin.indices.get_mapping(index=alias_name(memory_type)).values()))["mappings"]["_meta"]
        assert meta["engram_vector_space"] == int8_space
    stored = _vectors(es_admin, MemoryType.EPISODIC, episode_ids)
    for memory_id, want in zip(episode_ids, expected_episodes, strict=True):
        vector, passages = stored[memory_id]
        np.testing.assert_allclose(vector, want["embedding"], atol=1e-5)
        assert len(passages) == len(want.get("passages", []))
        for got, expected in zip(passages, want.get("passages", []), strict=True):
            np.testing.assert_allclose(got, expected["embedding"], atol=1e-5)
    assert len(stored[turns[1]["id"]][1]) == 2  # the two-sentence turn kept its passage vectors
    for memory_type, memory_id, text in [
        (MemoryType.SEMANTIC, fact["id"], "Alice is allergic to peanuts."),
        (MemoryType.PROCEDURAL, playbook["id"], "user asks for a refund\ncheck the order; refund to the card"),
        (MemoryType.CATALOG, entry["id"], "Opening hours\nOpen 9 to 5 on weekdays."),
    ]:
        vector, _ = _vectors(es_admin, memory_type, [memory_id])[memory_id]
        np.testing.assert_allclose(vector, embedder.embed_documents([text])[0], atol=1e-5)
    # The text and everything else came along unchanged, and recall works on the new vectors.
    got = es_admin.get(index=alias_name(MemoryType.EPISODIC), id=turns[2]["id"])["_source"]
    assert (got["text"], got["context_ids"]) == (texts[2], turns[2]["context_ids"])
    hits = memory_recall(subject=subject, query="How much money can we spend on the Lisbon trip?")
    assert turns[2]["id"] in [h["id"] for h in hits[:3]]
    assert {r.action for r in ensure_indices(es=es_admin)} == {"unchanged"}


def test_a_new_refresh_interval_is_set_on_the_live_index_without_a_copy(es_admin, es_prefix, settings):
    """The refresh interval is a dynamic setting: changing it (or upgrading from a release whose
    schema hash included it) sets it on the current index, with no new version and no copy."""
    index = f"{index_base()}-v1"
    # As a release before 2026-12-01 left it: created at 250ms, its hash over the whole body.
    legacy = index_definition(options=IndexOptions.from_settings()).legacy_hash(replicas=0, refresh_interval="250ms")
    assert legacy != index_definition(options=IndexOptions.from_settings()).schema_hash
    es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": "250ms"})
    recorded = es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
    es_admin.indices.put_mapping(index=index, meta={**recorded, "engram_schema_hash": legacy})
    configured = settings.ES_REFRESH_INTERVAL
    try:
        settings.ES_REFRESH_INTERVAL = "3s"
        results = ensure_indices(es=es_admin)
        assert {(r.action, r.index) for r in results} == {("unchanged", index)}
        live = es_admin.indices.get_settings(index=index)[index]["settings"]["index"]
        assert live["refresh_interval"] == "3s"
        meta = es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
        assert meta["engram_schema_hash"] == index_definition(options=IndexOptions.from_settings()).schema_hash
        # Set again: nothing left to change.
        assert {r.action for r in ensure_indices(es=es_admin)} == {"unchanged"}
    finally:
        es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": configured})


def test_replicas_are_set_on_the_live_index_and_an_earlier_releases_hash_is_recognised(es_admin, es_prefix,
                                                                                       settings):
    """Replicas are dynamic: an index whose hash has its replica count in it (the release before
    replicas left the hash) is current, and a new count is set in place, with no copy."""
    index = f"{index_base()}-v1"
    live = es_admin.indices.get_settings(index=index)[index]["settings"]["index"]
    assert live["auto_expand_replicas"] == "0-1"  # the default, "auto"
    recorded = es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
    es_admin.indices.put_mapping(index=index, meta={**recorded,
                                                    "engram_schema_hash": index_definition(options=IndexOptions.from_settings()).legacy_hash(replicas=0)})
    settings.ES_NUMBER_OF_REPLICAS = "0"
    assert {(r.action, r.index) for r in ensure_indices(es=es_admin)} == {("unchanged", index)}
    live = es_admin.indices.get_settings(index=index)[index]["settings"]["index"]
    assert (live["number_of_replicas"], live["auto_expand_replicas"]) == ("0", "false")
    assert es_admin.indices.get_mapping(index=index)[index]["mappings"]["_meta"]["engram_schema_hash"] \
        == index_definition(options=IndexOptions.from_settings()).schema_hash
    settings.ES_NUMBER_OF_REPLICAS = "auto"
    assert {(r.action, r.index) for r in ensure_indices(es=es_admin)} == {("unchanged", index)}
    assert es_admin.indices.get_settings(index=index)[index]["settings"]["index"]["auto_expand_replicas"] == "0-1"


def test_replica_settings():
    from django.core.exceptions import ImproperlyConfigured

    from engram_core.es.schema import replica_settings

    assert replica_settings("auto") == {"auto_expand_replicas": "0-1"}
    assert replica_settings("2") == {"number_of_replicas": "2", "auto_expand_replicas": "false"}
    with pytest.raises(ImproperlyConfigured):
        replica_settings("-1")


def test_the_shard_count_is_part_of_the_schema_and_the_replicas_are_not(settings):
    before = index_definition(options=IndexOptions.from_settings()).schema_hash
    settings.ES_NUMBER_OF_REPLICAS = "2"
    assert index_definition(options=IndexOptions.from_settings()).schema_hash == before
    settings.ES_NUMBER_OF_SHARDS = 3
    assert index_definition(options=IndexOptions.from_settings()).schema_hash != before
    assert index_definition(options=IndexOptions.from_settings()).body["settings"]["index"]["number_of_shards"] == 3


def test_the_schema_hash_leaves_the_refresh_interval_out_but_not_the_rest(settings):
    before = index_definition(options=IndexOptions.from_settings()).schema_hash
    settings.ES_REFRESH_INTERVAL = "30s"
    assert index_definition(options=IndexOptions.from_settings()).schema_hash == before
    settings.ENGRAM_BM25_B = 0.5
    assert index_definition(options=IndexOptions.from_settings()).schema_hash != before


def test_the_refresh_settings_are_checked_together(settings):
    from memory_app.checks import refresh_settings_check

    settings.ES_REFRESH_INTERVAL, settings.ENGRAM_REFRESH_PENDING_SECONDS = "2s", 10
    assert refresh_settings_check(None) == []
    settings.ES_REFRESH_INTERVAL = "2 seconds"
    assert [e.id for e in refresh_settings_check(None)] == ["memory_app.E001"]
    settings.ES_REFRESH_INTERVAL = "-1"
    assert [e.id for e in refresh_settings_check(None)] == ["memory_app.E002"]
    settings.ES_REFRESH_INTERVAL = "10s"
    assert [e.id for e in refresh_settings_check(None)] == ["memory_app.E003"]


def test_elasticsearch_time_values_in_seconds():
    import pytest

    from engram_core.es.timeunits import es_seconds

    assert [es_seconds(v) for v in ("250ms", "2s", "1.5s", "1m", "-1")] == [0.25, 2.0, 1.5, 60.0, None]
    with pytest.raises(ValueError, match="not an Elasticsearch time value"):
        es_seconds("soon")
