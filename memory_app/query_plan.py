"""Query decomposition: the named entities of a recall query and what it asks about them.

A question that names someone ("What books has Melanie read?") asks about that entity, but the
BM25 leg scores the name like any other word: a name the memories mention often (the end-user's
partner, a speaker) has a low idf and barely moves the ranking, so turns about books by anyone
outrank the turns about Melanie's. Decomposition adds, per named entity, an **entity leg**: a
BM25 search for the rest of the query (the topic) among the memories whose own text names the
entity, fused with the other legs by RRF (ENGRAM_RRF_ENTITY_WEIGHT). It adds candidates the
plain legs rank low (evidence about the entity that shares few words with the question) and
never removes any: the plain legs still run.

Entities are found without a model (no model download at run time): capitalised word spans that
are not the sentence's first word or a function word, and quoted phrases. It is a heuristic by
design: a missed entity leaves recall as it was; a false one adds one leg of a modest weight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from memory_app import recall as rc
from engram_core.es.schema import MemoryType

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


def entity_legs(*, plan: QueryPlan, types: list[MemoryType], scope: dict[str, str], include_superseded: bool,
                since: datetime | None, until: datetime | None, index_for: dict[MemoryType, str],
                vector: list[float] | None = None) -> tuple[list[dict], list[tuple[str, float]]]:
    """``_msearch`` header/body pairs of the entity legs and their (name, weight) for
    ``recall.fuse``: per entity, the topic searched like the BM25 leg among the memories whose
    own text (not their context: a neighbour naming someone does not make a turn about them)
    holds the entity as a phrase (``entityN``, weight ENGRAM_RRF_ENTITY_WEIGHT × the BM25 leg's);
    with ENGRAM_RECALL_ENTITY_DENSE and a query ``vector``, also the query's nearest neighbours
    among those memories (``entityN_dense``, × the dense leg's weight). Nothing without a topic."""
    weight = settings.ENGRAM_RRF_ENTITY_WEIGHT
    if not plan.topic or weight <= 0:
        return [], []
    candidates = settings.ENGRAM_RECALL_CANDIDATES
    indices = ",".join(index_for[t] for t in types)
    allowed = rc.allowed_filter(types=types, scope=scope, include_superseded=include_superseded,
                                since=since, until=until)
    body: list[dict] = []
    names: list[tuple[str, float]] = []
    for n, entity in enumerate(plan.entities, start=1):
        mentions = {"multi_match": {"query": entity, "fields": ["text", "title"], "type": "phrase"}}
        if settings.ENGRAM_RECALL_BM25:
            body += [{"index": indices, "search_type": "dfs_query_then_fetch"},
                     {"size": candidates, "_source": {"excludes": rc.SOURCE_EXCLUDES},
                      "query": {"bool": {"filter": [allowed, mentions],
                                         "must": {"multi_match": {"query": plan.topic,
                                                                  "fields": rc.bm25_fields(types),
                                                                  "type": "most_fields"}}}}}]
            names.append((f"entity{n}", weight * settings.ENGRAM_RRF_BM25_WEIGHT))
        if settings.ENGRAM_RECALL_ENTITY_DENSE and settings.ENGRAM_RECALL_DENSE and vector is not None:
            body += [{"index": indices},
                     {"size": candidates, "_source": {"excludes": rc.SOURCE_EXCLUDES},
                      "knn": {"field": "embedding", "query_vector": vector, "k": candidates,
                              "num_candidates": max(candidates, settings.ENGRAM_RECALL_NUM_CANDIDATES),
                              "filter": [allowed, mentions]}}]
            names.append((f"entity{n}_dense", weight * settings.ENGRAM_RRF_DENSE_WEIGHT))
    return body, names
