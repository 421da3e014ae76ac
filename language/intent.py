"""What kind of memory a question asks for, read from its grammar without a model: an **event**
(past tense or present perfect: an episode), a **state** (present tense: a fact or the catalog) or
a **procedure** ("how do we ...", "what should I do", "the steps": a playbook or the catalog).
"""

from __future__ import annotations

import re
from enum import StrEnum


class Intent(StrEnum):
    EVENT = "event"
    STATE = "state"
    PROCEDURE = "procedure"


_PAST_AUX = frozenset("did didn't was wasn't were weren't had hadn't".split())
_PRESENT_AUX = frozenset("""
am is isn't are aren't do don't does doesn't can can't cannot could couldn't should shouldn't will won't would
wouldn't must shall may might
""".split())
_PERFECT_AUX = frozenset("has hasn't have haven't".split())
_PERSONS = frozenset("i we you one they he she".split())
# Nouns that name a way to do something, counted after a determiner ("the steps", "the recovery
# procedure"); those that are also verbs only right after it ("the fix", but not "Did the
# technician fix the heater?").
_METHOD_WORDS = frozenset(
    "procedure procedures steps checklist workaround instructions playbook protocol method".split())
_METHOD_VERBS = frozenset("fix process step".split())
_DETERMINERS = frozenset("the a an any our my your his her their its some this that which what".split())
# Common irregular past forms (and participles) that are not also present forms or nouns.
_IRREGULAR_PAST = frozenset("""
went gone got gotten came said told made took taken gave given saw seen sent sold bought brought left lost kept
broke broken fell fallen found felt knew known thought ran met paid wrote written began begun chose chosen drove
driven ate eaten flew flown forgot forgotten heard held meant spent stood taught understood won wore worn became
been done threw thrown caught fought sang swam
""".split())
# Words in -ed that are not past-tense verbs.
_NOT_PAST = frozenset("""
bed red shed seed feed speed breed weed indeed wed hundred sacred naked wicked beloved crooked rugged kindred
""".split())
_OPENERS = frozenset("what which when where who whom whose why how".split()) | _PAST_AUX | _PRESENT_AUX | _PERFECT_AUX
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CONTRACTION = re.compile(r"\b(what|where|who|how|when|which|why|that|there|it|he|she)['’]s\b", re.I)
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")


def _words(query: str) -> list[str]:
    """The query's words, lower-cased, but a capitalised word after the first kept as it is (a
    name such as "Alfred" is not a past-tense verb)."""
    expanded = _CONTRACTION.sub(lambda m: f"{m.group(1)} is", query)
    return [w.replace("’", "'") if i and w[0].isupper() and w != "I" else w.lower().replace("’", "'")
            for i, w in enumerate(_WORD.findall(expanded))]


def _past_form(word: str) -> bool:
    """A past-tense form or participle; never a name (``_words`` keeps names capitalised)."""
    return word in _IRREGULAR_PAST or (word.islower() and len(word) > 4 and word.endswith("ed")
                                       and word not in _NOT_PAST)


def query_intent(query: str) -> Intent | None:
    """The kind of memory ``query`` asks for, or None when its grammar
    does not say. Only a question is read: the last sentence of ``query`` that ends with a question
    mark or opens with a question word or an auxiliary ("how to pair a sensor" counts; a turn that
    only tells something, "My hub went offline again.", asks for nothing)."""
    asked = [words for sentence in _SENTENCE_END.split(query.strip())
             if (words := _words(sentence)) and (sentence.endswith("?") or words[0] in _OPENERS)]
    return _intent_of(asked[-1]) if asked else None


def _intent_of(words: list[str]) -> Intent | None:
    """A noun naming a method after a determiner, "how" + auxiliary + person, or "what should I
    do": a procedure; else the first auxiliary decides (past: an event; "has"/"have" with a
    participle after it: an event; present: a state); before any, a past-tense verb is an event."""
    if any(w in _METHOD_WORDS and _DETERMINERS & set(words[max(0, i - 2): i])
           or w in _METHOD_VERBS and i and words[i - 1] in _DETERMINERS for i, w in enumerate(words)):
        return Intent.PROCEDURE
    for i, word in enumerate(words):
        after = words[i + 1: i + 3]
        if word == "how" and (after[:1] == ["to"] or
                              len(after) == 2 and after[0] in _PRESENT_AUX and after[1] in _PERSONS):
            return Intent.PROCEDURE
        if word == "what" and len(after) == 2 and after[0] in _PRESENT_AUX and after[1] in _PERSONS and \
                words[i + 3: i + 4] == ["do"]:
            return Intent.PROCEDURE
        if word in _PAST_AUX:
            return Intent.EVENT
        if word in _PERFECT_AUX:
            return Intent.EVENT if any(_past_form(w) or w == "ever" for w in words[i + 1: i + 5]) else Intent.STATE
        if word in _PRESENT_AUX:
            return Intent.STATE
        if _past_form(word):
            return Intent.EVENT
    return None
