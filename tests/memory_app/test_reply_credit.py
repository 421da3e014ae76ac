"""Reply credit: an answer ranks by the question it answers (real Elasticsearch)."""

from datetime import UTC, datetime, timedelta

import pytest

from memory_app.recall import asks
from memory_app.selectors import memory_recall
from memory_app.services.episodes import episode_write

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("Anything you're excited about in the adoption process?", True),
    ("Really? Tell me more.", True),
    ('She asked "why not?" and left.', True),
    ("What about you? [shares a photo of a lake]", True),
    ("See https://example.com/?q=1 for the form.", False),  # a query string asks nothing
    ("We went camping last weekend.", False),
])
def test_a_text_asks_when_one_of_its_sentences_ends_in_a_question_mark(text, expected):
    assert asks(text) is expected


def _session(subject, texts, session_id):
    return [episode_write(subject=subject, text=t, session_id=session_id,
                          occurred_at=T0 + timedelta(minutes=n)) for n, t in enumerate(texts)]


def _by_id(hits):
    return {h["id"]: h for h in hits}


def test_the_answer_to_a_matching_question_gains_a_share_of_its_score(subject, settings):
    question, answer, after = _session(subject, [
        "Melanie: How was your trip to Lisbon with the choir?",
        "Caroline: Wonderful, we ate grilled sardines every night.",  # never says Lisbon or trip
        "Melanie: Sounds lovely.",
    ], "s1")
    told, reply = _session(subject, ["Caroline: The choir sang in Lisbon.", "Melanie: Lovely."], "s2")
    hits = _by_id(memory_recall(subject=subject, query="How was Caroline's trip to Lisbon?", explain=True))

    credited = hits[answer["id"]]["explain"]
    assert credited["replies_to"] == question["id"]
    assert credited["reply_credit"] == pytest.approx(settings.ENGRAM_REPLY_CREDIT * hits[question["id"]]["score"])
    # The credit is added to the fused, weighted score, and shown apart from it.
    weighted = credited[f"{credited['fusion']}_score"]
    for factor in credited["multipliers"].values():
        weighted *= factor
    assert hits[answer["id"]]["score"] == pytest.approx(weighted + credited["reply_credit"])
    # Only a predecessor that asks gives credit, and only to the turn right after it.
    for memory in (question, after, told, reply):
        if memory["id"] in hits:
            assert "replies_to" not in hits[memory["id"]]["explain"]


def test_no_credit_when_switched_off_or_without_a_session(subject, settings):
    question, answer = _session(subject, ["Melanie: How was your trip to Lisbon?",
                                          "Caroline: Wonderful, sardines every night."], "s1")
    loose_question = episode_write(subject=subject, text="Melanie: Did you like Porto?",
                                   occurred_at=T0 + timedelta(hours=1))
    loose_answer = episode_write(subject=subject, text="Caroline: Porto was rainy.",
                                 occurred_at=T0 + timedelta(hours=1, minutes=1))
    hits = _by_id(memory_recall(subject=subject, query="How was the trip to Lisbon and Porto?", explain=True))
    assert hits[answer["id"]]["explain"]["replies_to"] == question["id"]
    assert "replies_to" not in hits[loose_answer["id"]]["explain"]  # no session: no predecessor is known
    assert loose_question["id"] in hits

    settings.ENGRAM_REPLY_CREDIT = 0.0
    hits = _by_id(memory_recall(subject=subject, query="How was the trip to Lisbon and Porto?", explain=True))
    assert all("reply_credit" not in h["explain"] for h in hits.values())
    explained = hits[answer["id"]]["explain"]
    weighted = explained[f"{explained['fusion']}_score"]
    for factor in explained["multipliers"].values():
        weighted *= factor
    assert hits[answer["id"]]["score"] == pytest.approx(weighted)


def test_a_question_scored_zero_credits_nothing(settings):
    """Under linear fusion the last candidate of the only leg that found a memory scores 0: its
    reply gains nothing, so explain does not claim a credit (the inspector would say "gains
    reply_credit" beside 0.00000)."""
    from memory_app.recall import Hit, MemoryType, reply_credit

    def episode(id_, text, context_ids=(), score=0.0):
        hit = Hit(id=id_, memory_type=MemoryType.EPISODIC, source={"text": text, "context_ids": list(context_ids)})
        hit.score = score
        return hit

    zero, scored = episode("q0", "How was Lisbon?"), episode("q1", "How was Porto?", score=0.8)
    after_zero, after_scored = episode("a0", "Sunny.", ["q0"], 0.5), episode("a1", "Rainy.", ["q1"], 0.5)
    reply_credit([zero, scored, after_zero, after_scored])
    assert after_zero.replies_to is None and after_zero.score == 0.5
    assert after_scored.replies_to == "q1"
    assert after_scored.score == pytest.approx(0.5 + settings.ENGRAM_REPLY_CREDIT * 0.8)
