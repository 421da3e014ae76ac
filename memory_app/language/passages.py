"""An episode's passages: its sentences, each of which gets a vector of its own.

A turn of conversation often says several things ("Taking care of ourselves is vital. I'm off
to go swimming with the kids."), and one mean-pooled vector of the whole turn blurs them: a
question about one of them ("What activities does Melanie partake in?") is far from the
average. Ranking a memory by its best passage (max-passage retrieval) lets a question meet the
statement it asks about. Episodes are split; facts, playbooks and catalog entries are not (a
fact is one statement).

The split is plain text rules, no model: sentence ends (``.``, ``!``, ``?`` followed by a space
and a capital, a digit, a quote or a bracket) and line breaks. Short sentences ("Wow!") stay
passages of their own: a passage's vector is anchored in its whole turn and its context
(``memory_app.services.context.episode_vectors``), so it is never a bare interjection's; joining
fragments of under four words into the next sentence measured worse on locomo-dev (R@10 0.737
against 0.753). A leading speaker label ("Melanie: ") is repeated on every passage, so each still
names who said it. At most ``ENGRAM_PASSAGES_MAX`` passages: longer texts are cut into that many
runs of consecutive sentences.
"""

from __future__ import annotations

import re

from django.conf import settings

_SPEAKER = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}): +(?=\S)")
# A period after these ends no sentence ("Dr. Seuss", "Mt. Fuji").
_ABBREVIATIONS = frozenset("mr mrs ms dr prof st mt jr sr vs etc no fig approx".split())
_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9\[])|\s*\n+\s*")


def passages_of(text: str) -> list[str]:
    """The passages of ``text``; ``[text]`` itself when it is one sentence."""
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
    limit = max(1, settings.ENGRAM_PASSAGES_MAX)
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
