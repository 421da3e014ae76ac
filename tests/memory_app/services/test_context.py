"""Derived episode context: turns, imports and forget (real Elasticsearch)."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from engram_core.es.schema import MemoryType, alias_name
from memory_app.providers import get_embedder
from memory_app.selectors import memory_get, subject_export
from memory_app.services.context import ContextOptions, episode_vectors
from memory_app.services.episodes import episode_write
from memory_app.services.forget import memory_forget, subject_erase
from memory_app.services.imports import episodes_import
from memory_app.recall import memory_recall
from memory_app.validation import Limits
from tenants.services.keys import KeyLifetimes

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


def _turns(subject, texts, *, session_id="s1", start=T0):
    return [episode_write(subject=subject, text=t, session_id=session_id,
                          occurred_at=start + timedelta(minutes=n)) for n, t in enumerate(texts)]


def _stored(es_admin, memory_id):
    return es_admin.get(index=alias_name(MemoryType.EPISODIC), id=memory_id)["_source"]


def test_a_turn_gets_the_two_preceding_turns_of_its_session_as_context(subject, es_admin, settings):
    a, b, c, d = _turns(subject, ["Which dog breed sheds least?", "I adopted a poodle named Biscuit.",
                                  "She loves the lake.", "Yes, every Sunday."])
    other = episode_write(subject=subject, text="Unrelated session.", session_id="s2",
                          occurred_at=T0 + timedelta(minutes=9))
    assert a.get("context_ids") is None
    assert c["context_ids"] == [a["id"], b["id"]]
    assert d["context_ids"] == [b["id"], c["id"]]
    assert _stored(es_admin, d["id"])["derived_context"] == "I adopted a poodle named Biscuit.\nShe loves the lake."
    assert other.get("context_ids") is None  # never crosses sessions
    # Indexed but never returned: not by the write, a read, recall or the export.
    assert "derived_context" not in d
    assert "derived_context" not in memory_get(subject=subject, memory_id=d["id"])
    assert all("derived_context" not in e for e in subject_export(subject=subject)["memories"]["episodic"])
    question = "Where does Biscuit the poodle go swimming?"
    hits = memory_recall(subject=subject, query=question, explain=True)
    assert all("derived_context" not in h for h in hits)
    # The short reply is found by what it answers: its own words say nothing about poodles, yet the
    # lexical leg finds it through the turns stored as its context.
    assert next(h for h in hits if h["id"] == d["id"])["explain"]["bm25_rank"] is not None
    # Under rank fusion it ranks among the first three of these five. Linear fusion's min-max gives
    # the lexical leg's weakest matches 0, and here the reply and c tie at that minimum (both hold
    # the words only in their context), so it ranks lower: a corpus this small has no weaker match.
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "fusion": "rrf"}
    assert d["id"] in [h["id"] for h in memory_recall(subject=subject, query=question)[:3]]


def test_order_is_occurred_at_then_arrival_and_explicit_context_wins(subject):
    late = _turns(subject, ["second said"], start=T0)[0]
    early = episode_write(subject=subject, text="first said", session_id="s1",
                          occurred_at=T0 - timedelta(minutes=5))
    assert early.get("context_ids") is None  # occurred before everything stored
    same_time = episode_write(subject=subject, text="same minute", session_id="s1", occurred_at=T0)
    assert same_time["context_ids"] == [early["id"], late["id"]]  # equal occurred_at: arrival decides
    explicit = episode_write(subject=subject, text="reply", session_id="s1", context="what I was asked",
                             occurred_at=T0 + timedelta(minutes=3))
    assert explicit["context"] == "what I was asked" and explicit.get("context_ids") is None
    no_session = episode_write(subject=subject, text="loose", occurred_at=T0 + timedelta(minutes=4))
    assert no_session.get("context_ids") is None


def test_import_derives_context_within_the_batch_and_against_stored_episodes(subject, es_admin):
    stored = _turns(subject, ["Stored one about kayaks.", "Stored two about rivers."])
    ids = episodes_import(subject=subject, episodes=[
        {"id": "imp-000003", "text": "Batch three.", "session_id": "s1",
         "occurred_at": (T0 + timedelta(minutes=5)).isoformat()},
        {"id": "imp-000002", "text": "Batch two, earlier.", "session_id": "s1",
         "occurred_at": (T0 + timedelta(minutes=4)).isoformat()},
        {"id": "imp-000004", "text": "Batch four.", "session_id": "s1", "context": "explicit words",
         "occurred_at": (T0 + timedelta(minutes=6)).isoformat()},
        {"id": "imp-000005", "text": "Batch five.", "session_id": "s1",
         "occurred_at": (T0 + timedelta(minutes=7)).isoformat()},
        {"id": "imp-other1", "text": "Other session.", "session_id": "s9",
         "occurred_at": (T0 + timedelta(minutes=7)).isoformat()},
    ])
    # Client ids are namespaced per end-user: the import answers the stored ids, in input order.
    sid = dict(zip(["imp-000003", "imp-000002", "imp-000004", "imp-000005", "imp-other1"], ids, strict=True))
    assert _stored(es_admin, sid["imp-000002"])["context_ids"] == [stored[0]["id"], stored[1]["id"]]
    assert _stored(es_admin, sid["imp-000002"])["derived_context"] == \
        "Stored one about kayaks.\nStored two about rivers."
    assert _stored(es_admin, sid["imp-000003"])["context_ids"] == [stored[1]["id"], sid["imp-000002"]]
    assert _stored(es_admin, sid["imp-000004"])["context"] == "explicit words"
    assert "context_ids" not in _stored(es_admin, sid["imp-000004"])
    # An episode with explicit context still precedes later ones.
    assert _stored(es_admin, sid["imp-000005"])["context_ids"] == [sid["imp-000003"], sid["imp-000004"]]
    assert "context_ids" not in _stored(es_admin, sid["imp-other1"])


def test_forgetting_a_turn_removes_its_text_from_the_following_turns_context(subject, es_admin):
    one, two, three, four = _turns(subject, ["My locker code is zanzibar.", "Noted, thanks.",
                                             "Anything else?", "No."])
    assert "zanzibar" in _stored(es_admin, two["id"])["derived_context"]
    assert "My locker code is zanzibar." in get_embedder().query_cache  # embedded through the cache
    memory_forget(subject=subject, memory_id=one["id"], reason="user_request", actor="test")
    # Nor does this process keep its vector (the cache holds digests, never texts; see test_embeddings).
    assert "My locker code is zanzibar." not in get_embedder().query_cache

    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.refresh(index=index)
    found = es_admin.search(index=index, query={"multi_match": {"query": "zanzibar",
                                                                "fields": ["text", "context", "derived_context"]}})
    assert found["hits"]["total"]["value"] == 0
    after_two, after_three = _stored(es_admin, two["id"]), _stored(es_admin, three["id"])
    assert after_two.get("context_ids") is None and after_two.get("derived_context") is None
    assert after_three["context_ids"] == [two["id"]]
    assert after_three["derived_context"] == "Noted, thanks."
    # Re-embedded without the forgotten text: the stored vector is that of the turn alone now.
    vector = get_embedder().embed_documents(["Noted, thanks."])[0]
    nearest = es_admin.search(index=index, knn={"field": "embedding", "query_vector": vector, "k": 1,
                                                "num_candidates": 10})["hits"]["hits"][0]
    assert nearest["_id"] == two["id"] and nearest["_score"] > 0.999
    assert _stored(es_admin, four["id"])["context_ids"] == [two["id"], three["id"]]  # untouched


def test_a_replayed_outbox_turn_gets_derived_context_like_a_live_one(subject, es_admin):
    from memory_app.models import OutboxEntry
    from memory_app.outbox import outbox_replay

    first = _turns(subject, ["Our wifi drops every evening."])[0]
    OutboxEntry.objects.create(tenant=subject.tenant, external_id=subject.external_id, operation="episode",
                               memory_id="ep-replayed-01", actor="t", reason="outage",
                               payload={"text": "Since Tuesday.", "session_id": "s1",
                                        "occurred_at": (T0 + timedelta(minutes=1)).isoformat()})
    assert outbox_replay().applied == 1
    assert _stored(es_admin, "ep-replayed-01")["context_ids"] == [first["id"]]


def _unit(vector):
    vector = np.asarray(vector, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def _cos(es_admin, memory_id, vector):
    """Cosine of a stored episode's vector with ``vector`` (from a kNN score: (1 + cos) / 2)."""
    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.refresh(index=index)
    hit = es_admin.search(index=index, knn={"field": "embedding", "query_vector": list(vector), "k": 1,
                                            "num_candidates": 10, "filter": {"ids": {"values": [memory_id]}}}
                          )["hits"]["hits"][0]
    return 2 * hit["_score"] - 1


def _composed(text, parts, weight=0.5):
    vectors = [_unit(v) for v in get_embedder().embed_documents([text, *parts])]
    return _unit(vectors[0] + weight * np.mean(vectors[1:], axis=0)) if parts else vectors[0]


def test_an_episode_vector_is_its_own_text_plus_half_its_contexts_mean_alike_for_turns_and_imports(
        subject, es_admin):
    texts = ["We hiked the ridge trail at dawn.", "The fog lifted by eight.", "Then we saw two elk."]
    one, two, three = _turns(subject, texts)
    explicit = episode_write(subject=subject, text="It was cold.", context="How was the hike?",
                             session_id="s1", occurred_at=T0 + timedelta(minutes=9))
    imported = episodes_import(subject=subject, episodes=[
        {"text": t, "session_id": "s7", "occurred_at": (T0 + timedelta(minutes=n)).isoformat()}
        for n, t in enumerate(texts)])[2]
    assert _cos(es_admin, one["id"], _composed(texts[0], [])) > 0.9999  # no context: the text's own vector
    assert _cos(es_admin, three["id"], _composed(texts[2], texts[:2])) > 0.9999
    assert _cos(es_admin, explicit["id"], _composed("It was cold.", ["How was the hike?"])) > 0.9999
    # An import stores what the same turns written one by one store.
    assert _cos(es_admin, imported, _composed(texts[2], texts[:2])) > 0.9999
    # The context moves the vector, and the turn stays its anchor.
    assert 0.8 < _cos(es_admin, three["id"], _composed(texts[2], [])) < 0.999
    assert _cos(es_admin, three["id"], _composed(texts[2], [])) > _cos(es_admin, three["id"], _composed(texts[0], []))


def test_joint_and_off_modes_embed_context_with_the_text_or_not_at_all(subject, es_admin, settings):
    settings.ENGRAM_EMBED_CONTEXT = "joint"
    first, joint = _turns(subject, ["Where is the spare key?", "Under the blue pot."])
    settings.ENGRAM_EMBED_CONTEXT = "false"
    off = episode_write(subject=subject, text="Under the blue pot.", session_id="s1",
                        occurred_at=T0 + timedelta(minutes=2))
    assert off["context_ids"] == [first["id"], joint["id"]]  # still derived and searched by BM25
    vectors = get_embedder().embed_documents(["Where is the spare key?\nUnder the blue pot.", "Under the blue pot."])
    assert _cos(es_admin, joint["id"], vectors[0]) > 0.9999
    assert _cos(es_admin, off["id"], vectors[1]) > 0.9999
    settings.ENGRAM_EMBED_CONTEXT = "sideways"
    with pytest.raises(ImproperlyConfigured):
        episode_write(subject=subject, text="x", session_id="s1", occurred_at=T0 + timedelta(minutes=3))


def test_a_turn_embeds_only_its_own_text_when_its_session_was_embedded_recently(subject):
    from memory_app.commands import turn_command
    from memory_app.turns import turn_create

    def turn(text: str, minutes: int):
        command = turn_command(tenant=subject.tenant, external_id=subject.external_id, text=text, session_id="g1",
                               occurred_at=(T0 + timedelta(minutes=minutes)).isoformat(), max_query_chars=2000,
                               limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
                               lifetimes=KeyLifetimes.from_settings())
        return turn_create(tenant=subject.tenant, turn=command)

    cache = get_embedder().query_cache
    for n, text in enumerate(["I planted tomatoes today.", "The basil is coming up too."]):
        turn(text, n)
    misses = cache.misses
    result = turn("When do I water them?", 5)
    assert result.recall is not None and result.submitted.memory_id
    # One new text embedded, once: shared by the write (with its two predecessors' cached
    # vectors) and the recall on the turn's text that runs beside it.
    assert cache.misses - misses == 1


def test_erasing_an_end_user_empties_the_cache_of_embedded_texts(subject):
    _turns(subject, ["My locker code is zanzibar.", "Noted."])
    assert "My locker code is zanzibar." in get_embedder().query_cache
    subject_erase(subject=subject, actor="test")
    assert len(get_embedder().query_cache) == 0


def test_forgetting_a_turn_removes_it_from_the_explicit_context_a_client_sent_with_another(subject, es_admin):
    said = episode_write(subject=subject, text="My locker code is zanzibar. I use it daily.")
    quoted = episode_write(subject=subject, text="Thanks.",
                           context="USER: my locker code is   ZANZIBAR.\nAGENT: Noted.")
    whole = episode_write(subject=subject, text="Done.",
                          context="User: My locker code is zanzibar. I use it daily.\nAgent: ok")
    memory_forget(subject=subject, memory_id=said["id"], reason="user_request", actor="test")
    assert _stored(es_admin, quoted["id"])["context"] == "USER: [forgotten]\nAGENT: Noted."
    assert _stored(es_admin, whole["id"])["context"] == "User: [forgotten]\nAgent: ok"
    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.refresh(index=index)
    assert es_admin.count(index=index, query={"match": {"context": "zanzibar"}})["count"] == 0
    # Embedded again without the quote: its vector is that of the turn and its redacted context.
    vector = episode_vectors([("Thanks.", ["USER: [forgotten]\nAGENT: Noted."])],
                             options=ContextOptions.from_settings())[0]["embedding"]
    nearest = es_admin.search(index=index, knn={"field": "embedding", "query_vector": vector, "k": 1,
                                                "num_candidates": 10})["hits"]["hits"][0]
    assert nearest["_id"] == quoted["id"] and nearest["_score"] > 0.999
