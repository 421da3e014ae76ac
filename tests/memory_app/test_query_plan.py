"""Query decomposition: entity extraction and the entity legs, through the real Elasticsearch."""

from datetime import UTC, datetime, timedelta

import pytest

from engram_core.es.schema import MemoryType, alias_name
from memory_app import recall as rc
from memory_app.query_plan import query_entities, query_plan
from memory_app.selectors import memory_recall, own_name, query_reading, subject_name_words
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.imports import episodes_import
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("query, entities", [
    ("What books has Melanie read?", ["Melanie"]),
    ("What do Jon and Gina both have in common?", ["Jon", "Gina"]),
    ("What do Melanie's kids like?", ["Melanie"]),  # possessive dropped
    ("Would Caroline likely have Dr. Seuss books on her bookshelf?", ["Caroline", "Dr Seuss"]),
    ("New York is where she moved?", ["New York"]),  # a multi-word name may open the query
    ("Melanie went where?", []),  # one capitalised first word is just a sentence start
    ("When did she read \"Charlotte's Web\"?", ["Charlotte's Web"]),  # a quote; not again as "Charlotte Web"
    ("What did I say about the garage sensor?", []),  # "I" is a function word, not a name
    ("Did he say it? Then Anna called.", ["Anna"]),
])
def test_entities_are_capitalised_spans_that_do_not_start_a_sentence_and_quotes(query, entities):
    assert query_entities(query) == entities


def test_the_plan_keeps_at_most_the_configured_entities_and_removes_them_from_the_topic(settings):
    settings.ENGRAM_RECALL_ENTITY_LEGS = 1
    q = "What do Jon and Gina both like?"
    plan = query_plan(q, keywords=rc.keyword_query(q))
    assert plan.entities == ("Jon",)
    assert plan.topic == "Gina like?"  # ("both" is a stop word) an entity beyond the limit stays a plain keyword
    settings.ENGRAM_RECALL_ENTITY_LEGS = 0
    assert query_plan(q, keywords=rc.keyword_query(q)).entities == ()
    settings.ENGRAM_RECALL_ENTITY_LEGS = 3
    only_names = "What about Jon and Gina?"
    assert query_plan(only_names, keywords=rc.keyword_query(only_names)).topic == ""  # no topic: no leg


def _import(subject, texts):
    ids = episodes_import(subject=subject, episodes=[
        {"text": t, "occurred_at": (T0 + timedelta(minutes=n)).isoformat()} for n, t in enumerate(texts)])
    return dict(zip(texts, ids, strict=True))


def test_an_entity_leg_ranks_the_memories_naming_the_entity_by_the_rest_of_the_question(subject, settings):
    # Many memories about books, none by Melanie except one that shares only "read" with the question;
    # "Melanie" is frequent (low idf), so the plain legs put the books-by-others first (under rank
    # fusion, which this test uses).
    settings.ENGRAM_FUSION = "rrf"
    texts = [f"Caroline: I read {n} good books this month, books are my thing."
             for n in range(2, 14)]
    texts += [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(12)]
    target = "Melanie: I loved to read Charlotte's Web as a kid."
    ids = _import(subject, [*texts, target])
    question = "What books has Melanie read?"

    settings.ENGRAM_RECALL_ENTITY_LEGS = 0
    plain = memory_recall(subject=subject, query=question, k=20, explain=True)
    plain_rank = [h["id"] for h in plain].index(ids[target]) + 1
    assert all("extra_ranks" not in h["explain"] for h in plain)

    settings.ENGRAM_RECALL_ENTITY_LEGS = 2
    settings.ENGRAM_RRF_ENTITY_WEIGHT = 0.5
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 0  # the guard has its own test below
    hits = memory_recall(subject=subject, query=question, k=20, explain=True)
    ranked = [h["id"] for h in hits]
    assert ranked.index(ids[target]) + 1 < plain_rank
    # The entity leg holds only memories whose own text names Melanie, ranked by "books read".
    explained = {h["id"]: h["explain"] for h in hits}
    assert explained[ids[target]]["extra_ranks"]["entity1"] >= 1
    leg_members = [i for i, e in explained.items() if "entity1" in e.get("extra_ranks", {})]
    assert leg_members and all("Melanie" in next(h["text"] for h in hits if h["id"] == i) for i in leg_members)


def test_entity_legs_respect_the_subject_boundary(make_subject, settings):
    settings.ENGRAM_RECALL_ENTITY_LEGS = 2
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 0
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
    settings.ENGRAM_RECALL_ENTITY_LEGS = 2
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 5
    hits = memory_recall(subject=subject, query="Which books did Melanie and Gina read?", k=20, explain=True)
    legs = {leg for h in hits for leg in h["explain"].get("extra_ranks", {})}
    assert legs == {"entity1", "entity1_dense"}, legs  # Melanie's BM25 and kNN legs; none for Gina
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 14  # more than name Melanie: no entity leg at all
    hits = memory_recall(subject=subject, query="Which books did Melanie and Gina read?", k=20, explain=True)
    assert all("extra_ranks" not in h["explain"] for h in hits)
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 1  # both named at least once: both get legs
    hits = memory_recall(subject=subject, query="Which books did Melanie and Gina read?", k=20, explain=True)
    legs = {leg for h in hits for leg in h["explain"].get("extra_ranks", {})}
    assert {"entity1", "entity2"} <= legs and not any(leg.endswith("_mentions") for leg in legs), legs


def _twelve_melanie_one_gina(subject, settings) -> None:
    """12 memories name Melanie, 1 names Gina; entity legs for names at least 5 memories name."""
    texts = [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(12)]
    texts += ["Caroline: Gina lent me a book about dance."]
    _import(subject, texts)
    settings.ENGRAM_RECALL_ENTITY_LEGS = 2
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 5


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
    # known: Gina (1 < 5) gets nothing, Melanie (>= 5) her two legs without a count.
    assert sent == [2 + 3 + 3 + 1, 2 + 2 + 1]
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
    settings.ENGRAM_RECALL_ENTITY_LEGS = 2
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 5
    monkeypatch.setattr(cache, "get_many", broken)
    monkeypatch.setattr(cache, "set_many", broken)
    hits = memory_recall(subject=subject, query="How is the weather for Melanie?", k=5, explain=True)
    assert len(hits) == 5 and "entity1" in hits[0]["explain"]["extra_ranks"]  # counted again, legs kept


def test_the_entity_knn_leg_searches_the_topic_not_the_name(subject, settings):
    # Inside an entity's filter every memory names the entity, so the kNN leg searches the
    # embedding of the topic (the entity BM25 leg's query), not of the whole question; with
    # ENGRAM_RECALL_ENTITY_TOPIC_VECTOR off, the question's own vector as before. The plain kNN
    # legs search the question's vector either way.
    from memory_app.embeddings import get_embedder

    texts = [f"Melanie: Lovely weather for the kids today, number {n}." for n in range(6)]
    _import(subject, texts)
    settings.ENGRAM_RECALL_ENTITY_LEGS = 2
    settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS = 0
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
    assert query_plan(question, keywords=rc.keyword_query(question)).topic == "kids like?"
    hits = memory_recall(subject=subject, query=question, k=5, explain=True, es=Recording())
    assert "entity1_dense" in hits[0]["explain"]["extra_ranks"]
    *plain, entity = vectors[-1]
    assert entity == topic and all(v == asked for v in plain), "the entity kNN leg searches the topic"

    settings.ENGRAM_RECALL_ENTITY_TOPIC_VECTOR = False
    memory_recall(subject=subject, query=question, k=5, explain=True, es=Recording())
    assert all(v == asked for v in vectors[-1]) and len(vectors[-1]) == len(plain) + 1


def test_the_query_reading_says_which_names_get_legs_and_what_they_search(subject, settings):
    # What the inspector shows beside the hits: the BM25 keywords, each name with its count and
    # whether it got legs (from the counts the recall left in the cache, so no request of its
    # own), the topic, and the date window.
    _twelve_melanie_one_gina(subject, settings)
    question = "Which books did Melanie and Gina read in June?"
    now = datetime(2025, 7, 10, tzinfo=UTC)
    before = query_reading(subject=subject, query=question, now=now)
    assert [(e.name, e.mentions, e.legs) for e in before.entities] == [("Melanie", None, None), ("Gina", None, None)]
    memory_recall(subject=subject, query=question, now=now)
    reading = query_reading(subject=subject, query=question, now=now)
    assert reading.keywords == "books Melanie Gina read June?" and reading.topic == "books read June?"
    assert [(e.name, e.mentions, e.legs) for e in reading.entities] == [("Melanie", 5, True), ("Gina", 1, False)]
    assert reading.time_window.start == datetime(2025, 6, 1, tzinfo=UTC) and reading.topic_vector
    settings.ENGRAM_TEMPORAL_BOOST = 0
    assert query_reading(subject=subject, query=question, now=now).time_window is None


@pytest.mark.parametrize("external_id, display_name, words", [
    ("olivia.hart", "", {"olivia", "hart"}),
    ("alice@example.com", "", {"alice"}),  # the address's user part, not its domain
    ("u-42", "", set()),  # no name in an opaque id
    ("u-42", "Olivia Hart", {"olivia", "hart"}),  # a display name wins over the id
])
def test_an_end_user_s_name_is_their_display_name_or_the_letters_of_their_id(external_id, display_name, words):
    assert subject_name_words(Subject(external_id=external_id, display_name=display_name)) == words


def test_only_the_end_user_s_name_the_question_names_as_a_name_is_their_own(settings):
    olivia = Subject(external_id="olivia.hart")

    def own(question):
        return own_name(olivia, words=rc.lexical_words(question),
                        entities=tuple(query_entities(question)))

    assert own("When did Olivia ask for a window seat?") == {"olivia"}
    assert own("What is Olivia's home airport?") == {"olivia's"}  # the possessive is the question's word
    assert own("When did Jonah ask for an exit row?") == frozenset()  # someone else
    assert own("Is the hart a deer?") == frozenset()  # her surname as a common noun is not her name
    settings.ENGRAM_OWN_NAME_WEIGHT = 0
    assert own("When did Olivia ask for a window seat?") == frozenset()


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
        settings.ENGRAM_OWN_NAME_WEIGHT = weight
        hits = {h["id"]: h for h in memory_recall(subject=olivia, query=question, now=T0, explain=True)}
        return hits[said["id"]]["explain"]["linear_score"], hits[replied["id"]]["explain"]["linear_score"]

    credited, reply = linear(1.0)
    assert credited > reply
    # With the weight at 0 the two are equal (not to ``reply``: the name's idf, so every share, differs).
    uncredited, reply_without = linear(0)
    assert uncredited == pytest.approx(reply_without)
    assert credited > uncredited

    settings.ENGRAM_OWN_NAME_WEIGHT = 1.0
    assert query_reading(subject=olivia, query=question, now=T0).own_name == ("olivia",)
    # The name's idf counts her own turns as holding it (in her own memory it says little): the
    # fact and the turn she said, of the three memories.
    types = [MemoryType.EPISODIC, MemoryType.SEMANTIC]
    allowed = rc.allowed_filter(types=types, scope=memory_scope(subject=olivia), include_superseded=False,
                                since=None, until=None)
    header, body = rc.word_counts_search(words=["olivia"], indices=",".join(alias_name(t) for t in types),
                                         allowed=allowed, own_name=frozenset({"olivia"}))
    counts = subject_es_client(subject=olivia).search(index=header["index"], body=body)
    assert counts["hits"]["total"]["value"] == 3
    assert counts["aggregations"]["words"]["buckets"]["word_text_0"]["doc_count"] == 2
