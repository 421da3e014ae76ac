"""Read: a recall's question, read once into a ``Reading`` that the later stages take as it is.

Pure: English rules (language), the end-user's name words and the options; no
Elasticsearch, no cache, no setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from engram_core.es.schema import MemoryType
from language import concepts
from language.intent import Intent, query_intent
from language.names import query_entities, without_names, without_possessive
from language.temporal import TimeWindow, query_asks_time, query_time_window
from language.words import distinct_words, without_stopwords
from memory_app.recall.options import RecallOptions

# The memory types that answer each kind of question (the intent multiplier favours them).
ANSWERED_BY: dict[Intent, frozenset[MemoryType]] = {
    Intent.EVENT: frozenset({MemoryType.EPISODIC}),
    Intent.STATE: frozenset({MemoryType.SEMANTIC, MemoryType.CATALOG}),
    Intent.PROCEDURE: frozenset({MemoryType.PROCEDURAL, MemoryType.CATALOG}),
}


@dataclass(frozen=True)
class Reading:
    """How a recall reads its question.

    ``query``: the question (the kNN legs embed it); ``keywords``: what the BM25 leg searches;
    ``words``: what linear fusion scores a lexical hit by (none under rank fusion or without a
    BM25 leg), each with its ``synonyms`` (a tuple per word, empty for none), and of them the ones
    naming the end-user (``own_name``); ``entities``: the names the question names (each may get
    legs of its own) and ``topic``, what those legs search; ``kinds``: the kinds the question asks
    for members of (matched against memories' concepts); ``time_window``: the dates it names;
    ``asks_time``: whether it asks when (or how long); ``intent``: the kind of memory it asks for.
    A boost that is off leaves its part None (False).
    """

    query: str
    keywords: str
    words: tuple[str, ...]
    synonyms: tuple[tuple[str, ...], ...]
    own_name: tuple[str, ...]
    entities: tuple[str, ...]
    topic: str
    kinds: str | None
    time_window: TimeWindow | None
    intent: Intent | None
    asks_time: bool = False
    asks_past: bool = False  # about what was true before ("before", "at first", a past date), not now
    says_now: bool = False  # says it asks about now ("now", "these days", "still"): the current value, not a story
    before_what: str = ""  # what it asks for the value just before ("before the bakery": "the bakery")
    past_until: datetime | None = None  # the end of the period over it asks about by naming it ("in March 2022")
    gathers: bool = False  # gathers what has happened over time ("What has Jon done …?"): a second hop
    asks_activity: bool = False  # asks for pastimes ("What hobbies …?"): told activities answer it

    @property
    def words_with_synonyms(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(word, its synonyms) for the words that have any."""
        return tuple((word, found) for word, found in zip(self.words, self.synonyms, strict=True) if found)


def query_read(*, query: str, name_words: frozenset[str], now: datetime, tz: tzinfo | None,
               options: RecallOptions) -> Reading:
    """``query`` read for an end-user whose name is ``name_words`` (lower case), its dates
    against ``now`` in ``tz`` (None: UTC)."""
    keywords = keyword_query(query, options=options)
    entities = tuple(query_entities(query)[: max(0, options.entity_legs)])
    lexical = options.fusion == "linear" and options.bm25
    words = tuple(_lexical_words(keywords, options=options)) if lexical else ()
    named = _entity_words(entities, options=options)
    window = query_time_window(query, now=now, tz=tz)  # read once: the boost, the past and its end use it
    past_until = _past_until(query, window, now=now)
    return Reading(
        query=query,
        keywords=keywords,
        words=words,
        synonyms=tuple(() if options.synonym_weight <= 0 or without_possessive(word) in named
                       else concepts.synonyms(word, net=_wordnet(options)) for word in words),
        own_name=_own_name(words, named=named, name_words=name_words, options=options),
        entities=entities,
        topic=without_names(keywords, entities=entities),
        kinds=concepts.query_categories(query, net=_wordnet(options)) if options.concepts and options.bm25 else None,
        time_window=window if options.temporal_boost > 0 else None,
        intent=query_intent(query) if options.intent_boost > 0 else None,
        asks_time=options.time_answer_boost > 0 and query_asks_time(query),
        asks_past=_says_before(query) or past_until is not None,
        says_now=query_says_now(query),
        before_what=query_before_what(query),
        past_until=past_until,
        gathers=options.hop_weight > 0 and query_gathers(query),
        asks_activity=options.activity_answer_boost > 0 and concepts.asks_for_pastimes(query, net=_wordnet(options)),
    )


# The present perfect ("has", "have"): a question asking what has happened over time, whose answer
# is gathered from several sessions ("Which cities has Jon visited?").
_GATHERS = re.compile(r"\b(?:has|have)\b")


def query_gathers(query: str) -> bool:
    """Whether ``query`` asks what has happened over time: it holds "has" or "have"."""
    return _GATHERS.search(query.lower()) is not None


# Words that ask what held before: "before Brightwater", "at first", "used to", "previously".
_PAST = re.compile(r"\b(?:before|previously|formerly|used to|at first|first|originally|earlier|prior to|"
                   r"back then|back when|in the past|former|old)\b", re.I)
_NOT_PAST = re.compile(r"\bhow old\b|\bfirst name\b", re.I)
PAST_DAYS = 30  # a question naming a period that ended this long ago asks about then
# A period named with its year ("March 2022", "in 2021", "3 April 2022"), not relative to now.
_DATED = re.compile(r"\b\d{4}\b")


def query_asks_past(query: str, *, now: datetime, tz: tzinfo | None) -> bool:
    """Whether ``query`` asks what was true before now rather than what is: a word of before
    ("which phone did I have before?"), a period it names with its year that is over ("how many
    dogs did James have in March 2022?", asked in April) or any other period it names that ended
    more than PAST_DAYS ago ("where did I live last year?")."""
    return _says_before(query) or query_past_until(query, now=now, tz=tz) is not None


def _says_before(query: str) -> bool:
    return _PAST.search(_NOT_PAST.sub(" ", query)) is not None


def query_past_until(query: str, *, now: datetime, tz: tzinfo | None) -> datetime | None:
    """When ``query`` asks about the past by a period it names that is over (``query_asks_past``)
    and by no word of before: that period's end, the moment it asks what held at."""
    return _past_until(query, query_time_window(query, now=now, tz=tz), now=now)


def _past_until(query: str, window: TimeWindow | None, *, now: datetime) -> datetime | None:
    """``query_past_until`` for the period ``window`` the query names."""
    if _says_before(query) or window is None or window.end is None:
        return None
    over = window.end < now - timedelta(days=PAST_DAYS) or (names_year(window) and window.end <= now)
    return window.end if over else None


def names_year(window: TimeWindow) -> bool:
    """Whether ``window`` is a calendar period named with its year (over once its end has passed,
    however recently), not one relative to now ("last week") or a part of any year ("in March")."""
    return not window.yearly and _DATED.search(window.phrase) is not None


# "… before the bakery?", "… just before Mochi arrived?": what comes after "before" names a value.
_BEFORE_WHAT = re.compile(r"\b(?:before|prior to)\s+([^?.!]*\w)", re.I)


def query_before_what(query: str) -> str:
    """The words ``query`` names a value by when it asks for the one just before it ("Where did Sofia
    work before the bakery?": "the bakery"); "" when "before" names nothing ("… did I have before?")."""
    m = _BEFORE_WHAT.search(query)
    return m.group(1) if m else ""


# Words saying a question asks for the value that holds now: "How many dogs does James have now?",
# "Is his passport still valid?", "Has she booked it yet?" (a "yet" ending the question, not one
# joining words: "small yet loud").
_NOW = re.compile(r"\b(?:now|nowadays|currently|current|these days|at the moment|at present|presently|"
                  r"any ?more|still)\b|\byet\s*\?", re.I)


def query_says_now(query: str) -> bool:
    """Whether ``query`` says it asks about now (``_NOW``): then the value that replaced the one
    it is nearest is its answer (``rank.replacement_first``)."""
    return _NOW.search(query) is not None


# How far inside the calendar a question is read: a window it names ends at most a year or so
# after ``now`` (its span ends, plus the grace the date filter adds), and a period it names may
# have ended PAST_DAYS before.
_AHEAD = timedelta(days=3 * 366)


def reading_moment(now: datetime, *, grace_days: int) -> datetime:
    """``now`` (a caller's ``as_of``: any moment the calendar holds) held far enough inside the
    calendar that reading a question at it (``query_read``: windows counted from it, the past
    before it) never leaves the calendar; a window the question names outright ("in 9999") may
    still end at its last instant, which ``search.dated_filter`` holds. Recall's entry holds it once; a moment
    inside those bounds (every moment but the calendar's first month and last three years) is
    returned as it is."""
    naive = now.replace(tzinfo=None)
    first = datetime.min + timedelta(days=PAST_DAYS + 1)
    last = datetime.max - _AHEAD - timedelta(days=max(grace_days, 0))
    return min(max(naive, first), last).replace(tzinfo=now.tzinfo)


def _wordnet(options: RecallOptions) -> concepts.WordNet:
    return concepts.wordnet(options.wordnet_dir or None)


def keyword_query(query: str, *, options: RecallOptions) -> str:
    """The BM25 leg's query: ``query`` without stop words (unless they are all it holds, or
    ENGRAM_QUERY_STOPWORDS is off)."""
    return without_stopwords(query) if options.stopwords else query


def lexical_words(text: str, *, options: RecallOptions) -> list[str]:
    """The words linear fusion scores the lexical legs by: the distinct words of ``text``'s
    ``keyword_query``, lower-cased, at most ENGRAM_LINEAR_MAX_WORDS."""
    return _lexical_words(keyword_query(text, options=options), options=options)


def _lexical_words(keywords: str, *, options: RecallOptions) -> list[str]:
    return distinct_words(keywords)[: options.max_words]


def _entity_words(entities: tuple[str, ...], *, options: RecallOptions) -> set[str]:
    """The lexical words of the names the question names, without a possessive "'s": a question's
    word is compared with them (``without_possessive``)."""
    return {without_possessive(w) for entity in entities for w in lexical_words(entity, options=options)}


def _own_name(words: tuple[str, ...], *, named: set[str], name_words: frozenset[str],
              options: RecallOptions) -> tuple[str, ...]:
    """The ``words`` naming the end-user, where the question names them as a name: a question about
    "Olivia" asked of Olivia's memory is about the "I" of her own turns."""
    if options.own_name_weight <= 0:
        return ()
    names = named & name_words
    return tuple(w for w in words if without_possessive(w) in names)
