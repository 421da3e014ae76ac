"""Phrase matching and redaction (forget's copies): pure, no service. The oracle below is written
apart from the product's tokenizer: a regular expression over case-folded text."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from language.phrases import REDACTED, contains_phrase, phrase_spans, phrases_redacted, tokens

# Letters of a few languages (ß folds to ss, é and ü have case pairs), digits, white space of
# several kinds and the punctuation people type.
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéÉüÜßøØ0123456789_"
_WORDS = ["ok", "OK", "booked", "it", "the", "smoke", "alarm", "kitchen", "is", "broken", "cookbook", "look",
          "Ok?", "boo", "ked", "a", "an", "and", "forgotten"]
word = st.one_of(st.sampled_from(_WORDS), st.text(alphabet=_LETTERS, min_size=1, max_size=8))
gap = st.sampled_from([" ", "  ", "\t", "\n", " \n ", ""])
punct = st.sampled_from([",", ".", "?", "!", "-", "'", "\"", "(", ")", ":", "[", "]"])
piece = st.one_of(word, word, word, punct)


@st.composite
def texts(draw, max_pieces: int = 12) -> str:
    parts = draw(st.lists(piece, min_size=1, max_size=max_pieces))
    return "".join(p + draw(gap) for p in parts).strip() or "x"


def oracle_contains(text: str, phrase: str) -> bool:
    """``phrase`` in ``text`` on word boundaries, case folded, any white space between its tokens."""
    text, phrase = text.casefold(), phrase.casefold()
    parts = re.findall(r"\w+|[^\w\s]", phrase)
    if not parts:
        return False
    pattern = ""
    for n, part in enumerate(parts):
        if n:
            both_words = re.fullmatch(r"\w+", parts[n - 1]) and re.fullmatch(r"\w+", part)
            pattern += r"\s+" if both_words else r"\s*"
        pattern += re.escape(part)
    if re.match(r"\w", parts[0]):
        pattern = r"(?<!\w)" + pattern
    if re.search(r"\w$", parts[-1]):
        pattern += r"(?!\w)"
    return re.search(pattern, text) is not None


@settings(max_examples=400)
@given(a=texts(max_pieces=4), b=texts())
@example(a="ok", b="I looked at the cookbook and booked it, ok?")
@example(a="ok", b="The smoke alarm in the kitchen is broken")
@example(a="booked it", b="I looked at the cookbook and BOOKED   it, ok?")
@example(a="Ok?", b="booked it, ok?")
def test_forgetting_a_leaves_b_unchanged_unless_b_quotes_a(a, b):
    redacted = phrases_redacted(b, [a])
    assert contains_phrase(b, a) == oracle_contains(b, a)
    if not oracle_contains(b, a):
        assert redacted == b  # byte-identical
    else:
        assert redacted != b and REDACTED in redacted


@settings(max_examples=300)
@given(a=texts(max_pieces=4), before=texts(), after=texts(), sep=st.sampled_from([" ", "\n", " (", ", "]))
def test_only_the_quoted_phrase_is_replaced(a, before, after, sep):
    """B = before + A + after, with A standing apart: what is left of B around the quote is kept."""
    b = f"{before}{sep}{a}{sep[::-1]}{after}"
    redacted = phrases_redacted(b, [a])
    assert oracle_contains(b, a)
    # Every character outside the replaced spans is kept, in order.
    kept = []
    at = 0
    for start, end in phrase_spans(b, [a]):
        kept.append(b[at:start])
        at = end
    kept.append(b[at:])
    assert redacted == REDACTED.join(kept)
    assert len(phrase_spans(b, [a])) >= 1


@settings(max_examples=300)
@given(text=st.text(max_size=200), phrases=st.lists(st.text(max_size=30), max_size=4))
def test_never_raises_on_any_text_and_is_deterministic(text, phrases):
    once = phrases_redacted(text, phrases)
    assert once == phrases_redacted(text, phrases)
    if not any(tokens(p) for p in phrases):
        assert once == text
    for start, end in phrase_spans(text, phrases):
        assert 0 <= start < end <= len(text)


def test_the_issues_examples():
    assert phrases_redacted("I looked at the cookbook and booked it, ok?", ["ok"]) == \
        "I looked at the cookbook and booked it, [forgotten]?"
    assert phrases_redacted("The smoke alarm in the kitchen is broken", ["ok"]) == \
        "The smoke alarm in the kitchen is broken"
    assert phrases_redacted("Yes,  THE smoke\nalarm again", ["the smoke alarm"]) == "Yes,  [forgotten] again"
    assert phrases_redacted("Straße und strasse", ["STRASSE"]) == "[forgotten] und [forgotten]"
