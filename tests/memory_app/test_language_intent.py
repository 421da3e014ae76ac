"""A question's intent in recall: the types that answer it are boosted (language.intent, against the real Elasticsearch)."""

import pytest
from language.intent import Intent
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.imports import episodes_import

from memory_app.recall import memory_recall, memory_recall_with_reading


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
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "intent_boost": 0.0}
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
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "intent_boost": 0.0}
    off = memory_recall(subject=subject, query=question, explain=True)
    assert [h["id"] for h in on] == [h["id"] for h in off] and len(on) == 4
    assert all(h["explain"]["multipliers"]["intent"] == pytest.approx(1.1) for h in on)
    assert [a["score"] for a in on] == pytest.approx([b["score"] * 1.1 for b in off])
