"""An episode's passages: its sentences, split by plain text rules (sentence ends and line breaks),
each of which gets a vector of its own, so that a question can meet the one sentence it asks about.
"""

from __future__ import annotations

import re

_SPEAKER = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}): +(?=\S)")
# A period after these ends no sentence ("Dr. Seuss", "Mt. Fuji").
_ABBREVIATIONS = frozenset("mr mrs ms dr prof st mt jr sr vs etc no fig approx".split())
_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9\[])|\s*\n+\s*")


def passages_of(text: str, *, limit: int) -> list[str]:
    """The passages of ``text``; ``[text]`` itself when it is one sentence. A leading speaker label
    ("Melanie: ") is repeated on every passage, so each still names who said it; a text of more
    than ``limit`` sentences is cut into that many runs of consecutive sentences."""
    speaker = _SPEAKER.match(text)
    label, body = (speaker.group(0), text[speaker.end():]) if speaker else ("", text)
    sentences: list[str] = []
    for piece in (p.strip() for p in _BREAK.split(body)):
        if not piece:
            continue
        if sentences and sentences[-1].rsplit(None, 1)[-1].rstrip(".").lower() in _ABBREVIATIONS:
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    limit = max(1, limit)
    if len(sentences) > limit:  # runs of consecutive sentences, as even as the count allows
        size, extra = divmod(len(sentences), limit)
        runs, start = [], 0
        for n in range(limit):
            end = start + size + (1 if n < extra else 0)
            runs.append(" ".join(sentences[start:end]))
            start = end
        sentences = runs
    if len(sentences) <= 1:
        return [text]
    return [f"{label}{p}" for p in sentences]
