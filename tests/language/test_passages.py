"""Episode passages: a text's sentences, each with its speaker label (language.passages; no
service: what memory_app stores and searches of them is tests/memory_app/test_language_passages.py)."""

import re

import pytest
from hypothesis import example, given
from language.passages import passages_of

from tests.strategies import sentences, texts

LIMIT = 12  # ENGRAM_PASSAGES_MAX's default (config/settings/base.py)
LONG = ("Maya: Thanks for asking about the move! The boxes are finally unpacked and the kitchen works. "
        "I'm off to go swimming with the kids. Talk to you soon!")


def test_passages_are_sentences_with_the_speaker_label_carried_over():
    assert passages_of(LONG, limit=LIMIT) == [
        "Maya: Thanks for asking about the move!",
        "Maya: The boxes are finally unpacked and the kitchen works.",
        "Maya: I'm off to go swimming with the kids.",
        "Maya: Talk to you soon!",
    ]
    assert passages_of("One sentence only.", limit=LIMIT) == ["One sentence only."]
    assert passages_of('I loved "Charlotte\'s Web." It was fun.', limit=LIMIT) == ['I loved "Charlotte\'s Web."', "It was fun."]
    assert passages_of("We met Dr. Seuss at St. Mary's. Then we left.", limit=LIMIT) == ["We met Dr. Seuss at St. Mary's.",
                                                                            "Then we left."]
    assert passages_of("first line\nsecond line", limit=LIMIT) == ["first line", "second line"]
    assert passages_of("3.5 stars, i.e. fine.", limit=LIMIT) == ["3.5 stars, i.e. fine."]


def test_a_long_text_is_cut_into_at_most_the_configured_runs_of_sentences():
    text = " ".join(f"Sentence number {n} is here." for n in range(1, 8))
    runs = passages_of(text, limit=3)
    assert len(runs) == 3
    assert " ".join(runs) == text  # nothing lost, order kept
    assert runs[0] == "Sentence number 1 is here. Sentence number 2 is here. Sentence number 3 is here."


# ---------------------------------------------------------------- properties

_LABEL = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}): +(?=\S)")


@pytest.mark.properties
@given(text=texts | sentences.map(lambda s: f"Melanie: {s} Dr. Seuss wrote it.\n{s}"))
@example(text="Melanie: " + "It rained. " * 500)
@example(text="\x1c\x1d. A\u2028B.\u00a0C")
def test_passages_keep_every_word_in_order_whatever_the_text(text):
    passages = passages_of(text, limit=LIMIT)
    assert passages == passages_of(text, limit=LIMIT) and passages
    if len(passages) == 1:
        assert passages == [text]
        return
    assert len(passages) <= LIMIT
    label = m.group(0) if (m := _LABEL.match(text)) else ""
    assert all(p.startswith(label) for p in passages)
    assert [w for p in passages for w in p[len(label):].split()] == text[len(label):].split()
