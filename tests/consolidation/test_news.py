"""News that ends a fact sharing no word with it (memory_app.consolidation.changes): a bond grown
(``bond_read`` / ``bond_target``), a new home (``home_read`` / ``home_target``), a plan told done
by its effect (``effect_sentence`` / ``effect_target``) and a diet begun after cutting down
(``diet_read`` / ``diet_target``); the lexical search that finds what they end
(``neighbour_text``); and the tellings that must leave the fact standing. Pure: our own sentences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_app.consolidation.changes import (
    FULFILLED, NATURAL, ChangeReading, Probe, StoredFact, _subject_given, bond_read, bond_target, change_read,
    change_target, diet_read,
    diet_target, effect_read, effect_sentence, effect_target, home_read, home_target, neighbour_text,
)
from memory_app.consolidation.extractors.base import FactCandidate

pytestmark = pytest.mark.properties

NAMES = ["Priya", "Tomasz", "Ines", "Kofi", "James"]
THEN = "2025-06-02T10:00:00+00:00"


def _fact(text: str) -> StoredFact:
    return StoredFact(id="f1", text=text, valid_from="2025-01-10T10:00:00+00:00")


def _ends(read, target, sentence: str, fact: StoredFact, *, name: str) -> bool:
    reading = read(sentence, self_names=[name.lower()])
    return reading is not None and target(reading, [fact], self_names=[name], told_at=THEN) is not None


# ------------------------------------------------------------------------ a bond grown
EARLIER_BOND = ["{n} came home from a holiday with {n}'s new SO.", "{n} met this amazing woman at a wedding.",
                "{n} started seeing someone from the running club.", "{n}'s girlfriend Ada is a vet.",
                "{n} has been dating a guy called Rob since May.", "{n}'s new partner is teaching {n} to sail."]
ENGAGED = ["{n}'s fiancé and {n} keep arguing about the guest list.", "{n} and Sam are engaged."]
GROWN = ["We got married last weekend, just the two of us.", "Been a mad month, got married on Saturday!",
         "Guess what, we got engaged on the ferry.", "I got married in the spring and it went by in a blur.",
         "Big news: we tied the knot at the registry office."]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(EARLIER_BOND), st.sampled_from(GROWN))
def test_a_bond_grown_ends_the_fact_of_its_earlier_stage(name, earlier, grown):
    reading = bond_read(grown, self_names=[name.lower()])
    assert reading is not None and reading.kind == NATURAL and reading.cue == "bond", grown
    link = bond_target(reading, [_fact(earlier.format(n=name))], self_names=[name], told_at=THEN)
    assert link is not None and link.by == "bond", (earlier, grown)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(ENGAGED))
def test_married_ends_engaged_and_engaged_does_not_end_married(name, engaged):
    married = "We got married in June, finally."
    assert _ends(bond_read, bond_target, married, _fact(engaged.format(n=name)), name=name)
    assert not _ends(bond_read, bond_target, "We got engaged at Christmas.", _fact(f"{name} got married in 2019."),
                     name=name)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(EARLIER_BOND), st.sampled_from([
    "My sister got married in June and I was her bridesmaid.", "We're thinking about getting married next year.",
    "My parents got married forty years ago today.", "We nearly got engaged on holiday.",
    "Are you two getting married?", "I went to a friend's wedding and danced all night.",
    "We will get married when the house is sorted.",
]))
def test_a_bond_not_grown_or_not_the_speakers_ends_nothing(name, earlier, later):
    assert not _ends(bond_read, bond_target, later, _fact(earlier.format(n=name)), name=name), later


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(GROWN))
def test_a_partner_named_only_in_passing_or_someone_elses_bond_is_no_stage_to_end(name, grown):
    for text in ("{n}'s partner is pregnant.", "{n}'s sister's boyfriend is a chef."):
        assert not _ends(bond_read, bond_target, grown, _fact(text.format(n=name)), name=name), text


def _poss(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def _replaces(sentence: str, fact: str, *, name: str) -> bool:
    """The generic change reader and target (``change_read``, ``change_target``) at a high cosine."""
    reading = change_read(sentence, self_names=[name.lower()])
    return reading is not None and change_target(
        reading, [StoredFact(id="f1", text=fact, cosine=0.9, valid_from="2025-01-10T10:00:00+00:00")],
        self_names=[name], min_topic_cosine=0.6, told_at=THEN) is not None


PARTNER_NOT_A_STAGE = ["{p} partner is pregnant.", "{p} partner works nights as a nurse.",
                       "{p} partner's mum lives with {n} now.",
                       "{p} son hurt his ankle and it was hard seeing him hurt."]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PARTNER_NOT_A_STAGE), st.sampled_from([
    "{n} got married last weekend, just the two of them.", "{n} got engaged on the ferry.",
    "{n} got married in the week of 3 March 2025."]))
def test_a_bond_grown_ends_no_fact_that_only_shares_the_partner_topic(name, fact, grown):
    text, later = fact.format(n=name, p=_poss(name)), grown.format(n=name)
    assert not _replaces(later, text, name=name), (text, later)
    assert not _ends(bond_read, bond_target, later, _fact(text), name=name), (text, later)


VALUE_WORDS = ["passion", "enthusiasm", "fascination", "love"]
HOBBIES = ["gaming", "cycling", "climbing", "pottery"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(VALUE_WORDS), st.sampled_from(HOBBIES), st.sampled_from([
    "{n} has started an evening class that mixes {p} {v} for {h} with coding.",
    "{n} started a first-aid course that suits {p} {v} for {h}.",
    "{n} joined a book club, which has nothing to do with {p} {v} for {h}."]))
def test_a_start_ends_no_fact_that_shares_only_what_it_is_said_beside(name, value, hobby, later):
    fact = f"{name} shares {_poss(name)} {value} for {hobby} with friends."
    sentence = later.format(n=name, p=_poss(name), v=value, h=hobby)
    assert not _replaces(sentence, fact, name=name), (sentence, fact)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(["garden centre", "library", "bakery on Mill Lane"]))
def test_a_start_ends_the_fact_of_what_it_begins(name, place):
    fact = f"{name} works part-time at the {place} on weekends."
    assert _replaces(f"{name} started full-time at the {place} this month.", fact, name=name)


# ------------------------------------------------------------------------ a new home
HOME = ["The heating in {n}'s flat is broken again.", "{n}'s apartment lost power during the storm.",
        "The lift in {n}'s apartment block is out.", "{n}'s house has a long garden."]
MOVED = ["We rented an apartment, but not far from the old one.", "I've rented a flat across town with a balcony.",
         "We bought a little house by the river.", "Sam and I moved in together last month.",
         "We moved into a two-bed place near the park."]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(HOME), st.sampled_from(MOVED))
def test_a_new_home_ends_the_fact_about_the_speakers_home(name, home, moved):
    reading = home_read(moved, self_names=[name.lower()])
    assert reading is not None and reading.cue == "home", moved
    link = home_target(reading, [_fact(home.format(n=name))], self_names=[name], told_at=THEN)
    assert link is not None and link.by == "home", (home, moved)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(HOME), st.sampled_from([
    "We rented a cottage in Cornwall for a week.", "My brother bought a flat in Leeds.",
    "We're thinking of renting a bigger apartment.", "We rented a van for my sister's move.",
    "I rented an apartment in Lisbon for the conference.", "We never bought a house in the end.",
    "We might rent a flat in town next year.",
]))
def test_a_stay_a_plan_or_someone_elses_home_ends_nothing(name, home, later):
    assert not _ends(home_read, home_target, later, _fact(home.format(n=name)), name=name), later


def test_a_home_of_someone_else_is_not_the_speakers():
    assert not _ends(home_read, home_target, MOVED[0], _fact("James's sister's flat is tiny."), name="James")


# ------------------------------------------------------------------------ a plan told done by its effect
THINGS = ["yoga", "physio", "acupuncture", "meditation", "PT"]
PLANNED = ["{n} is thinking about trying {x} for {n}'s back.", "{X} for {n}'s knee is on the cards.",
           "{n} is hoping to try {x} in the spring.", "{n} wants to try {x} this year."]
EFFECT = [("{X} has helped a lot.", None), ("{X} has really helped; the pain is down.", None),
          ("{X} has made a real difference for me.", None),
          ("It's helped me sleep through the night.", "{X} is a lifesaver, honestly."),
          ("It has helped me with stress.", "{X}'s a great start.")]


def _cap(thing: str) -> str:
    return thing if thing.isupper() else thing.capitalize()


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANNED), st.sampled_from(EFFECT))
def test_an_effect_of_the_thing_ends_the_plan_to_try_it(name, thing, planned, effect):
    said, before = effect
    text = effect_sentence(said.format(X=_cap(thing)), before and before.format(X=_cap(thing)))
    assert text is not None and thing.lower() in text.lower(), (said, before)
    reading = effect_read(text)
    assert reading is not None and reading.kind == FULFILLED
    fact = _fact(planned.format(n=name, x=thing, X=_cap(thing)))
    link = effect_target(reading, [fact], self_names=[name], told_at=THEN)
    assert link is not None and link.by == "effect", (fact.text, text)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANNED), st.sampled_from([
    ("My sister swears {x} has helped her back.", None), ("{X} might help, but I haven't booked it yet.", None),
    ("Has {x} helped anyone here?", None), ("{X} has helped the kids a lot.", None),
    ("It's helped me a lot.", "My sister is great."), ("It has helped me so much.", None),
    ("The new chair has helped my back.", None),
]))
def test_an_effect_hoped_for_on_someone_else_or_of_another_thing_ends_nothing(name, thing, planned, later):
    said, before = later
    text = effect_sentence(said.format(x=thing, X=_cap(thing)), before)
    reading = effect_read(text) if text else None
    fact = _fact(planned.format(n=name, x=thing, X=_cap(thing)))
    assert reading is None or effect_target(reading, [fact], self_names=[name], told_at=THEN) is None, said


# ------------------------------------------------------------------------ a diet begun after cutting down
FOODS = ["soda and candy", "crisps", "chocolate biscuits", "takeaways", "sugar", "coffee"]
CUTTING = ["{n} is reducing {n}'s {x} intake.", "{n} is cutting down on {x}.", "{n} has cut back on {x} since May.",
           "{n} cut out {x} after the check-up."]
DIET = ["I'm on a diet now, feeling great!", "Started a new diet on Monday, no more crisps.",
        "We went on a diet together.", "I began a low-carb diet last week."]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(FOODS), st.sampled_from(CUTTING), st.sampled_from(DIET))
def test_a_diet_begun_ends_the_fact_of_cutting_down_on_a_food(name, food, cutting, diet):
    assert _ends(diet_read, diet_target, diet, _fact(cutting.format(n=name, x=food)), name=name), (cutting, diet)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(FOODS), st.sampled_from(CUTTING), st.sampled_from([
    "My husband started a diet in January.", "I might go on a diet after the wedding.",
    "I'm thinking about going on a diet.", "I'm not on a diet, just eating less junk.", "Are you on a diet?",
]))
def test_a_diet_not_begun_or_someone_elses_ends_nothing(name, food, cutting, later):
    assert not _ends(diet_read, diet_target, later, _fact(cutting.format(n=name, x=food)), name=name), later


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(DIET), st.sampled_from(["screen time", "overtime", "my commute"]))
def test_cutting_down_on_what_is_no_food_is_not_ended_by_a_diet(name, diet, thing):
    assert not _ends(diet_read, diet_target, diet, _fact(f"{name} is cutting down on {thing}."), name=name)


# ------------------------------------------------------------------------ finding what they end; the subject
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(GROWN + MOVED + DIET))
def test_the_search_for_a_news_neighbour_adds_words_of_the_fact_it_ends(name, sentence):
    reading = ChangeReading(sentence=sentence, clause=sentence, kind=NATURAL, cue="", ends=True, other_subject=None,
                            first_object=False)
    probe = Probe(candidate=FactCandidate(text=sentence, episode_ids=("e1",), confidence=0.7), reading=reading,
                  holder=name)
    text = neighbour_text(sentence, probe)
    assert text.startswith(sentence) and len(text) > len(sentence)
    assert neighbour_text(sentence, None) == sentence


def test_a_sentence_opening_on_been_is_given_its_subject_without_the_question_back():
    told = _subject_given("Been a busy spring, got engaged in May - what about you?", "Evan")
    assert told is not None and told.startswith("Evan has been a busy spring") and "you" not in told
