"""Names without a model: the named entities of a question, and the words of a person's name."""

import pytest
from language.names import person_name_words, query_entities, without_names


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


def test_a_text_without_names_keeps_every_other_word():
    assert without_names("Melanie's kids like?", entities=("Melanie",)) == "kids like?"
    assert without_names("books Dr Seuss read?", entities=("Dr Seuss",)) == "books read?"
    assert without_names("Jon Gina?", entities=("Jon", "Gina")) == ""  # nothing but the names


@pytest.mark.parametrize("external_id, display_name, words", [
    ("olivia.hart", "", {"olivia", "hart"}),
    ("alice@example.com", "", {"alice"}),  # the address's user part, not its domain
    ("u-42", "", set()),  # no name in an opaque id
    ("u-42", "Olivia Hart", {"olivia", "hart"}),  # a display name wins over the id
])
def test_an_end_user_s_name_is_their_display_name_or_the_letters_of_their_id(external_id, display_name, words):
    assert person_name_words(display_name=display_name, external_id=external_id) == words


# ---------------------------------------------------------------- properties (no service)

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st
from language.words import WORD  # noqa: E402

from tests.strategies import sentences, texts  # noqa: E402

_names = st.lists(st.sampled_from(["Melanie", "Dr.", "Seuss", "New", "York", "O'Brien's", '"the blue house"',
                                   "caroline", "ÉMILE", "Zoë"]), max_size=6).map(" ".join)


@pytest.mark.properties
@given(query=texts | sentences | st.builds(lambda a, b: f"{a} {b}?", _names, sentences))
def test_names_come_from_the_query_whatever_it_says(query):
    entities = query_entities(query)
    assert entities == query_entities(query)
    assert all(word in query for entity in entities for word in entity.split())
    rest = without_names(query, entities=tuple(entities))
    assert rest == without_names(query, entities=tuple(entities))
    assert set(rest.split()) <= set(query.split())


@pytest.mark.properties
@given(display_name=texts, external_id=texts)
def test_a_persons_name_words_are_lower_case_words_of_their_name_or_id(display_name, external_id):
    words = person_name_words(display_name=display_name, external_id=external_id)
    assert words == person_name_words(display_name=display_name, external_id=external_id)
    source = display_name if display_name.strip() else external_id
    assert all(w == w.lower() and WORD.fullmatch(w) and w in source.lower() for w in words)
