"""Changes found in natural phrasing (memory_app.consolidation.changes): the reading of a sentence
and the link to the fact it replaces. Pure: no service, our own sentences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_app.consolidation.changes import HARSH, NATURAL, StoredFact, change_read, change_target

pytestmark = pytest.mark.properties


@pytest.mark.parametrize("sentence", [
    "We switched from Virgin Media to BT last week.",
    "I finally replaced the old Pixel with an iPhone 15.",
    "Text me instead of emailing from now on.",
    "We moved to Glasgow in the spring.",
    "I quit the coffee shop, I'm a bus driver now.",
    "I've changed the thermostat to 19 degrees.",
    "I don't drink coffee any more.",
    "Now we're with Hyperoptic.",
])
def test_a_change_of_the_speakers_own_value_is_read_as_natural(sentence):
    reading = change_read(sentence, self_names=["dana"])
    assert reading is not None and reading.kind == NATURAL, sentence


def test_a_correction_is_harsh():
    reading = change_read("Sorry, I meant 18 at night, not 16.")
    assert reading is not None and reading.kind == HARSH


@pytest.mark.parametrize("sentence", [
    "Should we switch to BT?",  # a question
    "We might move to Leeds next year.",  # a hypothesis
    "We were going to move but decided to stay put.",  # a plan given up
    "I'm driving a hire car for a week while mine is at the garage.",  # temporary
    "We adopted a second cat, so now there are two.",  # an addition
    "My husband changed his alarm to 6.",  # someone else's own thing
    "I switched the router off and on again.",  # nothing changed
    "I won't quit, whatever the boss says.",  # a negated cue
    "We're never moving again, this flat is perfect.",
])
def test_what_keeps_the_value_is_no_change(sentence):
    assert change_read(sentence) is None, sentence


def _fact(text: str, cosine: float = 0.5, id_: str = "f1") -> StoredFact:
    return StoredFact(id=id_, text=text, cosine=cosine)


def test_the_change_links_to_the_fact_naming_its_old_value_or_its_topic():
    reading = change_read("We switched from Virgin Media to BT last week.")
    link = change_target(reading, [_fact("User's internet provider is Virgin Media.", 0.6),
                                   _fact("User lives in Leeds.", 0.2, "f2")])
    assert link is not None and link.fact.id == "f1" and link.by == "value"
    reading = change_read("I've changed the daytime thermostat to 19 degrees.")
    link = change_target(reading, [_fact("The thermostat is set to 21 degrees during the day.", 0.75)])
    assert link is not None and link.by == "topic"


def test_a_part_or_a_move_of_the_same_thing_replaces_nothing():
    reading = change_read("I replaced the batteries in the thermostat.")
    assert reading is None or change_target(reading, [_fact("User's thermostat is a Nest.", 0.6)]) is None
    reading = change_read("We moved the Eero up to the landing.")
    assert reading is None or change_target(reading, [_fact("User's router is an Eero.", 0.6)]) is None


def test_the_same_end_told_again_and_a_bare_vector_with_a_weak_cue_replace_nothing():
    reading = change_read("Money has been tight ever since I lost the depot job.")
    assert reading is not None
    assert change_target(reading, [_fact("User lost the depot job in March.", 0.8)]) is None
    reading = change_read("Now the real work starts on the garden.")
    assert reading is not None and change_target(reading, [_fact("User loves roses.", 0.7)]) is None


def test_a_topic_link_needs_the_cosine_and_a_bare_vector_link_its_own():
    reading = change_read("I've changed the daytime thermostat to 19 degrees.")
    facts = [_fact("The thermostat is set to 21 degrees during the day.", 0.2)]
    assert change_target(reading, facts, min_topic_cosine=0.25) is None
    assert change_target(reading, facts, min_topic_cosine=0.1) is not None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.lists(st.text(max_size=120), max_size=4),
       st.floats(min_value=-1, max_value=1, allow_nan=False))
def test_any_text_reads_without_raising_and_the_same_way_twice(sentence, facts, cosine):
    reading = change_read(sentence, self_names=["dana"])
    assert reading == change_read(sentence, self_names=["dana"])
    if reading is not None:
        stored = [_fact(text, cosine, f"f{n}") for n, text in enumerate(facts)]
        link = change_target(reading, stored, self_names=["dana"])
        assert link is None or link.fact in stored
