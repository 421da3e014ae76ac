"""Phrases in free text, matched on word boundaries whatever the case and spacing: what forget
looks for in the copies of a memory (a client's context quoting a turn, a note, a stored
response), and replaces, leaving every other character as it was.

A text is read as tokens: runs of word characters (letters, digits, ``_`` and combining marks)
and single other characters (punctuation, symbols); white space only separates them. A phrase
occurs where its tokens occur in a row, each equal under case folding: "ok" occurs in "booked
it, ok?" once (the last word), never inside "booked"; "Smoke  ALARM" occurs in "the smoke alarm".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

REDACTED = "[forgotten]"


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_" or unicodedata.category(c).startswith("M")


def tokens(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of ``text``'s tokens."""
    spans: list[tuple[int, int]] = []
    n, i = len(text), 0
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif _word_char(c):
            j = i + 1
            while j < n and _word_char(text[j]):
                j += 1
            spans.append((i, j))
            i = j
        else:
            spans.append((i, i + 1))
            i += 1
    return spans


def _folded(text: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    return [text[a:b].casefold() for a, b in spans]


def phrase_spans(text: str, phrases: Iterable[str]) -> list[tuple[int, int]]:
    """Where ``phrases`` occur in ``text``: non-overlapping (start, end) spans, in order; where two
    occurrences overlap, the one starting first wins, and of two starting at once the longer."""
    wanted = [p for p in (_folded(phrase, tokens(phrase)) for phrase in phrases) if p]
    if not wanted or not text:
        return []
    folded_text = text.casefold()
    # A phrase none of whose first token is in the text cannot occur (cheap: most copies hold none).
    wanted = [p for p in wanted if p[0] in folded_text]
    if not wanted:
        return []
    spans = tokens(text)
    words = _folded(text, spans)
    found: list[tuple[int, int]] = []
    for phrase in wanted:
        size = len(phrase)
        for i in range(len(words) - size + 1):
            if words[i] == phrase[0] and words[i:i + size] == phrase:
                found.append((spans[i][0], spans[i + size - 1][1]))
    out: list[tuple[int, int]] = []
    for start, end in sorted(found, key=lambda s: (s[0], -s[1])):
        if not out or start >= out[-1][1]:
            out.append((start, end))
    return out


def contains_phrase(text: str, phrase: str) -> bool:
    return bool(phrase_spans(text, [phrase]))


def phrases_redacted(text: str, phrases: Iterable[str], *, replacement: str = REDACTED) -> str:
    """``text`` with every occurrence of ``phrases`` replaced by ``replacement``; every other
    character, white space included, as it was (``text`` itself when none occurs)."""
    spans = phrase_spans(text, phrases)
    if not spans:
        return text
    parts, at = [], 0
    for start, end in spans:
        parts += [text[at:start], replacement]
        at = end
    parts.append(text[at:])
    return "".join(parts)
