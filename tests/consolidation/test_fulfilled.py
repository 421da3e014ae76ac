"""A plan that came true (memory_app.consolidation.changes: ``fulfilment_read``, ``plan_target``):
the speaker's plan or hope ended by a later telling of the plan's own thing as done, and the
tellings that must leave the plan standing. Pure: our own sentences."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memory_app.consolidation.changes import FULFILLED, StoredFact, fulfilment_read, plan_target

pytestmark = pytest.mark.properties

NAMES = ["Priya", "Tomasz", "Ines", "Kofi"]
# Things a plan can be about, no two sharing a word.
THINGS = ["book fair", "pottery workshop", "ski trip", "salsa class", "wine tasting", "charity marathon",
          "jazz festival", "sailing course", "choir concert", "chess tournament"]
PLANS = ["{n} is going to the {x} in March.", "{n} is planning to sign up for the {x}.",
         "{n} is thinking about the {x} this spring.", "{n} will do the {x} after the exams.",
         "{n} hopes to make it to the {x}.", "A {x} is on the cards for {n}."]
DONE = ["I went to the {x} on Saturday and loved every minute.", "Finally did the {x} last weekend!",
        "We've been to the {x} now, what a day that was.", "The {x} was brilliant, so glad I went.",
        "I started the {x} on Monday.", "Just got back from the {x}, I'm shattered."]


def _plan(name: str, thing: str, template: str) -> StoredFact:
    return StoredFact(id="p1", text=template.format(n=name, x=thing), valid_from="2025-01-10T10:00:00+00:00")


def _ends(sentence: str, fact: StoredFact, *, name: str, told_at: str = "2025-04-02T10:00:00+00:00") -> bool:
    reading = fulfilment_read(sentence, self_names=[name])
    return reading is not None and plan_target(reading, [fact], self_names=[name], told_at=told_at) is not None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from(DONE))
def test_a_plan_told_later_as_done_is_ended_as_fulfilled(name, thing, plan, done):
    fact = _plan(name, thing, plan)
    reading = fulfilment_read(done.format(x=thing), self_names=[name])
    assert reading is not None and reading.kind == FULFILLED, done
    link = plan_target(reading, [fact], self_names=[name], told_at="2025-04-02T10:00:00+00:00")
    assert link is not None and link.fact.id == "p1" and link.by == "plan", (fact.text, done)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from([
    "Can't wait for the {x}!", "Still counting the days to the {x}.", "I'm going to the {x} next week, so excited.",
    "Really looking forward to the {x}.", "Will the {x} be any good, do you think?",
]))
def test_a_plan_said_again_stays(name, thing, plan, again):
    assert not _ends(again.format(x=thing), _plan(name, thing, plan), name=name)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from([
    "The {x} got postponed to the autumn.", "We've put off the {x} until the summer.",
    "I pushed the {x} back a month.", "The {x} has been rescheduled.",
    "I booked the {x} at last.", "I signed up for the {x} today.",
    "Had a break from the {x} after my fall.", "I've taken a break from the {x}.",
]))
def test_a_plan_put_off_or_only_prepared_for_stays(name, thing, plan, later):
    assert not _ends(later.format(x=thing), _plan(name, thing, plan), name=name)


# Given up: the plan ends too, but not as fulfilled; no class reads that yet, so it stays.
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from([
    "I've decided against the {x} after all.", "We called off the {x}.", "I never made it to the {x}.",
    "Didn't go to the {x} in the end.", "The {x} was cancelled, what a shame.", "I gave up on the {x}.",
    "I dropped the idea of the {x}.", "We scrapped the {x}.",
]))
def test_a_plan_given_up_is_not_fulfilled(name, thing, plan, later):
    assert not _ends(later.format(x=thing), _plan(name, thing, plan), name=name)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS),
       st.sampled_from(DONE))
def test_another_persons_plan_is_not_ended_by_the_speakers_doing(speaker, planner, thing, plan, done):
    assume(speaker != planner)
    assert not _ends(done.format(x=thing), _plan(planner, thing, plan), name=speaker)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(["brother", "flatmate", "daughter"]), st.sampled_from(THINGS),
       st.sampled_from(["{n}'s {r} is going to the {x} in March.", "{n}'s {r} is thinking about the {x}."]),
       st.sampled_from(DONE))
def test_a_plan_of_someone_close_to_the_speaker_is_theirs(name, relation, thing, plan, done):
    fact = StoredFact(id="p1", text=plan.format(n=name, r=relation, x=thing), valid_from="2025-01-10T10:00:00+00:00")
    assert not _ends(done.format(x=thing), fact, name=name)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from([
    "My sister went to the {x} on Saturday.", "Our neighbour did the {x} last weekend.",
    "Dad started the {x} on Monday.",
]))
def test_someone_elses_doing_leaves_the_speakers_plan(name, thing, plan, theirs):
    assert not _ends(theirs.format(x=thing), _plan(name, thing, plan), name=name)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from([
    "I went to a {x} last year.", "Did the {x} years ago, back when I was at school.",
    "Back in 2019 I went to the {x}.", "We went to another {x} on Sunday.",
]))
def test_another_instance_done_leaves_the_plan(name, thing, plan, earlier):
    assert not _ends(earlier.format(x=thing), _plan(name, thing, plan), name=name)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(THINGS), st.sampled_from(PLANS),
       st.sampled_from(DONE))
def test_a_different_thing_done_leaves_the_plan(name, planned, done_thing, plan, done):
    assume(planned != done_thing)
    assert not _ends(done.format(x=done_thing), _plan(name, planned, plan), name=name)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(DONE))
def test_a_fact_that_tells_no_plan_is_not_fulfilled(name, thing, done):
    fact = StoredFact(id="f1", text=f"{name} loves the {thing}.", valid_from="2025-01-10T10:00:00+00:00")
    assert not _ends(done.format(x=thing), fact, name=name)


def test_an_outcome_told_in_the_same_sitting_as_the_plan_ends_nothing():
    fact = _plan("Priya", "ski trip", PLANS[0])
    assert not _ends("I went to the ski trip on Saturday and loved every minute.", fact, name="Priya",
                     told_at="2025-01-10T11:00:00+00:00")
    assert _ends("I went to the ski trip on Saturday and loved every minute.", fact, name="Priya")


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(THINGS), st.sampled_from(DONE), st.integers(1, 10))
def test_a_plan_for_a_month_still_ahead_is_not_ended(thing, done, ahead):
    fact = StoredFact(id="p1", text=f"Ines is going to the {thing} in {_MONTH_NAMES[(1 + ahead) % 12]} "
                                    f"{2025 + (1 + ahead) // 12}.", valid_from="2024-11-10T10:00:00+00:00")
    assert not _ends(done.format(x=thing), fact, name="Ines", told_at="2025-01-10T10:00:00+00:00")
    assert _ends(done.format(x=thing), fact, name="Ines", told_at="2026-01-10T10:00:00+00:00")


_MONTH_NAMES = ["December", "January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November"]


def test_an_activity_planned_is_ended_by_the_same_activity_done_with_the_same_object():
    fact = StoredFact(id="p1", text="Kofi is thinking of inviting her to the gala.", valid_from="2025-01-10")
    assert _ends("I invited her last night and she said yes.", fact, name="Kofi")
    assert not _ends("I invited them last night.", fact, name="Kofi")


# A telling after a clause that only leads in ("What a summer it's been - I went to the book fair"):
# what was done is in the later clause.
def _led(lead: str, sentence: str) -> str:
    return lead + (sentence if sentence.startswith(("I ", "I'")) else sentence[0].lower() + sentence[1:])


LEAD_INS = ["What a summer it's been - ", "It's been a hectic month; ", "Loads has gone on lately - "]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from(LEAD_INS),
       st.sampled_from(DONE[:3]))
def test_a_telling_after_a_lead_in_clause_ends_the_plan(name, thing, plan, lead, done):
    sentence = _led(lead, done.format(x=thing))
    assert _ends(sentence, _plan(name, thing, plan), name=name), sentence


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(THINGS), st.sampled_from(PLANS),
       st.sampled_from(LEAD_INS), st.sampled_from(DONE[:3]))
def test_a_lead_in_before_another_thing_done_leaves_the_plan(name, planned, done_thing, plan, lead, done):
    assume(planned != done_thing)
    sentence = _led(lead, done.format(x=done_thing))
    assert not _ends(sentence, _plan(name, planned, plan), name=name), sentence


def _episode(text: str):
    from datetime import UTC, datetime

    from memory_app.consolidation.extractors.base import Episode

    return Episode(id="e1", text=text, occurred_at=datetime(2025, 1, 10, 10, tzinfo=UTC).isoformat())


# A plan of a speaker in a conversation about an event ("I'm going to a book fair this month", "I've
# signed up for the charity marathon"): the statement layer may write no fact of it, and then nothing
# is there for the later telling to end. The change reader adds it, in the speaker's name.
EVENT_PLANS = ["I'm going to the {x} this month.", "Thanks! I'm going to a {x} in March.",
               "We're heading to the {x} next weekend.", "I've signed up for the {x} in May.",
               "I'm planning a {x} for the spring."]


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(EVENT_PLANS))
def test_a_speakers_plan_for_an_event_is_written_and_a_later_telling_ends_it(name, thing, plan):
    from memory_app.consolidation.changes import episode_probes

    added = episode_probes(episode=_episode(f"{name}: {plan.format(x=thing)}"), candidates=[]).added
    assert len(added) == 1 and name in added[0].text and thing in added[0].text, [c.text for c in added]
    fact = StoredFact(id="p1", text=added[0].text, valid_from="2025-01-10T10:00:00+00:00")
    assert _ends(f"I went to the {thing} and loved every minute.", fact, name=name, told_at="2026-01-10T10:00:00+00:00")


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from([
    "My brother is going to the {x} this month.", "Are you going to the {x} this month?",
    "I was going to go to the {x} but it clashed.", "I'm not going to the {x} after all.",
    "I'm going to try harder at the {x}.", "I'm going to keep at it, the {x} can wait.",
    "You should come to the {x} with me.", "I went to the {x} last week.",
]))
def test_what_is_no_plan_of_the_speakers_for_an_event_is_not_added(name, thing, said):
    from memory_app.consolidation.changes import episode_probes

    added = episode_probes(episode=_episode(f"{name}: {said.format(x=thing)}"), candidates=[]).added
    assert not any(thing in c.text and ("going" in c.text or "plan" in c.text) for c in added), [c.text for c in added]


# A plan given up ("I've decided against the ski trip", "we called off the book fair"): the plan's fact
# stops being true as well, ended as a change (kind natural), not as fulfilled.
GIVEN_UP = ["I've decided against the {x} after all.", "We called off the {x}.", "I dropped the idea of the {x}.",
            "I've decided not to do the {x} this year.", "The {x} was cancelled, what a shame.",
            "I gave up on the {x}.", "I pulled out of the {x} last week.",
            "We called off the {x} because the baby is due."]


def _gives_up(sentence: str, fact: StoredFact, *, name: str, told_at: str = "2025-04-02T10:00:00+00:00") -> bool:
    from memory_app.consolidation.changes import abandonment_read

    reading = abandonment_read(sentence, self_names=[name])
    return reading is not None and plan_target(reading, [fact], self_names=[name], told_at=told_at) is not None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from(GIVEN_UP))
def test_a_plan_given_up_ends_the_plan_as_a_change(name, thing, plan, later):
    from memory_app.consolidation.changes import NATURAL, abandonment_read

    reading = abandonment_read(later.format(x=thing), self_names=[name])
    assert reading is not None and reading.kind == NATURAL, later
    assert _gives_up(later.format(x=thing), _plan(name, thing, plan), name=name), later


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(PLANS), st.sampled_from([
    "The {x} got postponed to the autumn.", "We've pushed the {x} back a month.", "I almost cancelled the {x}.",
    "I might call off the {x}.", "Should I cancel the {x}?", "My sister called off the {x}.",
    "If it rains we'll cancel the {x}.", "I went to the {x} on Saturday.", "Can't wait for the {x}!",
    "I never cancelled the {x}, it's still on.",
]))
def test_what_gives_no_plan_up_leaves_it(name, thing, plan, later):
    assert not _gives_up(later.format(x=thing), _plan(name, thing, plan), name=name), later


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(THINGS), st.sampled_from(THINGS),
       st.sampled_from(PLANS), st.sampled_from(GIVEN_UP))
def test_another_thing_or_anothers_plan_given_up_leaves_the_plan(speaker, planner, planned, dropped, plan, later):
    assume(planned != dropped or speaker != planner)
    assert not _gives_up(later.format(x=dropped), _plan(planner, planned, plan), name=speaker), later


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(["brother", "uncle", "flatmate"]), st.sampled_from(THINGS),
       st.sampled_from(DONE), st.sampled_from(GIVEN_UP))
def test_a_plan_made_with_someone_close_is_still_the_speakers(name, relation, thing, done, given_up):
    fact = StoredFact(id="p1", text=f"{name} is going to the {thing} with {name}'s {relation}.",
                      valid_from="2025-01-10T10:00:00+00:00")
    assert _ends(done.format(x=thing), fact, name=name)
    assert _gives_up(given_up.format(x=thing), fact, name=name)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(THINGS), st.sampled_from(GIVEN_UP), st.integers(1, 10))
def test_a_plan_for_a_month_still_ahead_can_be_given_up(thing, given_up, ahead):
    fact = StoredFact(id="p1", text=f"Ines is going to the {thing} in {_MONTH_NAMES[(1 + ahead) % 12]} "
                                    f"{2025 + (1 + ahead) // 12}.", valid_from="2024-11-10T10:00:00+00:00")
    assert _gives_up(given_up.format(x=thing), fact, name="Ines", told_at="2025-01-10T10:00:00+00:00")


# A pursuit's steps (looked into → applied → interviewed → accepted): a later step of the speaker's
# for the same thing ends the fact of an earlier one, as a change (kind natural).
PURSUITS = ["graduate scheme", "foster panel", "nursing degree", "allotment plot", "apprenticeship programme"]
STEPS = [["{n} is looking into the {x}.", "{n} is researching the {x}."],
         ["{n} applied for the {x}.", "{n} has sent off an application for the {x}."],
         ["{n} had an interview for the {x}.", "{n} was interviewed for the {x}."],
         ["{n} got accepted for the {x}.", "{n} was offered a place on the {x}."]]
LATER = [[], ["I applied for the {x} last week!", "Sent off my application for the {x} on Monday."],
         ["I had an interview for the {x} yesterday.", "I've been interviewed for the {x}, fingers crossed."],
         ["I just got accepted for the {x}!", "I've been offered a place on the {x}!",
          "Passed my {x} interviews this week."]]


def _steps_on(sentence: str, fact: StoredFact, *, name: str) -> bool:
    from memory_app.consolidation.changes import step_read, step_target

    reading = step_read(sentence, self_names=[name])
    return reading is not None and step_target(reading, [fact], self_names=[name],
                                               told_at="2025-04-02T10:00:00+00:00") is not None


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PURSUITS), st.integers(0, 3), st.integers(1, 3), st.data())
def test_a_later_step_of_a_pursuit_ends_the_earlier_one(name, thing, first, then, data):
    from memory_app.consolidation.changes import NATURAL, step_read

    fact = StoredFact(id="s1", text=data.draw(st.sampled_from(STEPS[first])).format(n=name, x=thing),
                      valid_from="2025-01-10T10:00:00+00:00")
    later = data.draw(st.sampled_from(LATER[then])).format(x=thing)
    assert step_read(later, self_names=[name]).kind == NATURAL
    assert _steps_on(later, fact, name=name) == (then > first), (fact.text, later)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(PURSUITS), st.sampled_from(PURSUITS), st.integers(0, 2), st.data())
def test_a_step_of_another_pursuit_or_not_taken_leaves_the_earlier_one(name, thing, other, first, data):
    fact = StoredFact(id="s1", text=data.draw(st.sampled_from(STEPS[first])).format(n=name, x=thing),
                      valid_from="2025-01-10T10:00:00+00:00")
    later = data.draw(st.sampled_from([
        "My sister just got accepted for the {x}!", "If I get accepted for the {x} I'll celebrate.",
        "I didn't get accepted for the {x}.", "Will I get an interview for the {x}?",
        "I wasn't offered a place on the {x}.",
    ] + (["I just got accepted for the {y}!", "I had an interview for the {y} yesterday."] if other != thing else [])))
    assert not _steps_on(later.format(x=thing, y=other), fact, name=name), (fact.text, later)
