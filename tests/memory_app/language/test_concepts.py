"""Concept expansion: a memory's nouns bring their WordNet categories, which a question asking for
members of a kind matches (memory_app.language.concepts; recall against the real Elasticsearch)."""

import pytest

from engram_core.es.schema import MemoryType, alias_name
from memory_app.language.concepts import concepts_of, query_categories, synonyms
from memory_app.selectors import memory_get
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write
from memory_app.recall import memory_recall


@pytest.mark.parametrize(("text", "expected"), [
    ("Jon: I spent a week in Rome, the food was amazing.", "city"),
    ("Yeah, I play clarinet! Started when I was young.", "wind instrument"),
    ("I'm off to go swimming with the kids.", "sport"),
    ("We got another cat named Bailey too.", "feline"),
])
def test_a_text_gets_the_categories_of_its_nouns(text, expected):
    assert expected in concepts_of(text)


def test_names_of_people_verbs_and_the_most_general_categories_add_nothing():
    # Oliver and Bailey are King Oliver and Pearl Bailey to WordNet; "love" is mostly a verb;
    # "entity", "object" and "artifact" sit too close to WordNet's root to say anything.
    concepts = concepts_of("Oliver and Bailey love the old violin.")
    assert "musician" not in concepts and "singer" not in concepts and "emotion" not in concepts
    assert "musical instrument" in concepts
    assert not {"entity", "object", "artifact", "whole"} & set(concepts.replace("\n", " ").split())
    assert concepts_of("Hi, how are you?") is None


@pytest.mark.parametrize(("question", "kinds"), [
    ("Which cities has Jon visited?", "city"),
    ("What musical artists/bands has Melanie seen?", "artist band"),
    ("What kind of books does Caroline have in her library?", "book"),
    ("How many children does Melanie have?", "child"),  # an irregular plural
    ("What instruments does Melanie play?", "instrument"),
    # Nouns the question is about, not the kind it asks for: no categories.
    ("How do travelers get urgent help while abroad?", None),
    ("What do Melanie's kids like?", None),
    ("What book is Jon currently reading?", None),  # one book: the memories name it
    ("What Jon thinks the ideal studio should look like?", None),  # a verb
])
def test_a_question_asks_for_the_plural_kinds_after_its_question_word(question, kinds):
    assert query_categories(question) == kinds


def test_switched_off_nothing_is_expanded(settings):
    # (A question's kinds are not read then either: tests/memory_app/recall/test_read.py.)
    settings.ENGRAM_CONCEPTS = False
    assert concepts_of("I spent a week in Rome.") is None


def _rome_and_others(subject):
    rome = episode_write(subject=subject, text="I spent a week in Rome, the food was amazing.")
    for text in ("Jon visited his grandmother's farm again.", "The museum Jon visited had great paintings.",
                 "Jon's studio had many visitors today."):
        episode_write(subject=subject, text=text)
    return rome


def test_a_question_for_a_kind_finds_a_memory_naming_a_member_of_it(subject):
    rome = _rome_and_others(subject)
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Which cities has Jon visited?", explain=True)}
    # The turn shares no word with the question: its BM25 rank is its concepts' match ("city").
    assert hits[rome["id"]]["explain"]["bm25_rank"] is not None
    # The field is searched, never shown: not in the write's answer, a read or a recall hit.
    assert "concepts" not in rome and "concepts" not in hits[rome["id"]]
    assert "concepts" not in memory_get(subject=subject, memory_id=rome["id"])


def test_without_concepts_the_lexical_leg_cannot_find_it(subject, settings):
    settings.ENGRAM_CONCEPTS = False
    rome = _rome_and_others(subject)
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Which cities has Jon visited?", explain=True)}
    assert rome["id"] not in hits or hits[rome["id"]]["explain"]["bm25_rank"] is None


def test_facts_and_catalog_entries_get_concepts_too(subject, es_admin):
    fact = fact_write(subject=subject, text="The user plays the cello in a quartet.")
    entry = catalog_entry_write(tenant=subject.tenant, title="Rome city break",
                                text="Three nights near the Colosseum.")
    for memory_type, memory in ((MemoryType.SEMANTIC, fact), (MemoryType.CATALOG, entry)):
        assert es_admin.get(index=alias_name(memory_type), id=memory["id"])["_source"]["concepts"]
    hits = {h["id"] for h in memory_recall(subject=subject, query="What instruments does the user play?")}
    assert fact["id"] in hits


@pytest.mark.parametrize(("word", "expected"), [
    ("holiday", ("vacation",)),
    ("luggage", ("baggage",)),
    ("store", ("shop",)),
    ("kids", "child"),  # a plural: the lemma's sense; its other names, not the word itself
])
def test_a_word_s_synonyms_are_the_other_names_of_its_most_frequent_noun_sense(word, expected):
    found = synonyms(word)
    assert (expected in found) if isinstance(expected, str) else found == expected
    assert word not in found and "kid" not in found


def test_verbs_famous_people_and_multi_word_names_give_no_synonyms():
    assert synonyms("love") == ()  # mostly a verb to WordNet's sense counts
    assert synonyms("oliver") == ()  # King Oliver to WordNet; in a conversation someone the speakers know
    assert synonyms("suitcase") == ("bag", "grip")  # not "traveling bag": "traveling" alone is not a suitcase
    # WordNet's first sense of "jack" is "nothing at all" (doodly-squat ...), a sense its tagged
    # corpus never saw: only a first sense with at least half of a word's tagged uses lends names.
    assert synonyms("jack") == () and synonyms("appliances") == ()
    assert synonyms("qwzx") == ()  # (with ENGRAM_SYNONYM_WEIGHT 0 no word is given any: test_read.py)


def _holiday_and_others(subject):
    vacation = episode_write(subject=subject, text="We booked the vacation in Lisbon for May.")
    for text in ("The electricity bill came in higher than usual.", "Dawn starts school in September."):
        episode_write(subject=subject, text=text)
    return vacation


def test_a_memory_naming_a_synonym_of_a_question_s_word_gets_a_share_of_its_score(subject, settings):
    vacation = _holiday_and_others(subject)
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Where is the holiday?", explain=True)}
    # "holiday" is not in its text, "vacation" is: the lexical leg finds it.
    assert hits[vacation["id"]]["explain"]["bm25_rank"] == 1
    credited = hits[vacation["id"]]["explain"]["linear_score"]

    settings.ENGRAM_SYNONYM_WEIGHT = 0
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Where is the holiday?", explain=True)}
    assert hits[vacation["id"]]["explain"]["bm25_rank"] is None
    # Only its dense leg's share is left (the lexical coverage of "holiday" was 0.5 × 1).
    assert hits[vacation["id"]]["explain"]["linear_score"] == pytest.approx(credited - 0.5)


# ---------------------------------------------------------------- properties (no service)

from hypothesis import given, strategies as st  # noqa: E402

from memory_app.language.intent import query_intent  # noqa: E402
from memory_app.language.words import distinct_words, without_stopwords  # noqa: E402
from tests.strategies import sentences, texts  # noqa: E402

_questions = st.builds(lambda w, rest: f"{w} {rest}", st.sampled_from(
    ["What", "Which", "How many", "what kind of", "Which cities has", "What musical artists/bands has"]), texts)


@pytest.mark.properties
@given(text=texts | sentences | _questions)
def test_the_words_a_text_is_read_by_come_whatever_it_says(text):
    first = (concepts_of(text), query_categories(text), query_intent(text), without_stopwords(text),
             distinct_words(text), [synonyms(w) for w in distinct_words(text)[:5]])
    assert first == (concepts_of(text), query_categories(text), query_intent(text), without_stopwords(text),
                     distinct_words(text), [synonyms(w) for w in distinct_words(text)[:5]])
    concepts, categories = first[0], first[1]
    assert concepts is None or (isinstance(concepts, str) and concepts.strip())
    assert categories is None or (isinstance(categories, str) and categories.strip())
