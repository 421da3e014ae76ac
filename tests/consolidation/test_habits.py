"""A habit paused, given up or cut down, and a count of pets grown (memory_app.consolidation.changes:
``habit_read`` / ``habit_target``, ``count_read`` / ``count_target``): the speaker's earlier fact of
doing or liking the thing, or of how many animals of a kind they have, ended by a later telling;
and the tellings that must leave it standing. Pure: our own sentences."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_app.consolidation.changes import NATURAL, StoredFact, count_read, count_target, habit_read, habit_target

pytestmark = pytest.mark.properties

NAMES = ["Priya", "Tomasz", "Ines", "Kofi"]
THEN = "2025-04-02T10:00:00+00:00"
# Pastimes, no two sharing a word.
PASTIMES = ["pottery", "bouldering", "choir singing", "salsa dancing", "woodwork", "life drawing", "rowing"]
DOING = ["{n} goes to a {x} class every Thursday.", "{n} made a little vase in {x} class.",
         "{n} loves {x}, it's so relaxing.", "{n} has been doing {x} for a year now.",
         "{x} is {n}'s favourite way to unwind."]
PAUSED = ["I needed to take a break from {x} after my wrist injury.", "Sprained my wrist, so I'm on a break from {x}.",
          "I've given up {x}, it was taking too much time.", "I stopped doing {x} in the spring.",
          "I'm taking a break from {x} this term.", "Quit {x} last month, my back couldn't take it."]
# Treats and drinks, no two sharing a word.
TREATS = ["ginger snaps", "energy drinks", "salted crisps", "chocolate biscuits", "fizzy cola"]
LIKING = ["{x} are {n}'s weakness.", "{n} can't resist {x}.", "{n} has {x} every afternoon.", "{n} loves {x}."]
LIMITED = ["New regime: I'm limiting myself to two {x} a week.", "I'm cutting down on {x} these days.",
           "Cut back on {x} since the new year.", "I've given up {x} completely.", "I'm reducing my {x} to one a week."]


def _fact(text: str) -> StoredFact:
    return StoredFact(id="h1", text=text, valid_from="2025-01-10T10:00:00+00:00")


def _habit_ends(sentence: str, fact: StoredFact, *, name: str) -> bool:
    reading = habit_read(sentence, self_names=[name])
    return reading is not None and habit_target(reading, [fact], self_names=[name], told_at=THEN) is not None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PASTIMES), st.sampled_from(DOING), st.sampled_from(PAUSED))
def test_a_pastime_paused_or_given_up_ends_the_fact_of_doing_it(name, thing, doing, paused):
    fact = _fact(doing.format(n=name, x=thing))
    reading = habit_read(paused.format(x=thing), self_names=[name])
    assert reading is not None and reading.kind == NATURAL and reading.ends, paused
    link = habit_target(reading, [fact], self_names=[name], told_at=THEN)
    assert link is not None and link.fact.id == "h1" and link.by == "habit", (fact.text, paused)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(TREATS), st.sampled_from(LIKING), st.sampled_from(LIMITED))
def test_a_treat_cut_down_or_given_up_ends_the_fact_of_liking_it(name, thing, liking, limited):
    assert _habit_ends(limited.format(x=thing), _fact(liking.format(n=name, x=thing)), name=name), (liking, limited)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PASTIMES), st.sampled_from(PASTIMES), st.sampled_from(DOING), st.data())
def test_a_pause_not_taken_or_not_the_speakers_or_of_another_thing_leaves_the_fact(name, thing, other, doing, data):
    later = data.draw(st.sampled_from([
        "My sister is taking a break from {x}.", "I might take a break from {x} in the summer.",
        "I'd never give up {x}.", "I didn't quit {x} in the end.", "Should I take a break from {x}?",
        "I took a break from work to do more {x}.", "We had a short break during {x} class.",
        "I took a break from {x} years ago but I'm back at it.", "If I get hurt I'll have to stop {x}.",
        "Kids, take a break from {x} and come eat!",
    ] + (["I needed to take a break from {y} after my wrist injury.", "I've given up {y}."] if other != thing else [])))
    assert not _habit_ends(later.format(x=thing, y=other), _fact(doing.format(n=name, x=thing)), name=name), later


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PASTIMES), st.sampled_from(PAUSED))
def test_a_pause_said_again_or_of_someone_elses_pastime_ends_nothing(name, thing, paused):
    for text in ("{n} is on a break from {x}.", "{n}'s brother goes to a {x} class every Thursday."):
        assert not _habit_ends(paused.format(x=thing), _fact(text.format(n=name, x=thing)), name=name), text


# A count of pets grown: "two dogs", then a puppy adopted.
KINDS = {"dog": ["puppy", "pup", "dog", "rescue dog"], "cat": ["kitten", "cat"], "rabbit": ["bunny", "rabbit"]}
COUNTS = ["{n}'s two {k}s are the best of friends.", "{n} has three {k}s.", "{n} and her partner have two {k}s.",
          "{n} walks {n}'s two {k}s every morning."]
ADDED = ["I adopted a {y} from the shelter last week!", "We brought home a little {y} on Saturday.",
         "Guess what, I've adopted a {y}, his name is Ned.", "We got another {y}!"]


def _count_ends(sentence: str, fact: StoredFact, *, name: str) -> bool:
    reading = count_read(sentence, self_names=[name])
    return reading is not None and count_target(reading, [fact], self_names=[name], told_at=THEN) is not None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(sorted(KINDS)), st.sampled_from(COUNTS), st.sampled_from(ADDED), st.data())
def test_an_animal_of_the_kind_adopted_ends_the_count(name, kind, count, added, data):
    young = data.draw(st.sampled_from(KINDS[kind]))
    fact = _fact(count.format(n=name, k=kind))
    reading = count_read(added.format(y=young), self_names=[name])
    assert reading is not None and reading.kind == NATURAL, added
    link = count_target(reading, [fact], self_names=[name], told_at=THEN)
    assert link is not None and link.by == "count", (fact.text, added, young)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(sorted(KINDS)), st.sampled_from(sorted(KINDS)), st.data())
def test_another_kind_someone_elses_a_stay_or_no_count_leaves_the_fact(name, kind, other, data):
    fact_text = data.draw(st.sampled_from(COUNTS + ["{n}'s {k}s are called Max and Daisy.", "{n} loves {k}s.",
                                                    "{n}'s sister has two {k}s."]))
    fact = _fact(fact_text.format(n=name, k=kind))
    young = data.draw(st.sampled_from(KINDS[kind]))
    later = data.draw(st.sampled_from(
        ["My sister adopted a {y} last week!", "I'm thinking of adopting a {y}.", "We're fostering a {y} for a week.",
         "I'd love to adopt a {y} one day.", "Did you adopt a {y}?", "I looked after my neighbour's {y} on Saturday."]
        + (["I adopted a {o} from the shelter last week!"] if other != kind else [])))
    assert not _count_ends(later.format(y=young, o=KINDS[other][0]), fact, name=name), (fact.text, later)
    if fact_text not in COUNTS:
        assert not _count_ends(ADDED[0].format(y=young), fact, name=name), fact.text


# A speaker's own news told with the subject left out ("Researching the course", "Quit the choir"):
# the reader adds it as the speaker's fact, so a later step or pause can end it.
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PASTIMES), st.sampled_from([
    ("Researching the {x} course at the college - fingers crossed.", "{n} is researching"),
    ("Applied for the {x} course last week, so nervous!", "{n} applied"),
    ("Quit {x} last month, my back couldn't take it.", "{n} quit"),
    ("Adopted a kitten from the shelter, she's tiny.", "{n} adopted"),
]))
def test_a_speakers_news_told_without_a_subject_is_added_as_theirs(name, thing, told):
    from memory_app.consolidation.changes import episode_probes
    from memory_app.consolidation.extractors.base import Episode

    sentence, opening = told
    episode = Episode(id="e1", text=f"{name}: {sentence.format(x=thing)}", occurred_at=THEN)
    found = episode_probes(episode=episode, candidates=[])
    assert any(c.text.startswith(opening.format(n=name)) for c in found.added), (sentence, found)
    assert any(p.candidate.text.startswith(opening.format(n=name)) for p in found.probes), sentence


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PASTIMES), st.sampled_from([
    "My sister is researching the {x} course.", "Researching the {x} course sounds like hard work.",
    "Should I quit {x}?", "Quitting {x} would be a mistake.", "Loving the {x} lately!",
]))
def test_news_of_someone_else_or_no_news_adds_no_fact_of_the_speaker(name, thing, sentence):
    from memory_app.consolidation.changes import episode_probes
    from memory_app.consolidation.extractors.base import Episode

    episode = Episode(id="e1", text=f"{name}: {sentence.format(x=thing)}", occurred_at=THEN)
    found = episode_probes(episode=episode, candidates=[])
    assert not any(c.text.startswith(name) for c in found.added), (sentence, found.added)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["James", "Agnes", "Marcus"]), st.sampled_from(sorted(KINDS)), st.sampled_from(ADDED), st.data())
def test_a_count_written_with_a_bare_possessive_is_the_speakers(name, kind, added, data):
    # "James' two dogs": the apostrophe is the possessive, not part of the name
    fact = _fact(f"{name}' two {kind}s are the best of friends.")
    assert _count_ends(added.format(y=data.draw(st.sampled_from(KINDS[kind]))), fact, name=name), fact.text
