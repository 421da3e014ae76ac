"""Passages in memory_app: each sentence's vector stored, searched, explained and re-embedded (language.passages, against the real Elasticsearch)."""

from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings as django_settings
from engram_core.es.schema import SOURCE_WITH_VECTORS, MemoryType, alias_name
from language.passages import passages_of
from memory_app.providers import get_embedder
from memory_app.recall.options import RecallOptions
from memory_app.recall.read import query_read
from memory_app.recall.search import Allowed, plain_legs
from memory_app.selectors import memory_get
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.forget import memory_forget
from memory_app.services.imports import episodes_import
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client

from memory_app.recall import memory_recall

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


LONG = ("Maya: Thanks for asking about the move! The boxes are finally unpacked and the kitchen works. "
        "I'm off to go swimming with the kids. Talk to you soon!")


def _unit(vector):
    vector = np.asarray(vector, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def _stored_vectors(es_admin, memory_id):
    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.refresh(index=index)
    source = es_admin.search(index=index, query={"ids": {"values": [memory_id]}},
                             source=SOURCE_WITH_VECTORS)["hits"]["hits"][0]["_source"]
    return np.asarray(source["embedding"]), [np.asarray(p["embedding"]) for p in source.get("passages", [])]


def test_each_sentence_gets_a_vector_anchored_in_its_turn_and_context_and_none_is_returned(subject, es_admin):
    before = episode_write(subject=subject, text="How was your weekend?", session_id="w1",
                           occurred_at=T0)
    turn = episode_write(subject=subject, text=LONG, session_id="w1", occurred_at=T0 + timedelta(minutes=1))
    sentences = passages_of(LONG, limit=django_settings.ENGRAM_PASSAGES_MAX)
    s = [_unit(v) for v in get_embedder().embed_documents(sentences)]
    context = _unit(get_embedder().embed_documents(["How was your weekend?"])[0])
    whole = _unit(np.sum(s, axis=0))
    embedding, passages = _stored_vectors(es_admin, turn["id"])
    assert float(_unit(embedding) @ _unit(whole + 0.5 * context)) > 0.9999
    assert len(passages) == 4
    for sentence, stored in zip(s, passages, strict=True):
        assert float(_unit(stored) @ _unit(sentence + 0.5 * whole + 0.5 * context)) > 0.9999
    # A one-sentence episode has no passages: the whole-vector search finds it with the same score.
    embedding, passages = _stored_vectors(es_admin, before["id"])
    assert len(embedding) and passages == []
    # The vectors are for search only: no response carries them.
    assert "passages" not in turn and "embedding" not in turn
    assert "passages" not in memory_get(subject=subject, memory_id=turn["id"])


def test_an_import_stores_the_same_passages_as_turns_written_one_by_one(subject, es_admin):
    one = episode_write(subject=subject, text="How was your weekend?", session_id="a", occurred_at=T0)
    two = episode_write(subject=subject, text=LONG, session_id="a", occurred_at=T0 + timedelta(minutes=1))
    imported = episodes_import(subject=subject, episodes=[
        {"text": t, "session_id": "b", "occurred_at": (T0 + timedelta(minutes=n)).isoformat()}
        for n, t in enumerate(["How was your weekend?", LONG])])
    assert one["id"] and two["id"]
    live, batch = _stored_vectors(es_admin, two["id"]), _stored_vectors(es_admin, imported[1])
    assert float(_unit(live[0]) @ _unit(batch[0])) > 0.9999
    assert all(float(_unit(a) @ _unit(b)) > 0.9999 for a, b in zip(live[1], batch[1], strict=True))


def _dense_rank(subject, query, target):
    hits = memory_recall(subject=subject, query=query, k=10, types=["episodic"], explain=True)
    return next((h["explain"]["dense_rank"] for h in hits if h["id"] == target), None)


def test_the_dense_leg_ranks_an_episode_by_its_best_sentence(subject, settings):
    """A question about one statement inside a turn that says several things: the turn's single
    vector is far from it, its sentence is near. Measured on the dense leg alone."""
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "bm25": False}
    # Chosen so that the question's cosine (MiniLM) is 0.638 and 0.603 with the first two, 0.583
    # with the long turn's single vector and 0.651 with its swimming sentence's passage.
    distractors = [
        "Maya: My kids watched a football match on TV.",
        "Maya: I play board games with my children on Sundays.",
        "Maya: The kids' bedroom needs new curtains.",
        "Maya: My son has a cold and stayed home from school.",
    ]
    for n, text in enumerate(distractors):
        episode_write(subject=subject, text=text, occurred_at=T0 + timedelta(hours=n))
    target = episode_write(subject=subject, text=LONG, occurred_at=T0 + timedelta(hours=10))["id"]
    question = "What sport does Maya do with her children?"
    with_passages = _dense_rank(subject, question, target)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "passages": False}
    whole_only = _dense_rank(subject, question, target)
    assert with_passages == 1
    assert whole_only is None or whole_only > with_passages


def test_the_dense_leg_is_one_search_scoring_each_memory_by_its_vector_or_its_best_sentence(subject, settings):
    """One search (``search.plain_legs``): kNN over every type's own vectors and, nested, over
    the episodes' sentence vectors, the larger score kept. The same hits and scores as the two
    kNN searches apart, merged by max (what recalls sent until 2026-11-27)."""
    texts = [LONG, "Maya: My kids watched a football match on TV.", "Maya: Swimming lessons start in May. I signed "
             "them up. The pool is near the school.", "Maya: The kids' bedroom needs new curtains."]
    for n, text in enumerate(texts):
        episode_write(subject=subject, text=text, occurred_at=T0 + timedelta(hours=n))
    fact_write(subject=subject, text="Maya's children swim every Saturday.")
    question = "What sport does Maya do with her children?"
    vector = get_embedder().embed_query(question)
    types = [MemoryType.EPISODIC, MemoryType.SEMANTIC]
    index_for = {t: alias_name(t) for t in types}
    es = subject_es_client(subject=subject)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "bm25": False}
    options = RecallOptions.from_settings()
    reading = query_read(query=question, name_words=frozenset(), now=T0, tz=None, options=options)
    body = plain_legs(reading=reading, vector=vector, options=options,
                      allowed=Allowed(types=types, index_for=index_for, scope=memory_scope(subject=subject)))
    [_header, search] = body
    own, passages = search["query"]["dis_max"]["queries"]
    apart = [{"index": ",".join(index_for.values())}, {"size": 80, "knn": own["knn"]},
             {"index": index_for[MemoryType.EPISODIC]}, {"size": 80, "knn": passages["nested"]["query"]["knn"]}]
    [one] = es.msearch(searches=body)["responses"]
    whole, sentences = es.msearch(searches=apart)["responses"]
    best = {hit["_id"]: hit["_score"] for hit in whole["hits"]["hits"]}
    assert len(best) == 5  # four episodes and the fact
    by_sentence = {hit["_id"] for hit in sentences["hits"]["hits"] if hit["_score"] > best[hit["_id"]]}
    assert by_sentence  # the max decides for some: the long turn's swimming sentence at least
    for hit in sentences["hits"]["hits"]:
        best[hit["_id"]] = max(best[hit["_id"]], hit["_score"])
    assert {hit["_id"]: hit["_score"] for hit in one["hits"]["hits"]} == best
    assert [hit["_id"] for hit in one["hits"]["hits"]] == sorted(best, key=lambda i: -best[i])


def test_forgetting_a_predecessor_re_embeds_every_passage_without_its_text(subject, es_admin):
    """A passage's vector holds its turn's context (see the first test), so forgetting the turn
    before re-computes the passages too, not only the episode's own vector."""
    secret = episode_write(subject=subject, text="My locker code is zanzibar.", session_id="f1",
                           occurred_at=T0)
    turn = episode_write(subject=subject, text=LONG, session_id="f1", occurred_at=T0 + timedelta(minutes=1))
    s = [_unit(v) for v in get_embedder().embed_documents(passages_of(LONG, limit=django_settings.ENGRAM_PASSAGES_MAX))]
    whole = _unit(np.sum(s, axis=0))
    context = _unit(get_embedder().embed_documents(["My locker code is zanzibar."])[0])
    _embedding, passages = _stored_vectors(es_admin, turn["id"])
    assert float(_unit(passages[0]) @ _unit(s[0] + 0.5 * whole + 0.5 * context)) > 0.9999

    memory_forget(subject=subject, memory_id=secret["id"], reason="user_request", actor="test")

    embedding, passages = _stored_vectors(es_admin, turn["id"])
    assert float(_unit(embedding) @ whole) > 0.9999
    assert len(passages) == len(s)
    for sentence, stored in zip(s, passages, strict=True):
        assert float(_unit(stored) @ _unit(sentence + 0.5 * whole)) > 0.9999


def test_explain_names_the_sentence_an_episodes_dense_rank_came_from(subject, settings):
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "bm25": False}
    target = episode_write(subject=subject, text=LONG, occurred_at=T0)["id"]
    single = episode_write(subject=subject, text="Maya: The kids' bedroom needs new curtains.",
                           occurred_at=T0 + timedelta(hours=1))["id"]
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="What sport does Maya do with her children?",
                                              k=10, types=["episodic"], explain=True)}
    assert hits[target]["explain"]["dense_sentence"] == "Maya: I'm off to go swimming with the kids."
    assert "dense_sentence" not in hits[single]["explain"]  # ranked by its own (only) vector
    # Without explain the passage search asks for no inner hits, and no hit says more.
    plain = memory_recall(subject=subject, query="What sport does Maya do with her children?", k=10, types=["episodic"])
    assert all("explain" not in h for h in plain)
