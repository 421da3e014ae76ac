"""Grounding: a candidate survives only if its content words occur in its supporting episodes.

Content words are the candidate's words minus English stop words and the few words the
extractors use to phrase a fact ("User", "lives", "prefers", "others" ...). A word counts as
present when the episodes hold it, a form of it (same first five letters, or the same word
without its -s/-es/-ies ending: "tries" for "try"), or a close spelling (rapidfuzz ratio >= 85:
"colour"/"color"). Stop words never ground anything on their own. An episode's evidence is its
text and the dates its relative time phrases name ("yesterday" said on 8 May 2023 grounds "7 May
2023": ``episode_evidence``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from rapidfuzz import fuzz, process

from language.temporal import statement_dates

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves s t d ll m re ve y also still really
""".split())
# Words the extractors phrase facts with, which the user need not have said.
PHRASING = frozenset("""
user users lives live living works work working likes like prefers prefer longer switched years old born name
allergic drives drive uses use based called named currently used others family themself themselves wants
""".split())

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("'s ", " ").replace("’s ", " "))


def content_words(text: str) -> list[str]:
    return list(dict.fromkeys(t for t in tokens(text) if t not in STOP_WORDS and t not in PHRASING
                              and (len(t) > 1 or t.isdigit())))


# The auxiliary of a first-person turn agrees with the name in the fact ("I don't" → "Rosa doesn't").
_AGREES = {"doesn": "don", "hasn": "haven", "does": "do", "has": "have", "is": "am", "was": "were"}


def ungrounded_words(text: str, episode_texts: list[str]) -> list[str]:
    """The candidate's content words that its episodes do not contain (empty: grounded)."""
    vocabulary = set(tokens(" ".join(episode_texts)))
    missing = []
    for word in content_words(text):
        if word in vocabulary or _stem(word) in vocabulary or _AGREES.get(word) in vocabulary:
            continue
        if len(word) >= 5 and any(len(v) >= 5 and v[:5] == word[:5] for v in vocabulary):
            continue
        if not word.isdigit() and process.extractOne(word, vocabulary, scorer=fuzz.ratio, score_cutoff=85):
            continue
        missing.append(word)
    return missing


def _stem(word: str) -> str:
    """The word without a third-person or plural ending ("tries" → "try", "goes" → "go")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and re.search(r"(?:s|sh|ch|x|z|o)es$", word):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def episode_evidence(text: str, occurred_at: str | datetime) -> str:
    """The episode's text followed by the dates its relative time phrases name."""
    when = occurred_at if isinstance(occurred_at, datetime) else _parse(occurred_at)
    if when is None:
        return text
    dates = " ".join(d.rendered for d in statement_dates(text, when=when))
    return f"{text} {dates}" if dates else text


def _parse(raw: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def is_grounded(text: str, episode_texts: list[str]) -> bool:
    return bool(content_words(text)) and not ungrounded_words(text, episode_texts)
