"""The read stage: a question read once, by English rules and the options alone (no node, no cache)."""

import re

import pytest
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from language.intent import Intent
from language.names import person_name_words
from memory_app.recall.options import RecallOptions
from memory_app.recall.read import (keyword_query, lexical_words, query_asks_past, query_gathers, query_read,
                                     query_before_what, query_past_until, query_says_now)

NOW = datetime(2025, 7, 10, tzinfo=UTC)


def _options(**changes) -> RecallOptions:
    return replace(RecallOptions.from_settings(), **changes)


def _read(query: str, *, name_words: frozenset[str] = frozenset(), **changes):
    return query_read(query=query, name_words=name_words, now=NOW, tz=None, options=_options(**changes))


def test_the_bm25_query_drops_question_words_and_pronouns():
    options = _options()
    assert keyword_query("When did Caroline's sister visit her in Berlin?", options=options) == \
        "Caroline's sister visit Berlin?"
    assert keyword_query("What’s the wifi password?", options=options) == "wifi password?"
    assert keyword_query("what did you do?", options=options) == "what did you do?"  # nothing else left: unchanged
    assert keyword_query("When did Caroline visit?", options=_options(stopwords=False)) == "When did Caroline visit?"


def test_lexical_words_are_the_bm25_query_s_distinct_words():
    assert lexical_words("What did Caroline's sister say about Berlin and berlin?", options=_options()) == [
        "caroline's", "sister", "say", "berlin"]
    assert _read("What did Caroline's sister say about Berlin and berlin?").words == (
        "caroline's", "sister", "say", "berlin")
    assert _read("What did Caroline say?", max_words=1).words == ("caroline",)


def test_only_linear_fusion_with_a_bm25_leg_scores_words():
    assert _read("Which cities has Jon visited?", fusion="rrf").words == ()
    no_bm25 = _read("Which cities has Jon visited?", bm25=False)
    assert no_bm25.words == () and no_bm25.kinds is None  # nothing would search them


def test_the_reading_keeps_at_most_the_configured_entities_and_removes_them_from_the_topic():
    q = "What do Jon and Gina both like?"
    reading = _read(q, entity_legs=1)
    assert reading.entities == ("Jon",)
    assert reading.topic == "Gina like?"  # ("both" is a stop word) an entity beyond the limit stays a plain keyword
    assert _read(q, entity_legs=0).entities == ()
    assert _read("What about Jon and Gina?", entity_legs=3).topic == ""  # no topic: no leg


def test_only_the_end_user_s_name_the_question_names_as_a_name_is_their_own():
    olivia = person_name_words(display_name="", external_id="olivia.hart")

    def own(question, **changes):
        return _read(question, name_words=olivia, **changes).own_name

    assert own("When did Olivia ask for a window seat?") == ("olivia",)
    assert own("What is Olivia's home airport?") == ("olivia's",)  # the possessive is the question's word
    assert own("When did Jonah ask for an exit row?") == ()  # someone else
    assert own("Is the hart a deer?") == ()  # her surname as a common noun is not her name
    assert own("When did Olivia ask for a window seat?", own_name_weight=0) == ()


def test_a_name_the_question_names_gets_no_synonyms():
    # "Dawn" the person is not the daybreak: a named entity's words are not read as common nouns.
    assert "daybreak" in dict(zip(*_words_and_synonyms("When is the dawn?")))["dawn"]
    found = dict(zip(*_words_and_synonyms("Where did Dawn spend the holiday?")))
    assert found["dawn"] == () and found["holiday"] == ("vacation",)
    reading = _read("Where did Dawn spend the holiday?")
    assert ("holiday", ("vacation",)) in reading.words_with_synonyms
    assert all(word != "dawn" for word, _found in reading.words_with_synonyms)


def _words_and_synonyms(question: str, **changes):
    reading = _read(question, **changes)
    return reading.words, reading.synonyms


def test_switched_off_the_question_asks_for_no_kinds_and_its_words_get_no_synonyms():
    assert _read("Which cities has Jon visited?").kinds == "city"
    assert _read("Which cities has Jon visited?", concepts=False).kinds is None
    assert dict(zip(*_words_and_synonyms("Where is the holiday?")))["holiday"] == ("vacation",)
    assert dict(zip(*_words_and_synonyms("Where is the holiday?", synonym_weight=0)))["holiday"] == ()


def test_a_boost_that_is_off_leaves_its_part_of_the_reading_empty():
    question = "When did Olivia move to Denver in June?"
    reading = _read(question)
    assert reading.intent is Intent.EVENT
    assert reading.time_window.start == datetime(2025, 6, 1, tzinfo=UTC) and reading.time_window.phrase == "June"
    off = _read(question, intent_boost=0, temporal_boost=0)
    assert off.intent is None and off.time_window is None


def test_a_question_in_the_present_perfect_gathers_only_with_the_second_hop_on():
    assert _read("Which cities has Jon visited?", hop_weight=0.5).gathers
    assert _read("What kinds of art HAVE they made?", hop_weight=0.5).gathers
    assert not _read("Which cities has Jon visited?", hop_weight=0).gathers
    # on word boundaries: "hash", "haven", "behave" are not the perfect
    for question in ("What did Jon visit in Rome?", "Where is the hash of the haven?", "How did they behave?"):
        assert not _read(question, hop_weight=0.5).gathers


@given(st.text(max_size=80))
def test_gathering_is_a_whole_word_has_or_have(text):
    words = set(re.findall(r"\w+", text.lower()))
    assert query_gathers(text) == bool(words & {"has", "have"})


from hypothesis import example  # noqa: E402

from memory_app.recall.read import reading_moment  # noqa: E402
from memory_app.recall.search import dated_filter  # noqa: E402
from tests.strategies import moments, sentences  # noqa: E402

_EDGES = [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)]


@pytest.mark.properties
@example(query="which phone did I have in 2024", now=_EDGES[0])  # "now - 30 days" raised OverflowError: a 500
@example(query="what happened yesterday", now=_EDGES[1])  # "end + grace" raised OverflowError: a 500
@given(query=sentences, now=moments)
def test_a_question_is_read_at_any_moment_of_the_calendar(query, now):
    """``now`` is the caller's ``as_of`` (any moment the calendar holds), held once by recall's
    entry (``reading_moment``): the reading and the episodes' date filter made at it never raise
    OverflowError, and a moment away from the calendar's edges is read as it is."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    held = reading_moment(now, grace_days=_options().temporal_grace_days)
    if 2 <= now.year <= 9990:
        assert held == now
    reading = query_read(query=query, name_words=frozenset(), now=held, tz=None, options=_options())
    if reading.time_window is not None:
        assert dated_filter(reading.time_window, options=_options())["bool"]["minimum_should_match"] == 1


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


@given(month=st.integers(1, 12), year=st.integers(1990, 2060), after=st.integers(0, 400),
       hour=st.integers(0, 23), template=st.sampled_from(("How many dogs did James have in {}?",
                                                         "Where did Maria work in {}?", "What phone did I use in {}?")))
def test_a_month_named_with_its_year_that_is_over_asks_about_then_however_recently(month, year, after, hour,
                                                                                    template):
    # "How many dogs did James have in March 2022?" asked on 19 April 2022 asks about March, not now;
    # asked inside March it asks about now.
    ends = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    now = ends + timedelta(days=after, hours=hour)
    query = template.format(f"{_MONTHS[month - 1]} {year}")
    assert query_asks_past(query, now=now, tz=None)
    assert not query_asks_past(query, now=datetime(year, month, 15, tzinfo=UTC), tz=None)


@given(month=st.integers(1, 12), after=st.integers(0, 29))
def test_a_month_named_without_its_year_is_about_then_only_once_it_is_30_days_over(month, after):
    # "in March" may be any year's March ("Where does she go in March?"): only a month long over is the past.
    ends = datetime(2024 + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    assert not query_asks_past(f"Where did Maria go in {_MONTHS[month - 1]}?", now=ends + timedelta(days=after),
                               tz=None)


@pytest.mark.parametrize(("query", "now"), [
    ("How many dogs does James have now?", True), ("Is his passport still valid for travel next year?", True),
    ("What's her current home airport?", True), ("Which airport does Olivia fly out of these days?", True),
    ("Does Evan drink coffee any more?", True), ("How many dogs does James have?", False),
    ("What did Caroline say about the snow?", False), ("Who knows Noway Street?", False),
])
def test_a_question_says_it_asks_about_now_in_a_word_of_now(query, now):
    assert query_says_now(query) is now
    assert _read(query).says_now is now


_NOT_YET = ("Has {p} booked the ferry", "Did {p} hear back from the landlord", "Has {p} sold the old van",
            "Is {p}'s visa through")


@given(st.sampled_from(_NOT_YET), st.sampled_from(["Ines", "Tomasz", "Ruth"]), st.sampled_from(["yet?", "yet ?", "yet?!"]))
def test_a_question_ending_in_yet_asks_about_now_and_a_yet_joining_words_does_not(stem, person, end):
    # "Has Ines booked the ferry yet?" asks whether it holds now: the value that replaced a plan answers it.
    assert query_says_now(f"{stem.format(p=person)} {end}")
    assert not query_says_now(f"{stem.format(p=person)}, small yet loud?")


@pytest.mark.parametrize(("query", "named"), [
    ("Where was Sofia working just before Harbour Books?", "Harbour Books"),
    ("What adoption step had Caroline taken before her agency interviews?", "her agency interviews"),
    ("Which phone did I have before?", ""), ("What did Kim use prior to SmartThings?", "SmartThings"),
    ("Where does Dev live now?", ""),
])
def test_the_value_a_question_asks_the_one_before_of_is_named_after_before(query, named):
    assert query_before_what(query) == named
    assert _read(query).before_what == named


def test_a_question_asks_what_held_at_the_end_of_a_period_it_names_not_by_a_word_of_before():
    asked = datetime(2023, 8, 26, tzinfo=UTC)
    assert query_past_until("What change to his eating had Sam made by late July 2023?", now=asked, tz=None) == \
        datetime(2023, 8, 1, tzinfo=UTC)
    assert query_past_until("What did Sam eat before July 2023?", now=asked, tz=None) is None
    assert query_past_until("What is Sam eating in August 2023?", now=asked, tz=None) is None
