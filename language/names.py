"""Names in English text, without a model: the named entities of a question, and a person's name words.

A heuristic by design: a missed name leaves a recall as it was; a false one adds one leg of a
modest weight.
"""

from __future__ import annotations

import re

from language.words import WORD, is_stopword

_TOKEN = re.compile(r"[\"“”]|[A-Za-z0-9][\w]*(?:['’][A-Za-z]+)*|[.?!;:]")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,60})[\"”]")
_POSSESSIVE = re.compile(r"['’]s$", re.I)
_TITLES = frozenset({"Dr", "Mr", "Mrs", "Ms", "St", "Jr", "Sr", "Prof"})
_NAME_PART = re.compile(r"[^\W\d_]{2,}")


def without_possessive(word: str) -> str:
    """``word`` without a final "'s" ("Olivia's": "Olivia")."""
    return _POSSESSIVE.sub("", word)


def query_entities(query: str) -> list[str]:
    """Named entities of ``query``: quoted phrases, then capitalised word spans ("Dr Seuss",
    "Melanie" from "Melanie's") that do not start a sentence and are not stop words.
    A sentence's first word counts only when it is followed by another capitalised word (a
    multi-word name opening the query: "New York is ...")."""
    found: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(query)]
    span: list[str] = []
    sentence_start = True
    spans: list[tuple[list[str], bool]] = []  # (words, began at a sentence start)
    began_at_start = False
    for token in _TOKEN.findall(query):
        if token in ".?!;:\"“”":
            if token == "." and span and span[-1] in _TITLES:
                continue  # "Dr. Seuss": an abbreviation inside a name, not the end of a sentence
            if span:
                spans.append((span, began_at_start))
                span = []
            sentence_start = token in ".?!;:"
            continue
        word = without_possessive(token)
        capitalised = word[:1].isupper() and not is_stopword(word)
        if capitalised:
            if not span:
                began_at_start = sentence_start
            span.append(word)
        elif span:
            spans.append((span, began_at_start))
            span = []
        sentence_start = False
    if span:
        spans.append((span, began_at_start))
    for words, at_start in spans:
        if at_start:
            words = words if len(words) > 1 else []
        if words:
            found.append(" ".join(words))
    out: list[str] = []
    covered: set[str] = set()  # words of the entities kept so far: a span inside a quote is not another
    for entity in found:
        words = {without_possessive(w).lower() for w in WORD.findall(entity)}
        if words and not words <= covered:
            out.append(entity)
            covered |= words
    return out


def without_names(text: str, *, entities: tuple[str, ...]) -> str:
    """The words of ``text`` that are not words of ``entities`` (possessives aside, any case);
    "" when no word is left."""
    names = {without_possessive(w).lower() for e in entities for w in WORD.findall(e)}
    rest = " ".join(w for w in text.split()
                    if not {without_possessive(x).lower() for x in WORD.findall(w)} <= names)
    return rest if WORD.search(rest) else ""


def person_name_words(*, display_name: str, external_id: str) -> frozenset[str]:
    """The words of a person's name, lower-cased: their display name's or, without one, the
    letters of their id's user part ("olivia.hart": olivia, hart; "alice@example.com": alice;
    "u-42": none)."""
    if display_name.strip():
        return frozenset(w.lower() for w in _NAME_PART.findall(display_name))
    return frozenset(w.lower() for w in _NAME_PART.findall(external_id.split("@", 1)[0]))
