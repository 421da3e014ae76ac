"""The search stage against the real Elasticsearch: the scope filter inside the kNN search, the
entity legs and their guard, and the counts linear fusion scores words by."""

from datetime import UTC, datetime, timedelta

import pytest

from engram_core.es.schema import MemoryType, alias_name
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.imports import episodes_import
from memory_app.providers import get_embedder
from memory_app.recall import memory_recall, memory_recall_with_reading
from memory_app.recall.options import RecallOptions
from memory_app.recall.read import query_read
from memory_app.recall.search import Allowed, plain_legs, word_counts_search
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


def _import(subject, texts):
    ids = episodes_import(subject=subject, episodes=[
        {"text": t, "occurred_at": (T0 + timedelta(minutes=n)).isoformat()} for n, t in enumerate(texts)])
    return dict(zip(texts, ids, strict=True))


def test_an_entity_leg_ranks_the_memories_naming_the_entity_by_the_rest_of_the_question(subject, settings):
    # Many memories about books, none by Melanie except one that shares only "read" with the question;
    # "Melanie" is frequent (low idf), so the plain legs put the books-by-others first (under rank
    # fusion, which this test uses; the second hop, which "has" would add, has its own test).
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "fusion": "rrf", "hop_weight": 0.0}
    texts = [f"Caroline: I read {n} good books this month, books are my thing."
             for n in range(2, 14)]
    texts += [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(12)]
    target = "Melanie: I loved to read Charlotte's Web as a kid."
    ids = _import(subject, [*texts, target])
    question = "What books has Melanie read?"

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 0}
    plain = memory_recall(subject=subject, query=question, k=20, explain=True)
    plain_rank = [h["id"] for h in plain].index(ids[target]) + 1
    assert all("extra_ranks" not in h["explain"] for h in plain)

    # the guard has its own test below
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 2, "entity_weight": 0.5, "entity_min_mentions": 0}
    hits = memory_recall(subject=subject, query=question, k=20, explain=True)
    ranked = [h["id"] for h in hits]
    assert ranked.index(ids[target]) + 1 < plain_rank
    # The entity leg holds only memories whose own text names Melanie, ranked by "books read".
    explained = {h["id"]: h["explain"] for h in hits}
    assert explained[ids[target]]["extra_ranks"]["entity1"] >= 1
    leg_members = [i for i, e in explained.items() if "entity1" in e.get("extra_ranks", {})]
    assert leg_members and all("Melanie" in next(h["text"] for h in hits if h["id"] == i) for i in leg_members)


def test_entity_legs_respect_the_subject_boundary(make_subject, settings):
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 2, "entity_min_mentions": 0}
    alice, bob = make_subject("alice-qp"), make_subject("bob-qp")
    _import(bob, ["Bob: Melanie reads thrillers every night."])
    mine = _import(alice, ["Alice: the garden needs water."])
    hits = memory_recall(subject=alice, query="What books does Melanie read?")
    assert {h["id"] for h in hits} <= set(mine.values())


def test_the_guard_gives_a_leg_only_to_an_entity_many_memories_name(subject, settings):
    # 13 memories name Melanie, 1 names Gina. With a minimum of 5 mentions, Melanie's legs are
    # fused and Gina's are not (a rare name already has a high idf in the plain BM25 leg); the
    # counts themselves never join the fusion.
    texts = [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(12)]
    texts += ["Melanie: I loved to read Charlotte's Web as a kid.", "Caroline: Gina lent me a book about dance."]
    _import(subject, texts)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 2, "entity_min_mentions": 5}
    hits = memory_recall(subject=subject, query="Which books did Melanie and Gina read?", k=20, explain=True)
    legs = {leg for h in hits for leg in h["explain"].get("extra_ranks", {})}
    assert legs == {"entity1", "entity1_dense"}, legs  # Melanie's BM25 and kNN legs; none for Gina
    # more than name Melanie: no entity leg at all
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_min_mentions": 14}
    hits = memory_recall(subject=subject, query="Which books did Melanie and Gina read?", k=20, explain=True)
    assert all("extra_ranks" not in h["explain"] for h in hits)
    # both named at least once: both get legs
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_min_mentions": 1}
    hits = memory_recall(subject=subject, query="Which books did Melanie and Gina read?", k=20, explain=True)
    legs = {leg for h in hits for leg in h["explain"].get("extra_ranks", {})}
    assert {"entity1", "entity2"} <= legs and not any(leg.endswith("_mentions") for leg in legs), legs


def _twelve_melanie_one_gina(subject, settings) -> None:
    """12 memories name Melanie, 1 names Gina; entity legs for names at least 5 memories name."""
    texts = [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(12)]
    texts += ["Caroline: Gina lent me a book about dance."]
    _import(subject, texts)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 2, "entity_min_mentions": 5}


def test_the_mention_counts_are_reused_so_a_known_rare_name_costs_no_legs(subject, settings):
    _twelve_melanie_one_gina(subject, settings)
    sent: list[int] = []
    own = subject_es_client(subject=subject)

    class Recording:  # the end-user's own client, counting the searches of each _msearch
        def msearch(self, *, searches):
            sent.append(len(searches) // 2)
            return own.msearch(searches=searches)

    question = "Which books did Melanie and Gina read?"
    first = memory_recall(subject=subject, query=question, k=20, explain=True, es=Recording())
    second = memory_recall(subject=subject, query=question, k=20, explain=True, es=Recording())
    # First: 2 plain searches (BM25; kNN over the memories' vectors and the episodes' passages) +
    # per entity a count, a BM25 and a kNN leg + linear fusion's word counts. Then the counts are
    # known: Gina (1 < 5) gets nothing, Melanie (>= 5) her two legs without a count. Last, each
    # time, the superseded facts nearest the question (search.stale_search).
    assert sent == [2 + 3 + 3 + 1 + 1, 2 + 2 + 1 + 1]
    assert [(h["id"], h["explain"].get("extra_ranks")) for h in first] == \
        [(h["id"], h["explain"].get("extra_ranks")) for h in second]


def test_a_cache_outage_costs_the_counts_not_the_recall(subject, settings, monkeypatch):
    from django.core.cache import cache

    get_many = cache.get_many

    def broken(keys, *args, **kwargs):
        # The count cache is down; the refresh marks (memory_app.freshness) are another concern.
        if all(k.startswith("engram:refresh-pending:") for k in keys):
            return get_many(keys, *args, **kwargs)
        raise ConnectionError("cache down")

    texts = [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(6)]
    _import(subject, texts)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 2, "entity_min_mentions": 5}
    monkeypatch.setattr(cache, "get_many", broken)
    monkeypatch.setattr(cache, "set_many", broken)
    hits = memory_recall(subject=subject, query="How is the weather for Melanie?", k=5, explain=True)
    assert len(hits) == 5 and "entity1" in hits[0]["explain"]["extra_ranks"]  # counted again, legs kept


def test_the_entity_knn_leg_searches_the_topic_not_the_name(subject, settings):
    # Inside an entity's filter every memory names the entity, so the kNN leg searches the
    # embedding of the topic (the entity BM25 leg's query), not of the whole question; with
    # ENGRAM_RECALL_ENTITY_TOPIC_VECTOR off, the question's own vector as before. The plain kNN
    # legs search the question's vector either way.
    texts = [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(6)]
    _import(subject, texts)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_legs": 2, "entity_min_mentions": 0}
    own = subject_es_client(subject=subject)
    vectors: list[list[list[float]]] = []

    def knn_vectors(part) -> list[list[float]]:  # every kNN query's vector, in the body's order
        if isinstance(part, list):
            return [v for item in part for v in knn_vectors(item)]
        if not isinstance(part, dict):
            return []
        own_vector = [part["knn"]["query_vector"]] if isinstance(part.get("knn"), dict) else []
        return own_vector + [v for key, value in part.items() if key != "knn" for v in knn_vectors(value)]

    class Recording:  # the end-user's own client, keeping the query vector of every kNN query
        def msearch(self, *, searches):
            vectors.append(knn_vectors(searches[1::2]))
            return own.msearch(searches=searches)

    question = "What do Melanie's kids like?"
    embedder = get_embedder()
    asked, topic = embedder.embed_query(question), embedder.embed_query("kids like?")
    recall = memory_recall_with_reading(subject=subject, query=question, k=5, explain=True, es=Recording())
    assert recall.reading.topic == "kids like?"
    hits = recall.hits
    assert "entity1_dense" in hits[0]["explain"]["extra_ranks"]
    *plain, entity, stale = vectors[-1]  # last: the superseded facts near the question (search.stale_search)
    assert entity == topic and all(v == asked for v in [*plain, stale]), "the entity kNN leg searches the topic"

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_topic_vector": False}
    memory_recall(subject=subject, query=question, k=5, explain=True, es=Recording())
    assert all(v == asked for v in vectors[-1]) and len(vectors[-1]) == len(plain) + 2


def test_the_recall_says_which_names_got_legs_and_what_they_searched(subject, settings):
    # What the inspector shows beside the hits, from the recall that ranked them: the BM25
    # keywords, each name with its count and whether it got legs (counted in the recall's own
    # _msearch the first time, read from the cache the next), the topic, and the date window.
    _twelve_melanie_one_gina(subject, settings)
    question = "Which books did Melanie and Gina read in June?"
    now = datetime(2025, 7, 10, tzinfo=UTC)
    for _counted_then_cached in range(2):
        recall = memory_recall_with_reading(subject=subject, query=question, now=now)
        reading = recall.reading
        assert reading.keywords == "books Melanie Gina read June?" and reading.topic == "books read June?"
        assert [(e.name, e.mentions, e.legs) for e in recall.entities] == [("Melanie", 5, True), ("Gina", 1, False)]
        assert reading.time_window.start == datetime(2025, 6, 1, tzinfo=UTC)
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "temporal_boost": 0}
    assert memory_recall_with_reading(subject=subject, query=question, now=now).reading.time_window is None


def test_a_question_naming_the_end_user_credits_their_own_turns_with_their_name(make_subject, settings):
    # Olivia's own turns say "I", never "Olivia"; a fact about her names her. Asked about
    # Olivia, a turn she said holds the name as the fact does; the agent's reply does not.
    olivia = make_subject("olivia.hart")
    said, replied = (episode_write(subject=olivia, role=role, occurred_at=T0,
                                   text="On the short hop to Detroit give me a window seat, please.")
                     for role in ("user", "assistant"))
    fact_write(subject=olivia, text="Olivia's home airport is Boston Logan.")
    question = "When did Olivia ask for a window seat?"

    def linear(weight):
        settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "own_name_weight": weight}
        hits = {h["id"]: h for h in memory_recall(subject=olivia, query=question, now=T0, explain=True)}
        return hits[said["id"]]["explain"]["linear_score"], hits[replied["id"]]["explain"]["linear_score"]

    credited, reply = linear(1.0)
    assert credited > reply
    # With the weight at 0 the two are equal (not to ``reply``: the name's idf, so every share, differs).
    uncredited, reply_without = linear(0)
    assert uncredited == pytest.approx(reply_without)
    assert credited > uncredited

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "own_name_weight": 1.0}
    assert memory_recall_with_reading(subject=olivia, query=question, now=T0).reading.own_name == ("olivia",)
    # The name's idf counts her own turns as holding it (in her own memory it says little): the
    # fact and the turn she said, of the three memories.
    types = [MemoryType.EPISODIC, MemoryType.SEMANTIC]
    allowed = Allowed(types=types, index_for={t: alias_name(t) for t in types}, scope=memory_scope(subject=olivia))
    header, body = word_counts_search(words=["olivia"], indices=allowed.indices, allowed=allowed.query(),
                                      own_name=("olivia",))
    counts = subject_es_client(subject=olivia).search(index=header["index"], body=body)
    assert counts["hits"]["total"]["value"] == 3
    assert counts["aggregations"]["words"]["buckets"]["word_text_0"]["doc_count"] == 2


def test_knn_filter_is_applied_inside_the_knn_search(make_subject, es_admin, settings):
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "bm25": False}
    settings.ENGRAM_RECALL_CANDIDATES = 5
    settings.ENGRAM_RECALL_NUM_CANDIDATES = 10
    alice, bob = make_subject("alice"), make_subject("bob")
    day = datetime(2025, 3, 1, tzinfo=UTC)
    # Bob holds 60 near-copies of the question; Alice one unrelated episode of two sentences (so it
    # has passages, language.passages). A filter applied after the kNN search (post_filter, or a
    # query beside knn) would see only Bob's 10 nearest.
    episodes_import(subject=bob, episodes=[
        {"text": f"The garage door sensor battery is low again ({i})", "occurred_at": (day + timedelta(hours=i)).isoformat()}
        for i in range(60)])
    [own] = episodes_import(subject=alice, episodes=[
        {"text": "I planted tomatoes in the back garden. The soil was dry.", "occurred_at": day.isoformat()}])
    query = "garage door sensor battery low"
    options = RecallOptions.from_settings()
    reading = query_read(query=query, name_words=frozenset(), now=day, tz=None, options=options)
    allowed = Allowed(types=[MemoryType.EPISODIC], index_for={MemoryType.EPISODIC: alias_name(MemoryType.EPISODIC)},
                      scope=memory_scope(subject=alice))
    body = plain_legs(reading=reading, vector=get_embedder().embed_query(query), allowed=allowed, options=options)
    # The dense leg: kNN over the memories' own vectors and over the episodes' sentences
    # (language.passages), each with the scope filter inside the kNN query.
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


def test_a_leg_the_cluster_cannot_answer_now_is_unavailable_and_any_other_failure_a_bug():
    """While a node is lost a leg may fail with a shard between copies, or answer from some shards
    only: both are a 503 with Retry-After (never a partial answer); other failures stay errors."""
    from engram_core.errors import ServiceUnavailable
    from memory_app.recall.search import leg_answer_check

    leg_answer_check({"hits": {"hits": []}, "_shards": {"total": 1, "successful": 1, "failed": 0}, "status": 200})
    lost = {"error": {"type": "search_phase_execution_exception", "reason": "all shards failed"}, "status": 503}
    with pytest.raises(ServiceUnavailable) as raised:
        leg_answer_check(lost)
    assert (raised.value.code, raised.value.status) == ("elasticsearch_unavailable", 503)
    with pytest.raises(ServiceUnavailable):
        leg_answer_check({"hits": {"hits": []}, "_shards": {"total": 3, "successful": 2, "failed": 1}, "status": 200})
    with pytest.raises(RuntimeError):
        leg_answer_check({"error": {"type": "parsing_exception", "reason": "unknown query"}, "status": 400})


def _dated_import(subject, dated_texts):
    ids = episodes_import(subject=subject, episodes=[
        {"text": t, "occurred_at": when.isoformat(), "session_id": when.date().isoformat()}
        for when, t in dated_texts])
    return dict(zip([t for _, t in dated_texts], ids, strict=True))


def test_a_question_naming_a_day_searches_the_episodes_dated_in_it_as_well(subject, settings):
    # The turn that answers tells the day before it was said ("yesterday") and shares no word with
    # the question but the speaker's name; many turns on other days hold the question's words.
    day = datetime(2022, 3, 17, 9, 0, tzinfo=UTC)
    others = [(day - timedelta(days=40 + n), f"James: My favourite recreational activity is hiking, day {n}.")
              for n in range(30)]
    target = "James: By the way, yesterday I went bowling and got two strikes!"
    ids = _dated_import(subject, [*others, (day, target)])
    question = "Which recreational activity was James pursuing on March 16, 2022?"

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "dated_weight": 0.0}
    off = {h["id"]: h for h in memory_recall(subject=subject, query=question, k=40, explain=True, now=day)}
    assert not any(name.startswith("dated") for h in off.values() for name in h["explain"].get("extra_ranks", {}))

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "dated_weight": 1.0}
    on = {h["id"]: h for h in memory_recall(subject=subject, query=question, k=40, explain=True, now=day)}
    # the only episode of the day: first in both dated legs, and it gains their score
    assert on[ids[target]]["explain"]["extra_ranks"] == {"dated": 1, "dated_dense": 1}
    assert on[ids[target]]["score"] > off[ids[target]]["score"]
    # Only episodes of the day (told in it, or up to the grace after it) are in the dated legs.
    for memory_id, hit in on.items():
        if memory_id != ids[target]:
            assert not any(name.startswith("dated") for name in hit["explain"].get("extra_ranks", {}))


def test_no_dated_legs_without_a_period_nor_for_a_recall_of_no_episodes(subject, settings):
    from memory_app.recall.search import dated_legs

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "dated_weight": 1.0}
    options = RecallOptions.from_settings()
    now = datetime(2022, 3, 20, tzinfo=UTC)
    allowed = Allowed(types=[MemoryType.EPISODIC], index_for={MemoryType.EPISODIC: "episodes"},
                      scope=memory_scope(subject=subject))
    facts_only = Allowed(types=[MemoryType.SEMANTIC], index_for={MemoryType.SEMANTIC: "facts"},
                         scope=memory_scope(subject=subject))

    def read(question):
        return query_read(query=question, name_words=frozenset(), now=now, tz=None, options=options)

    dated = read("What did James do on March 16, 2022?")
    body, legs = dated_legs(reading=dated, allowed=allowed, vector=[0.0] * 384, options=options)
    assert [leg.name for leg, _ in legs] == ["dated", "dated_dense"] and len(body) == 4
    assert {factor for _, factor in legs} == {1.0}
    assert dated_legs(reading=read("What did James do?"), allowed=allowed, vector=[0.0] * 384,
                      options=options) == ([], [])
    assert dated_legs(reading=dated, allowed=facts_only, vector=[0.0] * 384, options=options) == ([], [])
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "dated_weight": 0.0}
    assert dated_legs(reading=dated, allowed=allowed, vector=[0.0] * 384,
                      options=RecallOptions.from_settings()) == ([], [])


def test_a_question_gathering_over_time_hops_from_its_first_hits_to_the_other_sessions(subject, settings):
    # The question meets the trip told in the first session; the second trip, told in another
    # session, shares no word with it but is told like the first.
    day = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)
    first = [(day, "Jon: Took a short trip last week to Rome to clear my mind, the city was lovely."),
             (day, "Gina: Sounds great, I stayed home and worked on my online store."),
             (day, "Jon: Next I want to find a spot for my dance studio.")]
    chatter = [(day + timedelta(days=n), f"Gina: My store sold {n} hoodies this week, the new line is doing well.")
               for n in range(7, 27)]
    target = "Jon: Back from a weekend in Paris, we strolled along the Seine and saw the Eiffel tower."
    later = day + timedelta(days=40)
    ids = _dated_import(subject, [*first, *chatter, (later, target)])
    question = "Which cities has Jon visited?"

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "hop_weight": 0.0}
    first = memory_recall(subject=subject, query=question, k=30, explain=True, now=later)
    off = {h["id"]: h for h in first}
    assert not any("hop_dense" in h["explain"].get("extra_ranks", {}) for h in off.values())

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "hop_weight": 0.5}
    on = {h["id"]: h for h in memory_recall(subject=subject, query=question, k=30, explain=True, now=later)}
    assert on[ids[target]]["explain"]["extra_ranks"]["hop_dense"] == 1
    assert on[ids[target]]["score"] > off[ids[target]]["score"]
    # The hop searches only the sessions of none of the first three hits (the ranking without it).
    hopped = [memory_id for memory_id, h in on.items() if "hop_dense" in h["explain"].get("extra_ranks", {})]
    first_sessions = {h["session_id"] for h in first[:3]}
    assert hopped and all(on[memory_id]["session_id"] not in first_sessions for memory_id in hopped)

    # A question that does not gather (no "has"/"have") does not hop.
    once = memory_recall(subject=subject, query="Which city did Jon visit?", k=30, explain=True, now=later)
    assert not any("hop_dense" in h["explain"].get("extra_ranks", {}) for h in once)
