"""Query decomposition: the named entities of a recall query and what it asks about them.

A question that names someone ("What books has Melanie read?") asks about that entity, but the
BM25 leg scores the name like any other word: a name the memories mention often (the end-user's
partner, a speaker) has a low idf and barely moves the ranking, so turns about books by anyone
outrank the turns about Melanie's. Decomposition adds, per named entity, an **entity leg**: a
BM25 search for the rest of the query (the topic) among the memories whose own text names the
entity, fused with the other legs (at ENGRAM_RRF_ENTITY_WEIGHT × the plain leg's weight). It adds candidates the
plain legs rank low (evidence about the entity that shares few words with the question) and
never removes any: the plain legs still run.

Entities are found without a model (no model download at run time): capitalised word spans that
are not the sentence's first word or a function word, and quoted phrases. It is a heuristic by
design: a missed entity leaves recall as it was; a false one adds one leg of a modest weight.

**Guard: only common names get a leg.** The leg helps when the name no longer selects in the
plain BM25 leg, i.e. when it is common among the end-user's memories (low idf: a speaker, a
partner). A rare name already carries a high idf there, and its leg only lifts the few memories
that name it, related or not (an end-user's own memories rarely name the end-user, so "Does
Maria own any pets?" would lift Maria's one unrelated mention). So the same ``_msearch`` counts,
per entity, the memories that name it (up to ENGRAM_RECALL_ENTITY_MIN_MENTIONS, a filter-only
count), and ``entity_guard`` fuses an entity's legs only when the count reaches that minimum
(by default the legs' own candidate count: when fewer memories name the entity than a leg
fetches, the plain BM25 leg's pool can hold them all anyway). The count is cached per end-user
and entity for a few minutes (the Django cache; the key is a hash, no name), so a name asked
about again costs no count, and a rare one no legs either.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache

from engram_core.es.schema import MemoryType
from memory_app import recall as rc

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[\"“”]|[A-Za-z0-9][\w]*(?:['’][A-Za-z]+)*|[.?!;:]")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,60})[\"”]")
_POSSESSIVE = re.compile(r"['’]s$", re.I)
_WORDS = re.compile(r"\w+(?:['’]\w+)*")
_TITLES = frozenset({"Dr", "Mr", "Mrs", "Ms", "St", "Jr", "Sr", "Prof"})


@dataclass(frozen=True)
class QueryPlan:
    """``entities``: named entities, in query order; ``topic``: the BM25 keywords without them."""

    entities: tuple[str, ...]
    topic: str


def without_possessive(word: str) -> str:
    """``word`` without a final "'s" ("Olivia's": "Olivia")."""
    return _POSSESSIVE.sub("", word)


def _is_function_word(word: str) -> bool:
    return word.lower().replace("’", "'") in rc.QUERY_STOPWORDS


def query_entities(query: str) -> list[str]:
    """Named entities of ``query``: quoted phrases, then capitalised word spans ("Dr Seuss",
    "Melanie" from "Melanie's") that do not start a sentence and are not function words.
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
        word = _POSSESSIVE.sub("", token)
        capitalised = word[:1].isupper() and not _is_function_word(word)
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
        words = {_POSSESSIVE.sub("", w).lower() for w in _WORDS.findall(entity)}
        if words and not words <= covered:
            out.append(entity)
            covered |= words
    return out


def query_plan(query: str, *, keywords: str) -> QueryPlan:
    """The entities of ``query`` (at most ENGRAM_RECALL_ENTITY_LEGS) and ``keywords`` (the BM25
    leg's query) without the entities' words."""
    entities = tuple(query_entities(query)[: max(0, settings.ENGRAM_RECALL_ENTITY_LEGS)])
    names = {_POSSESSIVE.sub("", w).lower() for e in entities for w in _WORDS.findall(e)}
    topic = " ".join(w for w in keywords.split()
                     if not {_POSSESSIVE.sub("", x).lower() for x in _WORDS.findall(w)} <= names)
    return QueryPlan(entities=entities, topic=topic if _WORDS.search(topic) else "")


def enough_mentions(count: int) -> bool:
    """The guard's rule: an entity that ``count`` of the end-user's memories name gets its legs."""
    return count >= settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS


def entity_legs(*, plan: QueryPlan, types: list[MemoryType], scope: dict[str, str], include_superseded: bool,
                since: datetime | None, until: datetime | None, index_for: dict[MemoryType, str],
                vector: Callable[[], list[float]] | None = None,
                mention_counts: dict[str, int] | None = None,
                words: list[str] = (), synonyms: list[tuple[str, ...]] = (),
                own_name: frozenset[str] = frozenset()) -> tuple[list[dict], list[tuple[str, float]]]:
    """``_msearch`` header/body pairs of the entity legs and their (name, factor) for
    ``recall.fuse``: per entity, the topic searched like the BM25 leg among the memories whose
    own text (not their context: a neighbour naming someone does not make a turn about them)
    holds the entity as a phrase (``entityN``, weighted ENGRAM_RRF_ENTITY_WEIGHT × the BM25 leg's
    weight in either fusion); with ENGRAM_RECALL_ENTITY_DENSE and ``vector``, also the nearest
    neighbours among those memories (``entityN_dense``, × the dense leg's) of the vector ``vector()`` returns,
    called once, only if a kNN leg is built: the caller's embedding of the topic
    (ENGRAM_RECALL_ENTITY_TOPIC_VECTOR, see selectors.memory_recall) or of the whole query.
    Nothing without a topic.

    The guard (ENGRAM_RECALL_ENTITY_MIN_MENTIONS > 0): an entity whose count of naming memories
    is known (``mention_counts``, see ``mention_counts_cached``) gets its legs only if the count
    reaches the minimum; an unknown one gets a count first (``entityN_mentions``, over the
    requested types without the time range), and ``entity_guard`` decides after the search.
    ``words``, ``synonyms``, ``own_name``: as ``recall.msearch_body``'s, for linear fusion's lexical score."""
    weight = settings.ENGRAM_RRF_ENTITY_WEIGHT
    if not plan.topic or weight <= 0:
        return [], []
    min_mentions = settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS
    known = mention_counts or {}
    candidates = settings.ENGRAM_RECALL_CANDIDATES
    indices = ",".join(index_for[t] for t in types)
    allowed = rc.allowed_filter(types=types, scope=scope, include_superseded=include_superseded,
                                since=since, until=until)
    # The mention counts ignore the time range, so one count serves every recall of the name.
    any_time = rc.allowed_filter(types=types, scope=scope, include_superseded=include_superseded,
                                 since=None, until=None)
    body: list[dict] = []
    names: list[tuple[str, float]] = []
    dense_vector: list[float] | None = None
    for n, entity in enumerate(plan.entities, start=1):
        mentions = {"multi_match": {"query": entity, "fields": ["text", "title"], "type": "phrase"}}
        if min_mentions > 0:
            count = known.get(entity)
            if count is not None and not enough_mentions(count):
                continue  # a rare name: the plain BM25 leg already selects by it
            if count is None:  # counted up to the minimum, in the same _msearch (entity_guard reads it)
                body += [{"index": indices},
                         {"size": 0, "track_total_hits": min_mentions,
                          "query": {"bool": {"filter": [any_time, mentions]}}}]
                names.append((f"entity{n}{_MENTIONS}", 0.0))
        if settings.ENGRAM_RECALL_BM25:
            body += [rc.lexical_header(indices, words=words),
                     {"size": candidates, "_source": {"excludes": rc.SOURCE_EXCLUDES},
                      "query": {"bool": {"filter": [allowed, mentions],
                                         "must": {"multi_match": {"query": plan.topic,
                                                                  "fields": rc.bm25_fields(types),
                                                                  "type": "most_fields"}},
                                         "should": rc.word_clauses(words, synonyms, own_name)}}}]
            names.append((f"entity{n}", weight))
        if settings.ENGRAM_RECALL_ENTITY_DENSE and settings.ENGRAM_RECALL_DENSE and vector is not None:
            dense_vector = dense_vector or vector()
            body += [{"index": indices},
                     {"size": candidates, "_source": {"excludes": rc.SOURCE_EXCLUDES},
                      "query": {"knn": rc.knn_clause(field="embedding", vector=dense_vector,
                                                     filters=[allowed, mentions])}}]
            names.append((f"entity{n}_dense", weight))
    return body, names


def _count_key(*, subject: str, indices: str, entity: str) -> str:
    scope = f"{subject}|{indices}|{settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS}|{entity.casefold()}"
    digest = hashlib.sha256(scope.encode()).hexdigest()[:32]
    return f"engram:entity-mentions:{digest}"  # no name in the key: a cache holds no memory text


def mention_counts_cached(*, plan: QueryPlan, subject: str, indices: str) -> dict[str, int]:
    """The counts of naming memories that an earlier recall of this end-user found for the plan's
    entities (within ENGRAM_RECALL_ENTITY_COUNT_SECONDS), so a repeated name costs no count and a
    rare one no legs."""
    if not plan.entities or not plan.topic or settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS <= 0:
        return {}  # no legs will be built (entity_legs), so no count is needed
    keys = {_count_key(subject=subject, indices=indices, entity=e): e for e in plan.entities}
    try:
        found = cache.get_many(list(keys))
    except Exception as exc:  # the cache only saves work: without it, every name is counted again
        log.warning("entity mention counts not read from the cache: %s", exc)
        return {}
    return {keys[k]: int(v) for k, v in found.items()}


def mention_counts_store(counts: dict[str, int], *, subject: str, indices: str) -> None:
    """Keep the counts ``entity_guard`` read (capped at the minimum: the key names the minimum)."""
    if not counts:
        return
    try:
        cache.set_many({_count_key(subject=subject, indices=indices, entity=e): n for e, n in counts.items()},
                       timeout=settings.ENGRAM_RECALL_ENTITY_COUNT_SECONDS)
    except Exception as exc:
        log.warning("entity mention counts not kept in the cache: %s", exc)


_MENTIONS = "_mentions"


def entity_guard(responses: list[dict], extra: list[tuple[str, float]], *,
                 entities: tuple[str, ...] = ()) -> tuple[list[dict], list[tuple[str, float]], dict[str, int]]:
    """The entity legs' responses and (name, factor) pairs without the mention counts, and without
    the legs of an entity that fewer than ENGRAM_RECALL_ENTITY_MIN_MENTIONS memories name (see
    the module docstring); and the counts read, by entity (of ``entities``, the plan's), for
    ``mention_counts_store``. ``responses`` and ``extra`` are in ``entity_legs`` order."""
    dropped: set[str] = set()
    counts: dict[str, int] = {}
    for (name, _weight), response in zip(extra, responses, strict=True):
        if name.endswith(_MENTIONS):
            leg = name.removesuffix(_MENTIONS)
            counts[entities[int(leg.removeprefix("entity")) - 1]] = count = response["hits"]["total"]["value"]
            if not enough_mentions(count):
                dropped.add(leg)
    kept = [(r, (name, w)) for (name, w), r in zip(extra, responses, strict=True)
            if not name.endswith(_MENTIONS) and name.removesuffix("_dense") not in dropped]
    return [r for r, _ in kept], [leg for _, leg in kept], counts
