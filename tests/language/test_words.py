"""The words of a question and of a line of talk: who a line speaks of, and to."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from language.words import FIRST_PERSON, SECOND_PERSON, persons, to_listener


@pytest.mark.parametrize("text, expected", [
    ("Melanie: Wow Caroline, you did that? Your kids must love it!", True),  # of the listener
    ("Caroline: I painted a lake last week, do you like it?", True),  # ends by asking
    ("What did you paint?", True),
    ("Caroline: I painted a lake last week. [shares a photo of a lake]", False),  # the note is no speech
    ("Caroline: Have a look. [shares a photo of a lake?]", False),  # nor is its question mark
    ("Caroline: I painted it for you, and I love it.", False),  # more of the speaker than of the listener
    ("Mel: Thanks! I love you", False),  # as much of one as of the other
    ("Caroline: The lake was calm at dawn.", False),  # of neither, and asking nothing
    ("Is that \"it?\"", True),  # a question before closing quotes
    ("We’re glad you’re here, you know", True),  # typographic apostrophes read as plain ones
])
def test_a_line_speaks_to_its_listener_when_it_says_more_of_them_or_ends_by_asking(text, expected):
    assert to_listener(text) is expected


@given(st.text(max_size=120).filter(lambda t: "[" not in t))
def test_whether_a_line_speaks_to_its_listener_is_read_from_its_words_alone(text):
    # never raises; an attachment's note appended to the line (one of its own aside) changes nothing
    assert to_listener(text) == to_listener(f"{text} [shares a photo of you, me and them?]")


@given(st.text(alphabet=st.sampled_from("abc ,.!"), max_size=40))
def test_a_line_without_persons_or_questions_speaks_to_no_one(text):
    assert not FIRST_PERSON.search(text) and not SECOND_PERSON.search(text)
    assert not to_listener(text)


@given(st.lists(st.sampled_from(["I", "me", "My", "we", "We're", "us", "Our", "you", "YOUR", "u", "U.S.",
                                         "ya", "mine", "yourself", "I'm", "myself", "x", " ", ",", "'", "_", "é", "1"]),
              max_size=30).map("".join) | st.text(max_size=60))
def test_persons_counts_the_words_the_person_patterns_find(text):
    assert persons(text) == (len(FIRST_PERSON.findall(text)), len(SECOND_PERSON.findall(text)))
