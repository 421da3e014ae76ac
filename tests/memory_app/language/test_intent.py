"""The kind of memory a question asks for (memory_app.language.intent), and its boost through the real
Elasticsearch."""

import pytest

from memory_app.language.intent import Intent, query_intent
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.imports import episodes_import
from memory_app.recall import memory_recall, memory_recall_with_reading


@pytest.mark.parametrize("question, intent", [
    # events: a past auxiliary, a past-tense verb before any auxiliary, the present perfect
    ("When did Kenji ask about his heaters?", Intent.EVENT),
    ("Did she complain about us phoning her at work?", Intent.EVENT),
    ("On which street was the client office she wanted to walk to?", Intent.EVENT),
    ("What went wrong at the Savannah hotel?", Intent.EVENT),
    ("Which hotel lowered its nightly price after he booked?", Intent.EVENT),
    ("Has her retriever been causing false alarms?", Intent.EVENT),
    ("Have you ever talked about Paris?", Intent.EVENT),
    ("What happened last year?", Intent.EVENT),
    # states: a present auxiliary first, contractions expanded
    ("What's her current home airport?", Intent.STATE),
    ("Does Maria own any pets?", Intent.STATE),
    ("Which door is Kenji's smart lock mounted on?", Intent.STATE),  # "is" comes before "mounted"
    ("Who is Grace?", Intent.STATE),
    ("Has he a dog?", Intent.STATE),  # "has" with no participle after it
    ("Where does Alfred work?", Intent.STATE),
    # procedures: how + auxiliary + person, "what should I do", a word naming a method
    ("How do we handle her delayed baggage claim?", Intent.PROCEDURE),
    ("How can I reset the hub?", Intent.PROCEDURE),
    ("how to pair a new sensor", Intent.PROCEDURE),
    ("What should I do when the camera drops offline?", Intent.PROCEDURE),
    ("What's the fix when the bird wakes the voice assistant?", Intent.PROCEDURE),
    ("What are the steps for booking his trips?", Intent.PROCEDURE),
    ("What's the recovery procedure when his gear drops offline?", Intent.PROCEDURE),
    ("Did the technician fix the heater?", Intent.EVENT),  # "fix" as a verb names no method
    ("Did the bank process the refund?", Intent.EVENT),
    # only a question is read: the last sentence that asks
    ("My hub went offline again. What should I do?", Intent.PROCEDURE),
    ("I moved to Denver! Where is my home airport now?", Intent.STATE),
    ("My hub went offline again.", None),  # tells, asks nothing
    ("Tell me about the time she got locked out.", None),
    # not settled by the grammar
    ("Which dog of Alfred barks at night?", None),  # a capitalised name ending in -ed is not a verb
    ("Which grandkid suffers from motion sickness?", None),
    ("camping trip", None),
    ("How long is the flight?", Intent.STATE),  # "how long" asks a quantity, not a method
])
def test_a_questions_grammar_says_what_kind_of_memory_it_asks_for(question, intent):
    assert query_intent(question) is intent


def test_the_types_that_answer_the_question_are_boosted(subject, settings):
    fact = fact_write(subject=subject, text="Olivia's home airport is Denver now.")
    episode = episode_write(subject=subject, text="I moved, so Denver is my home airport now.")
    state = {h["id"]: h for h in memory_recall(subject=subject, query="What is Olivia's home airport?",
                                               explain=True)}
    assert state[fact["id"]]["explain"]["multipliers"]["intent"] == pytest.approx(1.1)  # the shipped 0.1
    assert "intent" not in state[episode["id"]]["explain"]["multipliers"]
    event = {h["id"]: h for h in memory_recall(subject=subject, query="When did Olivia move to Denver?",
                                               explain=True)}
    assert event[episode["id"]]["explain"]["multipliers"]["intent"] == pytest.approx(1.1)
    assert "intent" not in event[fact["id"]]["explain"]["multipliers"]
    assert memory_recall_with_reading(subject=subject, query="When did Olivia move to Denver?").reading.intent \
        is Intent.EVENT
    settings.ENGRAM_INTENT_BOOST = 0.0
    off = memory_recall(subject=subject, query="When did Olivia move to Denver?", explain=True)
    assert all("intent" not in h["explain"]["multipliers"] for h in off)
    assert memory_recall_with_reading(subject=subject, query="When did Olivia move to Denver?").reading.intent is None


def test_episodes_alone_keep_their_order(subject, settings):
    """A conversation's memory holds only episodes: the boost multiplies all of them alike, so it
    changes their scores, never their order."""
    texts = ("We went camping at the lake.", "The lake was cold but the kids swam.",
             "Next year we camp in the mountains.", "I bought a new tent for the trip.")
    episodes_import(subject=subject, episodes=[
        {"text": text, "occurred_at": f"2023-06-1{n}T10:00:00+00:00"} for n, text in enumerate(texts)])
    question = "When did we go camping at the lake?"
    on = memory_recall(subject=subject, query=question, explain=True)
    settings.ENGRAM_INTENT_BOOST = 0.0
    off = memory_recall(subject=subject, query=question, explain=True)
    assert [h["id"] for h in on] == [h["id"] for h in off] and len(on) == 4
    assert all(h["explain"]["multipliers"]["intent"] == pytest.approx(1.1) for h in on)
    assert [a["score"] for a in on] == pytest.approx([b["score"] * 1.1 for b in off])
