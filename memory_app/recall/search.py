"""Search: the one ``_msearch`` a recall sends, built from its ``Reading``, sent through the
end-user's own key, and its answer as typed legs.

The plain legs (BM25; kNN over the memories' vectors and the episodes' sentences) search every
requested type at once, so that ranks are comparable across types; an episodic recall searches
the facts too, in legs of their own, for the credit they give the episodes they came from. Each
named entity the question names may add legs over the memories naming it (and a count of those
memories, which the entity guard reads), and linear fusion adds the count of each word among the
end-user's own memories (their idf). docs/retrieval-quality.md, "How recall ranks", says why.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache

from engram_core.errors import ServiceUnavailable
from engram_core.es.client import unavailable_answer
from engram_core.es.schema import HIDDEN_FIELDS, VECTOR_FIELDS, MemoryType
from language.temporal import TimeWindow, moment_plus, named_day_ranges
from memory_app.recall.legs import HOP_DENSE, PLAIN_DENSE, LegId, LegKind, LegRole, entity_leg
from memory_app.recall.options import RecallOptions
from memory_app.recall.read import Reading
from memory_app.timing import timed
from memory_app.usage import usage_apply

log = logging.getLogger(__name__)

# Derived fields ranking reads (an episode's dates, rank.multipliers_for): fetched, never returned.
RANKED_FIELDS = ("event_dates", "states_time")
SOURCE_EXCLUDES = [*VECTOR_FIELDS, *(f for f in HIDDEN_FIELDS if f not in RANKED_FIELDS)]
# The date field a recall's time range filters on.
RANGE_FIELD: dict[MemoryType, str] = {
    MemoryType.EPISODIC: "occurred_at",
    MemoryType.SEMANTIC: "created_at",
    MemoryType.PROCEDURAL: "created_at",
    MemoryType.CATALOG: "created_at",
}
PASSAGE_HITS = "passage"
# Named-query prefixes: which of the question's words a lexical hit holds, and where (``word_clauses``).
WORD_IN_TEXT, WORD_IN_CONTEXT, SYNONYM_IN_TEXT, SAID_BY_NAMED = (
    "word_text_", "word_context_", "word_synonym_", "word_speaker_")
KINDS = "kinds"  # the named clause of the kinds a question asks for (language.concepts)
DATED = "dated"  # the named clause of the episodes dated in the period a question names
_TEXT_FIELDS, _CONTEXT_FIELDS = ["text", "title"], ["context", "derived_context"]
YEARS_BACK = 5  # a month or season named without a year: its occurrences this many years back


@dataclass(frozen=True)
class Allowed:
    """The memories a recall may return: of ``types`` (in the indices of ``index_for``), the
    end-user's own and their tenant's catalog (``scope``: tenant_id, user_id), superseded ones only
    with ``include_superseded``, in the time range ``since``..``until`` (either may be None).
    ``crediting``: types searched as well, only for the credit their hits give the returned ones
    (facts crediting the episodes they came from, rank.facts_credit), never returned."""

    types: list[MemoryType]
    index_for: dict[MemoryType, str]
    scope: dict[str, str]
    include_superseded: bool = False
    since: datetime | None = None
    until: datetime | None = None
    crediting: tuple[MemoryType, ...] = ()
    stale_index: str | None = None  # the facts' index, searched for superseded facts (``stale_search``)
    as_of: datetime | None = None  # what was true then (``type_filter``)

    @property
    def indices(self) -> str:
        return ",".join(self.index_for[t] for t in self.types)

    @property
    def crediting_indices(self) -> str:
        return ",".join(self.index_for[t] for t in self.crediting)

    def query(self, *, any_time: bool = False, crediting: bool = False) -> dict:
        """The filter a hit must pass: that of one of the returned types (``crediting``: of the
        crediting ones; ``any_time``: without the range)."""
        return {"bool": {"should": [type_filter(memory_type=t, scope=self.scope,
                                                include_superseded=self.include_superseded,
                                                since=None if any_time else self.since,
                                                until=None if any_time else self.until, as_of=self.as_of)
                                    for t in (self.crediting if crediting else self.types)],
                         "minimum_should_match": 1}}


@dataclass(frozen=True)
class Leg:
    """One searched leg: which (``id``), its weight ``factor`` relative to its kind's (1.0; an
    entity leg's ENGRAM_RRF_ENTITY_WEIGHT), Elasticsearch's raw ``hits`` in its order and, for
    the plain dense leg searched with ``explain``, the passage an episode scored by
    (``passages``: id → offset)."""

    id: LegId
    factor: float
    hits: list[dict[str, Any]]
    passages: dict[str, int] = field(default_factory=dict)

    @property
    def dense(self) -> bool:
        return self.id.dense

    @property
    def name(self) -> str:
        return self.id.name


@dataclass(frozen=True)
class Searched:
    """A recall's search: its legs (plain, then entity); each memory found, by id, as stored
    (``sources``, with the facts' use counts, which live in the database); the ``idf`` of the
    question's words among the memories it may return (by named clause: ``WORD_IN_TEXT`` + n,
    ``KINDS``, ``DATED``; empty under rank fusion); the ``mention_counts`` of the named entities
    (from the cache or counted now); and the types it may return (``returned``: the others were
    searched only for the credit they give, ``Allowed.crediting``)."""

    legs: tuple[Leg, ...]
    sources: dict[str, dict[str, Any]]
    idf: dict[str, float]
    mention_counts: dict[str, int]
    returned: frozenset[MemoryType] = frozenset(MemoryType)
    stale: tuple[StaleFact, ...] = ()


@dataclass(frozen=True)
class StaleFact:
    """A superseded fact near the question (``stale_search``): its similarity to the question
    (the kNN score, on the dense leg's scale), the episodes it was distilled from, and what
    replaced it when."""

    id: str
    text: str
    similarity: float
    supporting_episode_ids: tuple[str, ...]
    superseded_by: tuple[str, ...]
    valid_to: str | None


STALE_FIELDS = ["text", "supporting_episode_ids", "superseded_by", "superseded_at", "valid_to"]


def stale_search(*, vector: list[float], allowed: Allowed, options: RecallOptions) -> list[dict]:
    """Header/body of the search for the end-user's superseded facts nearest the question: the
    episodes they came from hold a value that stopped being true (``rank.stale_episodes``). Only
    when episodes are returned and superseded facts are not (explain names the fact even when the
    weights leave the episode's score alone)."""
    if allowed.stale_index is None or MemoryType.EPISODIC not in allowed.types or allowed.include_superseded \
            or allowed.as_of is not None or options.stale_facts <= 0:
        return []
    scope = allowed.scope
    filters = [{"term": {"memory_type": MemoryType.SEMANTIC.value}}, {"term": {"tenant_id": scope["tenant_id"]}},
               {"term": {"user_id": scope["user_id"]}}, {"exists": {"field": "superseded_by"}}]
    k = options.stale_facts
    return [{"index": allowed.stale_index},
            {"size": k, "_source": STALE_FIELDS,
             "query": {"knn": {"field": "embedding", "query_vector": vector, "k": k,
                               "num_candidates": max(50, 5 * k), "filter": filters}}}]


def _stale(response: dict) -> tuple[StaleFact, ...]:
    return tuple(StaleFact(id=raw["_id"], text=raw["_source"].get("text") or "", similarity=float(raw["_score"]),
                           supporting_episode_ids=tuple(raw["_source"].get("supporting_episode_ids") or ()),
                           superseded_by=tuple(raw["_source"].get("superseded_by") or ()),
                           valid_to=raw["_source"].get("valid_to"))
                 for raw in response["hits"]["hits"])


def legs_search(*, es: Any, reading: Reading, vector: list[float], topic_vector: Callable[[], list[float]],
                allowed: Allowed, explain: bool, owner: str, options: RecallOptions) -> Searched:
    """Every leg of the recall in one ``_msearch`` through ``es`` (the end-user's own client).
    ``vector``: the question's embedding; ``topic_vector``: the entity kNN legs' (called once, only
    if such a leg is built); ``explain``: the dense leg also names each episode's nearest passage;
    ``owner``: whose entity mention counts the cache keeps (the end-user's id)."""
    body = plain_legs(reading=reading, vector=vector, allowed=allowed, explain=explain, options=options)
    counted_in = _counted_in(allowed)
    known = mention_counts_cached(reading=reading, owner=owner, indices=counted_in, options=options)
    entity_body, entity = entity_legs(reading=reading, allowed=allowed, vector=topic_vector, mention_counts=known,
                                      options=options)
    dated_body, dated = dated_legs(reading=reading, allowed=allowed, vector=vector, options=options)
    counts_body = word_counts_search(
        words=reading.words, kinds=reading.kinds, own_name=reading.own_name,
        dated=dated_query(reading.time_window, options=options) if reading.time_window is not None else None,
        indices=allowed.indices, allowed=allowed.query()) if reading.words else []
    stale_body = stale_search(vector=vector, allowed=allowed, options=options)
    with timed("search"):
        responses = es.msearch(searches=body + entity_body + dated_body + counts_body + stale_body)["responses"]
    for response in responses:
        leg_answer_check(response)
    stale = _stale(responses.pop()) if stale_body else ()
    idf = word_idf(responses.pop()) if counts_body else {}
    plain = len(body) // 2
    entity_end = plain + len(entity_body) // 2
    entity_responses, entity, counted = entity_guard(responses[plain:entity_end], entity,
                                                     entities=reading.entities, options=options)
    mention_counts_store(counted, owner=owner, indices=counted_in, options=options)
    named = [*((leg, 1.0) for leg in plain_leg_ids(options, crediting=bool(allowed.crediting))), *entity, *dated]
    legs = tuple(_leg(leg, factor, response["hits"]["hits"])
                 for (leg, factor), response in zip(named, responses[:plain] + entity_responses + responses[entity_end:],
                                                    strict=True))
    sources: dict[str, dict[str, Any]] = {}
    for leg in legs:
        for raw in leg.hits:
            sources.setdefault(raw["_id"], raw["_source"])
    usage_apply(sources)  # the facts' use counts live in the database (memory_app.usage)
    return Searched(legs=legs, sources=sources, idf=idf, mention_counts={**known, **counted},
                    returned=frozenset(allowed.types), stale=stale)


def leg_answer_check(response: dict[str, Any]) -> None:
    """Raise unless one ``_msearch`` answer is whole. A leg that failed because the cluster cannot
    search now (a shard between copies while a node is lost), or that answered from only some of
    its shards, is ServiceUnavailable (503 + Retry-After): a partial answer would drop the
    end-user's memories on the missing shard without a word. Any other failure is a bug."""
    if "error" in response:
        error = response["error"]
        kind = error.get("type") if isinstance(error, dict) else None
        if not unavailable_answer(response.get("status", 0), kind):
            raise RuntimeError(f"recall leg failed: {error}")
        raise ServiceUnavailable("Elasticsearch cannot search every shard now; retry shortly",
                                 code="elasticsearch_unavailable", details={"reason": kind})
    if response.get("_shards", {}).get("failed"):
        raise ServiceUnavailable("Elasticsearch answered from only some shards; retry shortly",
                                 code="elasticsearch_unavailable", details={"reason": "partial_results"})


def _leg(leg: LegId, factor: float, hits: list[dict[str, Any]]) -> Leg:
    passages = {raw["_id"]: at for raw in hits if (at := best_passage(raw)) is not None} if leg == PLAIN_DENSE else {}
    return Leg(id=leg, factor=factor, hits=hits, passages=passages)


# ---------------------------------------------------------------- the plain legs


def plain_leg_ids(options: RecallOptions, *, crediting: bool = False) -> list[LegId]:
    """The plain legs a recall searches, in ``plain_legs`` order (then the crediting ones)."""
    kinds = [kind for kind, on in ((LegKind.BM25, options.bm25), (LegKind.DENSE, options.dense)) if on]
    legs = [LegId(kind) for kind in kinds]
    return [*legs, *(LegId(kind, LegRole.CREDIT) for kind in kinds)] if crediting else legs


def plain_legs(*, reading: Reading, vector: list[float], allowed: Allowed, explain: bool = False,
               options: RecallOptions) -> list[dict]:
    """Header/body pairs of the BM25 and the kNN leg, each over every returned type's index at
    once, then the same two over the crediting types (``Allowed.crediting``), in legs of their own
    so that they take no place from the memories returned. The BM25 leg also matches the
    memories' ``concepts`` against the kinds the question asks for, the episodes dated in the
    period it names (``dated_query``) and, under linear fusion, reports per hit which of the
    question's words it holds (``word_clauses``). The kNN leg searches the memories' own vectors
    and, for episodes, their sentences' (``passage_query``) in one search; ``explain``: it names
    each episode's nearest."""
    body = _plain_legs(reading=reading, vector=vector, types=allowed.types, indices=allowed.indices,
                       filter_=allowed.query(), explain=explain, options=options)
    if allowed.crediting:
        body += _plain_legs(reading=reading, vector=vector, types=list(allowed.crediting),
                            indices=allowed.crediting_indices, filter_=allowed.query(crediting=True), explain=False,
                            options=options)
    return body


def _plain_legs(*, reading: Reading, vector: list[float], types: list[MemoryType], indices: str, filter_: dict,
                explain: bool, options: RecallOptions) -> list[dict]:
    candidates = options.candidates
    body: list[dict] = []
    if options.bm25:
        body += [
            lexical_header(indices, words=reading.words),
            {"size": candidates, "_source": {"excludes": SOURCE_EXCLUDES},
             "query": {"bool": {"filter": [filter_], "minimum_should_match": 1, "should": [
                 {"multi_match": {"query": reading.keywords, "fields": bm25_fields(types, options=options),
                                  "type": "most_fields"}},
                 *([{"match": {"concepts": {"query": reading.kinds, "boost": options.concept_boost,
                                            # named for linear fusion's lexical score (rank.lexical_score)
                                            **({"_name": KINDS} if reading.words else {})}}}]
                   if reading.kinds else []),
                 # an episode dated in the period counts as holding the question's date
                 *([{"constant_score": {"filter": dated_query(reading.time_window, options=options), "boost": 1.0,
                                        **({"_name": DATED} if reading.words else {})}}]
                   if reading.time_window is not None and MemoryType.EPISODIC in types else []),
                 *word_clauses(reading)]}}},
        ]
    if options.dense:
        dense: dict = {"knn": knn_clause(field="embedding", vector=vector, filters=[filter_], options=options)}
        if passages_searched(types, options=options):
            dense = {"dis_max": {"queries": [dense, passage_query(vector=vector, filters=[filter_], explain=explain,
                                                                  options=options)]}}
        body += [{"index": indices}, {"size": candidates, "_source": {"excludes": SOURCE_EXCLUDES}, "query": dense}]
    return body


def text_fields(memory_type: MemoryType, *, options: RecallOptions) -> list[str]:
    """Fields the BM25 leg searches for a type, with boosts."""
    return {
        MemoryType.EPISODIC: ["text", "text.exact^0.5", f"context^{options.context_boost}",
                              f"derived_context^{options.context_boost}"],
        MemoryType.SEMANTIC: ["text", "text.exact^0.5"],
        # ``text`` already holds trigger + steps (+ refined steps): searching those fields again
        # would count a playbook's words two or three times against a fact's once.
        MemoryType.PROCEDURAL: ["text", "text.exact^0.5", f"trigger^{options.trigger_boost}"],
        MemoryType.CATALOG: ["title^1.5", "text", "text.exact^0.5"],
    }[memory_type]


def bm25_fields(types: list[MemoryType], *, options: RecallOptions) -> list[str]:
    return list(dict.fromkeys(f for t in types for f in text_fields(t, options=options)))


def type_filter(*, memory_type: MemoryType, scope: dict[str, str], include_superseded: bool,
                since: datetime | None, until: datetime | None, as_of: datetime | None = None) -> dict:
    """What a hit of one memory type must satisfy. The scope terms duplicate the DLS key's query
    on purpose: a second guard in case a key's role were ever too broad. ``as_of``: only what was
    true then (``as_of_filter``)."""
    filters: list[dict] = [{"term": {"memory_type": memory_type.value}}, {"term": {"tenant_id": scope["tenant_id"]}}]
    if memory_type is not MemoryType.CATALOG:
        filters.append({"term": {"user_id": scope["user_id"]}})
    if since or until:
        bounds = {k: v.isoformat() for k, v in (("gte", since), ("lte", until)) if v}
        filters.append({"range": {RANGE_FIELD[memory_type]: bounds}})
    if as_of is not None:
        filters += as_of_filter(memory_type, as_of=as_of, include_superseded=include_superseded)
    elif not include_superseded:
        filters.append({"bool": {"must_not": {"exists": {"field": "superseded_by"}}}})
    return {"bool": {"filter": filters}}


def as_of_filter(memory_type: MemoryType, *, as_of: datetime, include_superseded: bool) -> list[dict]:
    """What was true at ``as_of``: an episode that had happened; a fact that had become true
    (``valid_from``, else stored) and not yet stopped (``valid_to``, else superseded); a playbook
    stored and not yet superseded. The catalog is the tenant's: as it is. ``include_superseded``
    also keeps what had already stopped."""
    moment = as_of.isoformat()
    if memory_type is MemoryType.CATALOG:
        return []
    if memory_type is MemoryType.EPISODIC:
        return [{"range": {"occurred_at": {"lte": moment}}}]
    if memory_type is MemoryType.PROCEDURAL:
        began: dict[str, Any] = {"range": {"created_at": {"lte": moment}}}
        ended: dict[str, Any] = {"range": {"superseded_at": {"lte": moment}}}
        return [began] if include_superseded else [began, {"bool": {"must_not": ended}}]
    began = {"bool": {"should": [{"range": {"valid_from": {"lte": moment}}},
                                 {"bool": {"must_not": {"exists": {"field": "valid_from"}},
                                           "filter": {"range": {"created_at": {"lte": moment}}}}}],
                      "minimum_should_match": 1}}
    ended = {"bool": {"should": [{"range": {"valid_to": {"lte": moment}}},
                                 {"bool": {"must_not": {"exists": {"field": "valid_to"}},
                                           "filter": {"range": {"superseded_at": {"lte": moment}}}}}],
                      "minimum_should_match": 1}}
    return [began] if include_superseded else [began, {"bool": {"must_not": ended}}]


def lexical_header(indices: str, *, words: tuple[str, ...] | list[str]) -> dict:
    """The ``_msearch`` header of a lexical leg. Under rank fusion (no ``words``) Elasticsearch's
    BM25 score orders the leg, so its term statistics are first gathered across all the indices
    (``dfs_query_then_fetch``), making scores comparable across types; under linear fusion the
    leg is scored from the end-user's own memories (rank.lexical_score) and that round is not spent."""
    return {"index": indices} if words else {"index": indices, "search_type": "dfs_query_then_fetch"}


def knn_clause(*, field: str, vector: list[float], filters: list[dict], options: RecallOptions) -> dict:
    """A ``knn`` query's options: the ``candidates`` nearest per index, the scope ``filters``
    applied inside the kNN search (a pre-filter, not a filter of its results). As a query rather
    than a search's top-level ``knn`` section it runs in the query phase, with no round of its own,
    and combines with another query (``passage_query``)."""
    candidates = options.candidates
    return {"field": field, "query_vector": vector, "k": candidates,
            "num_candidates": max(candidates, options.num_candidates), "filter": filters}


def passages_searched(types: list[MemoryType], *, options: RecallOptions) -> bool:
    return options.dense and options.passages and MemoryType.EPISODIC in types


def passage_query(*, vector: list[float], filters: list[dict], explain: bool = False,
                  options: RecallOptions) -> dict:
    """The kNN query over the episodes' sentence vectors (``passages.embedding``, nested): an
    episode scores by its nearest passage, and the dense leg takes the larger of that and its own
    vector's score (``dis_max``). The other indices of the leg lack the field (``ignore_unmapped``).
    With ``explain``, each hit also carries its nearest passage (``best_passage``)."""
    nested = {"path": "passages", "score_mode": "max", "ignore_unmapped": True,
              "query": {"knn": knn_clause(field="passages.embedding", vector=vector, filters=filters,
                                          options=options)}}
    if explain:
        nested["inner_hits"] = {"name": PASSAGE_HITS, "size": 1, "_source": False}
    return {"nested": nested}


def best_passage(raw: dict) -> int | None:
    """The offset of the passage a dense hit scored by, if its score is its nearest passage's
    rather than its own vector's (present with ``explain``)."""
    hits = raw.get("inner_hits", {}).get(PASSAGE_HITS, {}).get("hits", {}).get("hits") or []
    if not hits or hits[0]["_score"] < raw["_score"]:
        return None
    return hits[0]["_nested"]["offset"]


# ---------------------------------------------------------------- linear fusion's word counts


def _holds(word: str, fields: list[str], **options) -> dict:
    """The clause matching a memory whose ``fields`` hold ``word`` (analysed as those fields are):
    one definition for the named clause a hit reports and the filter that counts such memories."""
    return {"multi_match": {"query": word, "fields": fields, **options}}


def _said_by_user(**options) -> dict:
    """The clause matching an episode the end-user said (role "user": their "I")."""
    return {"term": {"role": {"value": "user", **options}}}


def word_clauses(reading: Reading) -> list[dict]:
    """Named clauses that score nothing (boost 0) and make Elasticsearch report, per hit, which of
    the question's words its own text (or a catalog entry's title) holds, which its context holds,
    whether its text holds a synonym of a word and, for a word naming the end-user, whether it is
    an episode they said (``matched_queries``)."""
    clauses: list[dict] = []
    for n, (word, synonyms) in enumerate(zip(reading.words, reading.synonyms, strict=True)):
        clauses += [_holds(word, _TEXT_FIELDS, boost=0.0, _name=f"{WORD_IN_TEXT}{n}"),
                    _holds(word, _CONTEXT_FIELDS, boost=0.0, _name=f"{WORD_IN_CONTEXT}{n}")]
        if synonyms:
            clauses.append(_holds(" ".join(synonyms), _TEXT_FIELDS, boost=0.0, _name=f"{SYNONYM_IN_TEXT}{n}"))
        if word in reading.own_name:
            clauses.append(_said_by_user(boost=0.0, _name=f"{SAID_BY_NAMED}{n}"))
    return clauses


def dated_query(window: TimeWindow, *, options: RecallOptions) -> dict:
    """The episodes dated in ``window``: told in it, or (ENGRAM_RECALL_EVENT_DATES) whose words
    name a day in it (``event_dates``: "last Saturday" resolved when the episode was stored)."""
    told = [{"range": {"occurred_at": {"gte": start.isoformat(), "lt": end.isoformat()}}}
            for start, end in window.spans(back=YEARS_BACK)]
    named = [{"bool": {"filter": [
        {"range": {"event_dates": {"gte": first.isoformat(), "lt": last.isoformat(), "relation": "intersects"}}},
        {"range": {"event_dates": {"gte": low.isoformat(), "lt": high.isoformat(), "relation": "within"}}}]}}
        for (first, last), (low, high) in named_day_ranges(window, back=YEARS_BACK)] if options.event_dates else []
    return {"bool": {"should": [*told, *named], "minimum_should_match": 1}}


def dated_legs(*, reading: Reading, allowed: Allowed, vector: list[float],
               options: RecallOptions) -> tuple[list[dict], list[tuple[LegId, float]]]:
    """Header/body pairs of the dated legs and their (leg, factor): when the question names a
    period and episodes are returned, the question searched like the plain legs (BM25 and kNN)
    among the episodes dated in it (``dated_filter``), fused at ``dated_weight`` (RankingConfig) × a
    plain leg's. A turn that tells what happened that day rarely holds the question's words
    ("on 16 March" against "yesterday I went bowling"), so it is not among the plain legs'
    candidates for the date to favour; among the few turns of the period it is."""
    weight = options.dated_weight
    if weight <= 0 or reading.time_window is None or MemoryType.EPISODIC not in allowed.types:
        return [], []
    indices = allowed.index_for[MemoryType.EPISODIC]
    filters = [allowed.query(), dated_filter(reading.time_window, options=options)]
    body: list[dict] = []
    legs: list[tuple[LegId, float]] = []
    if options.bm25:
        body += [lexical_header(indices, words=reading.words),
                 {"size": options.candidates, "_source": {"excludes": SOURCE_EXCLUDES},
                  "query": {"bool": {"filter": filters,
                                     "must": {"multi_match": {"query": reading.keywords,
                                                              "fields": bm25_fields([MemoryType.EPISODIC],
                                                                                    options=options),
                                                              "type": "most_fields"}},
                                     "should": word_clauses(reading)}}}]
        legs.append((LegId(LegKind.BM25, LegRole.DATED), weight))
    if options.dense:
        body += [{"index": indices},
                 {"size": options.candidates, "_source": {"excludes": SOURCE_EXCLUDES},
                  "query": {"knn": knn_clause(field="embedding", vector=vector, filters=filters, options=options)}}]
        legs.append((LegId(LegKind.DENSE, LegRole.DATED), weight))
    return body, legs


HOP_HITS = 3  # the first hits whose vectors the second hop searches with


def hop_leg(*, es: Any, first: list[tuple[str, str | None]], allowed: Allowed, options: RecallOptions) -> Leg | None:
    """The second hop (``hop_weight``, RankingConfig): the vectors of the ``first`` episodes found
    ((id, session id), best first), each a kNN query among the episodes of the other sessions,
    an episode scored by the nearest of them; a leg fused at ``hop_weight`` × a plain dense leg's.
    The evidence of a question gathering over time lies in several sessions, and the later
    tellings resemble the first found more than the question. Two searches through ``es`` (the
    vectors, then the hop); None when off or no vector is found."""
    if options.hop_weight <= 0 or not options.dense or not first or MemoryType.EPISODIC not in allowed.types:
        return None
    index = allowed.index_for[MemoryType.EPISODIC]
    ids = [memory_id for memory_id, _ in first]
    with timed("hop"):
        found = es.msearch(searches=[{"index": index}, {
            "size": len(ids), "_source": {"includes": ["embedding"], "exclude_vectors": False},
            "query": {"bool": {"filter": [allowed.query(), {"ids": {"values": ids}}]}}}])["responses"]
        leg_answer_check(found[0])
        vectors = [raw["_source"]["embedding"] for raw in found[0]["hits"]["hits"] if raw["_source"].get("embedding")]
        if not vectors:
            return None
        sessions = sorted({session for _, session in first if session})
        filters = [allowed.query(), {"bool": {"must_not": [{"ids": {"values": ids}},
                                                           {"terms": {"session_id": sessions}}]}}]
        answer = es.msearch(searches=[{"index": index}, {
            "size": options.candidates, "_source": {"excludes": SOURCE_EXCLUDES},
            "query": {"dis_max": {"queries": [
                {"knn": knn_clause(field="embedding", vector=vector, filters=filters, options=options)}
                for vector in vectors]}}}])["responses"]
        leg_answer_check(answer[0])
    return Leg(id=HOP_DENSE, factor=options.hop_weight, hits=answer[0]["hits"]["hits"])


def with_leg(searched: Searched, leg: Leg) -> Searched:
    """``searched`` with one more leg, its new memories' sources added."""
    sources = dict(searched.sources)
    for raw in leg.hits:
        sources.setdefault(raw["_id"], raw["_source"])
    return replace(searched, legs=(*searched.legs, leg), sources=sources)


def dated_filter(window: TimeWindow, *, options: RecallOptions) -> dict:
    """The episodes dated in ``window`` as the time-window multiplier counts them: told in it or
    up to ENGRAM_TEMPORAL_GRACE_DAYS after it (an event is told after it happened), or whose words
    name a day of it (``dated_query``)."""
    grace = timedelta(days=options.temporal_grace_days)
    # Held at the calendar's last instant: a window the question names ("in 9999") ends there, however
    # the reading moment was held (read.reading_moment).
    told = [{"range": {"occurred_at": {"gte": start.isoformat(), "lt": moment_plus(end, grace).isoformat()}}}
            for start, end in window.spans(back=YEARS_BACK)]
    return {"bool": {"should": [*told, dated_query(window, options=options)], "minimum_should_match": 1}}


def word_counts_search(*, words: tuple[str, ...] | list[str], indices: str, allowed: dict, kinds: str | None = None,
                       own_name: tuple[str, ...] | frozenset[str] = (), dated: dict | None = None) -> list[dict]:
    """The header/body pair counting, among the memories the recall may return (``allowed``,
    read through the end-user's own key), how many there are, how many hold each word in their
    text or title (for a word of the end-user's ``own_name``, also the episodes they said: in their
    own memory their name says little), how many are of one of the ``kinds`` and how many are
    ``dated`` in the period the question names."""
    filters = {f"{WORD_IN_TEXT}{n}": {"bool": {"should": [_holds(word, _TEXT_FIELDS), _said_by_user()]}}
               if word in own_name else _holds(word, _TEXT_FIELDS) for n, word in enumerate(words)}
    if kinds:
        filters[KINDS] = {"match": {"concepts": kinds}}
    if dated:
        filters[DATED] = dated
    return [{"index": indices},
            {"size": 0, "track_total_hits": True, "query": {"bool": {"filter": [allowed]}},
             "aggs": {"words": {"filters": {"filters": filters}}}}]


def word_idf(response: dict) -> dict[str, float]:
    """BM25's idf of each word, log(1 + (N − n + 0.5) / (n + 0.5)), from ``word_counts_search``'s
    counts: N the end-user's memories (with their tenant's catalog), n those holding the word."""
    total = response["hits"]["total"]["value"]
    buckets = response.get("aggregations", {}).get("words", {}).get("buckets", {})
    return {name: math.log(1.0 + (total - bucket["doc_count"] + 0.5) / (bucket["doc_count"] + 0.5))
            for name, bucket in buckets.items()}


# ---------------------------------------------------------------- the entity legs and their guard


def enough_mentions(count: int, *, options: RecallOptions) -> bool:
    """The guard's rule: an entity that ``count`` of the end-user's memories name gets its legs."""
    return count >= options.entity_min_mentions


def entity_legs_possible(reading: Reading, *, options: RecallOptions) -> bool:
    """Whether the question's entities can get legs at all: it asks something besides the names."""
    return bool(reading.topic) and options.entity_weight > 0


def entity_legs(*, reading: Reading, allowed: Allowed, vector: Callable[[], list[float]],
                mention_counts: dict[str, int], options: RecallOptions) -> tuple[list[dict], list[tuple[LegId, float]]]:
    """Header/body pairs of the entity legs and their (leg, factor): per entity, the topic
    searched like the BM25 leg among the memories whose own text (not their context) holds the
    entity as a phrase (``entityN``), and the nearest neighbours of ``vector()`` among them
    (``entityN_dense``). An entity whose count of naming memories is known (``mention_counts``)
    gets its legs only if the count reaches ENGRAM_RECALL_ENTITY_MIN_MENTIONS; an unknown one gets
    a count first (``entityN_mentions``, without the time range), read by ``entity_guard``."""
    weight = options.entity_weight
    if not entity_legs_possible(reading, options=options):
        return [], []
    min_mentions = options.entity_min_mentions
    candidates = options.candidates
    indices = allowed.indices
    filter_ = allowed.query()
    any_time = allowed.query(any_time=True)  # so that one count serves every recall of the name
    body: list[dict] = []
    names: list[tuple[LegId, float]] = []
    dense_vector: list[float] | None = None
    for n, entity in enumerate(reading.entities, start=1):
        mentions = {"multi_match": {"query": entity, "fields": ["text", "title"], "type": "phrase"}}
        if min_mentions > 0:
            count = mention_counts.get(entity)
            if count is not None and not enough_mentions(count, options=options):
                continue  # a rare name: the plain BM25 leg already selects by it
            if count is None:  # counted up to the minimum, in the same _msearch (entity_guard reads it)
                body += [{"index": indices},
                         {"size": 0, "track_total_hits": min_mentions,
                          "query": {"bool": {"filter": [any_time, mentions]}}}]
                names.append((entity_leg(LegKind.MENTIONS, n), 0.0))
        if options.bm25:
            body += [lexical_header(indices, words=reading.words),
                     {"size": candidates, "_source": {"excludes": SOURCE_EXCLUDES},
                      "query": {"bool": {"filter": [filter_, mentions],
                                         "must": {"multi_match": {"query": reading.topic,
                                                                  "fields": bm25_fields(allowed.types, options=options),
                                                                  "type": "most_fields"}},
                                         "should": word_clauses(reading)}}}]
            names.append((entity_leg(LegKind.BM25, n), weight))
        if options.entity_dense and options.dense:
            dense_vector = dense_vector or vector()
            body += [{"index": indices},
                     {"size": candidates, "_source": {"excludes": SOURCE_EXCLUDES},
                      "query": {"knn": knn_clause(field="embedding", vector=dense_vector,
                                                  filters=[filter_, mentions], options=options)}}]
            names.append((entity_leg(LegKind.DENSE, n), weight))
    return body, names


def entity_guard(responses: list[dict], names: list[tuple[LegId, float]], *, entities: tuple[str, ...],
                 options: RecallOptions) -> tuple[list[dict], list[tuple[LegId, float]], dict[str, int]]:
    """The entity legs' responses and (leg, factor) pairs without the counts, and without the
    legs of an entity that fewer than ENGRAM_RECALL_ENTITY_MIN_MENTIONS memories name; and the
    counts read, by entity. ``responses`` and ``names`` are in ``entity_legs`` order."""
    dropped: set[int | None] = set()
    counts: dict[str, int] = {}
    for (leg, _factor), response in zip(names, responses, strict=True):
        if leg.kind is LegKind.MENTIONS and leg.entity is not None:
            counts[entities[leg.entity - 1]] = count = response["hits"]["total"]["value"]
            if not enough_mentions(count, options=options):
                dropped.add(leg.entity)
    kept = [(r, (leg, f)) for (leg, f), r in zip(names, responses, strict=True)
            if leg.kind is not LegKind.MENTIONS and leg.entity not in dropped]
    return [r for r, _ in kept], [leg for _, leg in kept], counts


def _counted_in(allowed: Allowed) -> str:
    """What a recall's entity mention counts were taken over (part of their cache key)."""
    return allowed.indices + ("+superseded" if allowed.include_superseded else "")


def _count_key(*, owner: str, indices: str, entity: str, options: RecallOptions) -> str:
    scope = f"{owner}|{indices}|{options.entity_min_mentions}|{entity.casefold()}"
    digest = hashlib.sha256(scope.encode()).hexdigest()[:32]
    return f"engram:entity-mentions:{digest}"  # no name in the key: a cache holds no memory text


def mention_counts_cached(*, reading: Reading, owner: str, indices: str, options: RecallOptions) -> dict[str, int]:
    """The counts of naming memories that an earlier recall of this end-user found for the
    question's entities (within ENGRAM_RECALL_ENTITY_COUNT_SECONDS), so that a repeated name costs
    no count and a rare one no legs."""
    if not reading.entities or not reading.topic or options.entity_min_mentions <= 0:
        return {}  # no legs will be built (entity_legs), so no count is needed
    keys = {_count_key(owner=owner, indices=indices, entity=e, options=options): e for e in reading.entities}
    try:
        found = cache.get_many(list(keys))
    except Exception as exc:  # noqa: BLE001 - the cache only saves work: without it, every name is counted again
        log.warning("entity mention counts not read from the cache: %s", exc)
        return {}
    return {keys[k]: int(v) for k, v in found.items()}


def mention_counts_store(counts: dict[str, int], *, owner: str, indices: str, options: RecallOptions) -> None:
    """Keep the counts ``entity_guard`` read (capped at the minimum: the key names the minimum)."""
    if not counts:
        return
    try:
        cache.set_many({_count_key(owner=owner, indices=indices, entity=e, options=options): n
                        for e, n in counts.items()}, timeout=options.entity_count_seconds)
    except Exception as exc:  # noqa: BLE001 - the cache only saves work
        log.warning("entity mention counts not kept in the cache: %s", exc)
