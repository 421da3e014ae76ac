"""Memory reads. Everything here reads through the subject's own document-level-security key."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone as django_timezone

from elasticsearch import Elasticsearch, helpers
from engram_core.errors import ValidationFailed
from memory_app.language import concepts
from memory_app import query_plan as qp
from memory_app import recall as rc
from memory_app.embeddings import get_embedder, get_reranker
from engram_core.es.schema import HIDDEN_FIELDS, USER_TYPES, VECTOR_FIELDS, MemoryType, alias_name
from memory_app.freshness import refresh_ensure
from memory_app.timing import timed
from memory_app.language.intent import Intent, query_intent
from memory_app.language.temporal import TimeWindow, query_time_window
from memory_app.usage import usage_apply
from memory_app.validation import (
    clean_datetime,
    clean_k,
    clean_text,
    clean_timezone,
    clean_types,
    memory_not_found,
)
from tenants.models import AuditEvent, Subject, Tenant
from tenants.selectors import index_prefix_for, memory_scope
from tenants.services.clients import subject_es_client, writer_es_client
from tenants.services.guard import require_dls


_HIDDEN = frozenset((*VECTOR_FIELDS, *HIDDEN_FIELDS))


def _alias(subject: Subject, memory_type: MemoryType) -> str:
    """The alias of ``memory_type`` in the indices holding ``subject``'s tenant (shared or dedicated)."""
    return alias_name(memory_type, prefix=index_prefix_for(tenant=subject.tenant))


def _public(memory_type: MemoryType, memory_id: str, source: dict[str, Any]) -> dict[str, Any]:
    return {"id": memory_id, **{k: v for k, v in source.items() if k not in _HIDDEN}, "memory_type": memory_type.value}


def _with_usage(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` (public dicts) with the facts' use counts, which live in the database."""
    usage_apply({i["id"]: i for i in items if "memory_type" in i})
    return items


def memory_recall(*, subject: Subject, query: str, k: int = 10, types: list[str] | None = None,
                  since: datetime | str | None = None, until: datetime | str | None = None,
                  include_superseded: bool = False, explain: bool = False,
                  now: datetime | None = None, timezone: str | None = None, ensure_fresh: bool = True,
                  es: Elasticsearch | None = None, exclude: str = "") -> list[dict[str, Any]]:
    """The k most useful memories for ``query``: hybrid BM25 + kNN over every requested type and
    the tenant catalog in one ``_msearch``, fused and weighted as described in memory_app.recall.
    ``timezone``: the end-user's IANA zone, whose calendar days the dates a query names are
    read in (memory_app.language.temporal; default UTC).

    A memory is listed once per content (``recall.without_copies``; explain names the copies).
    ``exclude``: a memory id left out before that (a turn's own episode).

    ``explain`` adds per hit its ranks, fused score and every multiplier. A read only: facts
    handed to an agent are counted as used by the caller (``usage.usage_record_recalled``), so a
    preview, an eval or a probe counts nothing. ``es``: the subject's own client, resolved by the
    caller (a turn runs this on a pool thread).
    """
    query = clean_text(query, field="query", limit=settings.ENGRAM_MAX_QUERY_CHARS)
    k = clean_k(k)
    memory_types = clean_types(types)
    since = clean_datetime(since, field="since")
    until = clean_datetime(until, field="until")
    if since and until and since > until:
        raise ValidationFailed("since must not be after until", details={"field": "since"}, code="invalid_time_range")
    tz = clean_timezone(timezone)
    require_dls()
    now = now or django_timezone.now()
    if ensure_fresh:
        refresh_ensure(subject=subject)  # the subject's last turn, stored without waiting, is found

    es = es or subject_es_client(subject=subject)
    prefix = index_prefix_for(tenant=subject.tenant)
    embedder = get_embedder()
    with timed("embed"):
        vector = embedder.embed_query(query)
    index_for = {t: alias_name(t, prefix=prefix) for t in memory_types}
    fusion = rc.fusion()
    plan = qp.query_plan(query, keywords=rc.keyword_query(query))
    words = rc.lexical_words(query) if fusion == "linear" else []
    synonyms = _synonyms(words, entities=plan.entities)
    own = own_name(subject, words=words, entities=plan.entities)
    kinds = concepts.query_categories(query)
    body = rc.msearch_body(types=memory_types, query=query, vector=vector,
                           scope=memory_scope(subject=subject), include_superseded=include_superseded,
                           since=since, until=until, index_for=index_for, explain=explain, words=words,
                           synonyms=synonyms, own_name=own, kinds=kinds)
    counted_in = _mentions_counted_in(index_for, include_superseded=include_superseded)

    def entity_vector() -> list[float]:
        # Inside an entity's filter every memory names the entity, so its name in the query vector
        # ranks nothing there: the kNN legs search the topic, as the entity BM25 legs do.
        return embedder.embed_query(plan.topic) if settings.ENGRAM_RECALL_ENTITY_TOPIC_VECTOR else vector

    extra_body, extra = qp.entity_legs(
        plan=plan, types=memory_types, scope=memory_scope(subject=subject), include_superseded=include_superseded,
        since=since, until=until, index_for=index_for, vector=entity_vector,
        mention_counts=qp.mention_counts_cached(plan=plan, subject=str(subject.user_id), indices=counted_in),
        words=words, synonyms=synonyms, own_name=own)
    counts_body = rc.word_counts_search(
        words=words, kinds=kinds, own_name=own, indices=",".join(index_for.values()),
        allowed=rc.allowed_filter(types=memory_types, scope=memory_scope(subject=subject),
                                  include_superseded=include_superseded, since=since, until=until)) if words else []
    with timed("search"):
        responses = es.msearch(searches=body + extra_body + counts_body)["responses"]
    for response in responses:
        if "error" in response:
            raise RuntimeError(f"recall leg failed: {response['error']}")
    idf = rc.word_idf(responses.pop()) if counts_body else {}
    plain = len(body) // 2
    extra_responses, extra, counts = qp.entity_guard(responses[plain:], extra, entities=plan.entities)
    qp.mention_counts_store(counts, subject=str(subject.user_id), indices=counted_in)
    hits = list(rc.fuse(responses=responses[:plain] + extra_responses,
                        extra=extra, fusion=fusion, idf=idf).values())
    usage_apply({h.id: h.source for h in hits})  # facts' use counts live in the database (memory_app.usage)
    if reranker := get_reranker():
        pool = sorted(hits, key=lambda h: -h.fused)[: settings.ENGRAM_RERANK_POOL]
        scores = reranker.rerank(query, [_rerank_text(h) for h in pool])
        for rank, (hit, value) in enumerate(sorted(zip(pool, scores, strict=True), key=lambda p: -p[1]), start=1):
            hit.rerank_score, hit.rerank_rank = float(value), rank
        hits = pool
    window = query_time_window(query, now=now, tz=tz) if settings.ENGRAM_TEMPORAL_BOOST > 0 else None
    scored = [h for h in rc.score(hits, now=now, window=window, intent=_intent(query)) if h.id != exclude]
    ranked, copies = rc.without_copies(scored, k=k)
    results = []
    for hit in ranked:
        item = {**_public(hit.memory_type, hit.id, hit.source), "score": hit.score}
        if explain:
            item["explain"] = {**hit.explain(), **({"copies": copies[hit.id]} if hit.id in copies else {})}
        results.append(item)
    return results


def _entity_words(entities: tuple[str, ...]) -> set[str]:
    """The lexical words of the names a query names (``query_plan``'s ``entities``), lower case,
    without a possessive "'s": what a question's word is compared with (``qp.without_possessive``)."""
    return {qp.without_possessive(w) for entity in entities for w in rc.lexical_words(entity)}


def _synonyms(words: list[str], *, entities: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Per word of the lexical score, its synonyms (``concepts.synonyms``); none for a word of a
    named entity the query names ("Grace", "Summer"): a name is not the common noun it spells."""
    named = _entity_words(entities)
    return [() if qp.without_possessive(word) in named else concepts.synonyms(word) for word in words]


_NAME_PART = re.compile(r"[^\W\d_]{2,}")


def subject_name_words(subject: Subject) -> frozenset[str]:
    """The words of the end-user's name, lower-cased: their display name's or, without one, the
    letters of their external id's user part ("olivia.hart": olivia, hart; "alice@example.com":
    alice; "u-42": none)."""
    if subject.display_name.strip():
        return frozenset(w.lower() for w in _NAME_PART.findall(subject.display_name))
    return frozenset(w.lower() for w in _NAME_PART.findall(subject.external_id.split("@", 1)[0]))


def own_name(subject: Subject, *, words: list[str], entities: tuple[str, ...]) -> frozenset[str]:
    """Those of the lexical ``words`` (``recall.lexical_words``: "olivia", "olivia's") that name
    the end-user, where the query names them as a name (``entities``): a question about "Olivia"
    asked of Olivia's memory is about the "I" of her own turns, so the lexical score credits
    those turns with the word (ENGRAM_OWN_NAME_WEIGHT; none at 0)."""
    if settings.ENGRAM_OWN_NAME_WEIGHT <= 0:
        return frozenset()
    names = _entity_words(entities) & subject_name_words(subject)
    return frozenset(w for w in words if qp.without_possessive(w) in names)


def _intent(query: str) -> Intent | None:
    return query_intent(query) if settings.ENGRAM_INTENT_BOOST > 0 else None


def _mentions_counted_in(index_for: dict[MemoryType, str], *, include_superseded: bool) -> str:
    """What a recall's entity mention counts were taken over (part of their cache key)."""
    return ",".join(index_for.values()) + ("+superseded" if include_superseded else "")


@dataclass(frozen=True)
class EntityReading:
    """A name the query names: how many of the end-user's memories name it (counted up to
    ENGRAM_RECALL_ENTITY_MIN_MENTIONS; None when no recall counted it lately) and whether it gets
    entity legs (None: decided by the next recall's count)."""

    name: str
    mentions: int | None
    legs: bool | None


@dataclass(frozen=True)
class QueryReading:
    """How a recall reads its query: the BM25 leg's ``keywords``, the named ``entities`` and the
    ``topic`` their legs search (by words and, with ENGRAM_RECALL_ENTITY_TOPIC_VECTOR, by the
    topic's embedding), the date ``time_window`` that boosts episodes (None: no date named,
    or the boost is off), the ``kinds`` the question asks for members of, which the BM25
    leg matches against memories' concepts (memory_app.language.concepts; None: none), and the ``intent``,
    the kind of memory it asks for, whose types are boosted (memory_app.language.intent; None: not settled,
    or the boost is off), the ``synonyms`` a memory may name instead of a word of the
    question, for a share of its score (word, its synonyms; ``concepts.synonyms``), and the
    words of the question that name the end-user (``own_name``), which their own turns are
    credited with."""

    keywords: str
    topic: str
    entities: tuple[EntityReading, ...]
    time_window: TimeWindow | None
    topic_vector: bool
    kinds: str | None = None
    intent: Intent | None = None
    synonyms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    own_name: tuple[str, ...] = ()


def query_reading(*, subject: Subject, query: str, types: list[str] | None = None,
                  include_superseded: bool = False, now: datetime | None = None,
                  timezone: str | None = None) -> QueryReading:
    """How ``memory_recall`` reads ``query`` for ``subject`` (the inspector shows it beside the
    hits). No Elasticsearch request: the entity counts are the ones the end-user's recalls keep
    in the cache, so call it after the recall it explains."""
    query = clean_text(query, field="query", limit=settings.ENGRAM_MAX_QUERY_CHARS)
    memory_types = clean_types(types)
    keywords = rc.keyword_query(query)
    plan = qp.query_plan(query, keywords=keywords)
    prefix = index_prefix_for(tenant=subject.tenant)
    counted_in = _mentions_counted_in({t: alias_name(t, prefix=prefix) for t in memory_types},
                                      include_superseded=include_superseded)
    counts = qp.mention_counts_cached(plan=plan, subject=str(subject.user_id), indices=counted_in)
    legs_possible = bool(plan.topic) and settings.ENGRAM_RRF_ENTITY_WEIGHT > 0

    def legs(entity: str) -> bool | None:
        if not legs_possible:
            return False
        if settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS <= 0:
            return True
        return None if entity not in counts else qp.enough_mentions(counts[entity])

    tz = clean_timezone(timezone)
    window = (query_time_window(query, now=now or django_timezone.now(), tz=tz)
              if settings.ENGRAM_TEMPORAL_BOOST > 0 else None)
    words = rc.lexical_words(query) if rc.fusion() == "linear" and settings.ENGRAM_RECALL_BM25 else []
    found_for = zip(words, _synonyms(words, entities=plan.entities), strict=True)
    synonyms = tuple((word, found) for word, found in found_for if found)
    own = own_name(subject, words=words, entities=plan.entities)
    return QueryReading(keywords=keywords, topic=plan.topic, time_window=window, synonyms=synonyms,
                        own_name=tuple(w for w in words if w in own),
                        entities=tuple(EntityReading(name=e, mentions=counts.get(e), legs=legs(e))
                                       for e in plan.entities),
                        topic_vector=settings.ENGRAM_RECALL_ENTITY_TOPIC_VECTOR and settings.ENGRAM_RECALL_ENTITY_DENSE
                        and settings.ENGRAM_RECALL_DENSE,
                        kinds=concepts.query_categories(query) if settings.ENGRAM_RECALL_BM25 else None,
                        intent=_intent(query))


def _rerank_text(hit: rc.Hit) -> str:
    src = hit.source
    if hit.memory_type is MemoryType.PROCEDURAL:
        return f"{src.get('trigger', '')}\n{src.get('steps', '')}"
    if hit.memory_type is MemoryType.CATALOG:
        return f"{src.get('title', '')}\n{src.get('text', '')}"
    return src.get("text", "")


# ---------------------------------------------------------------- visibility
# The read a write makes first: what the subject's own key can see of the documents it touches.


@dataclass(frozen=True)
class Visible:
    """A document as the subject's own key sees it, with what optimistic concurrency needs.
    ``index`` is the alias: keys are granted on aliases, not on the versioned indices behind them."""

    id: str
    index: str
    memory_type: MemoryType
    source: dict[str, Any]
    seq_no: int
    primary_term: int


def visible_documents(*, subject: Subject, ids: list[str], types: Iterable[MemoryType] = USER_TYPES,
                      es: Elasticsearch | None = None) -> dict[str, Visible]:
    """Read documents through the subject's DLS key (a realtime mget, so the sequence numbers are
    current). Ids the subject cannot see, or that do not exist, are simply absent."""
    if not ids:
        return {}
    es = es or subject_es_client(subject=subject)
    scope = memory_scope(subject=subject)
    prefix = index_prefix_for(tenant=subject.tenant)
    types = {MemoryType(t) for t in types}
    if not types:
        return {}
    # Every type's alias leads to the one index, and a get by id applies no alias filter: one
    # alias finds a document of any type, so the type is checked on what comes back.
    docs = [{"_index": alias_name(next(iter(types)), prefix=prefix), "_id": i} for i in dict.fromkeys(ids)]
    response = es.mget(docs=docs, source_excludes=VECTOR_FIELDS)
    found = {}
    for d in response["docs"]:
        src = d.get("_source")
        # The scope check is the code-level second guard behind the key's DLS query.
        if (d.get("found") and src.get("tenant_id") == scope["tenant_id"] and src.get("user_id") == scope["user_id"]
                and src.get("memory_type") in types):
            found[d["_id"]] = Visible(id=d["_id"], index=alias_name(src["memory_type"], prefix=prefix),
                                      memory_type=MemoryType(src["memory_type"]), source=src,
                                      seq_no=d["_seq_no"], primary_term=d["_primary_term"])
    return found


def visible_document(*, subject: Subject, memory_id: str, types: Iterable[MemoryType] = USER_TYPES) -> Visible:
    found = visible_documents(subject=subject, ids=[memory_id], types=types)
    if memory_id not in found:
        raise memory_not_found(memory_id)
    return found[memory_id]


# ---------------------------------------------------------------- reads


def memory_get(*, subject: Subject, memory_id: str) -> dict[str, Any]:
    """One of the subject's memories; NotFound when missing or not the subject's."""
    require_dls()
    visible = visible_document(subject=subject, memory_id=memory_id)
    return _with_usage([_public(visible.memory_type, visible.id, visible.source)])[0]


def memory_history(*, subject: Subject, memory_id: str) -> dict[str, Any]:
    """The supersession chain around a memory, both ways: ``older`` (what it superseded, nearest
    first, transitively) and ``newer`` (what superseded it, nearest first, transitively)."""
    require_dls()
    es = subject_es_client(subject=subject)
    start = visible_document(subject=subject, memory_id=memory_id)
    indices = alias_name(start.memory_type, prefix=index_prefix_for(tenant=subject.tenant))

    def walk(field: str) -> list[dict[str, Any]]:
        seen, out = {start.id}, []
        frontier = list(start.source.get(field) or [])
        while frontier:
            frontier = [i for i in dict.fromkeys(frontier) if i not in seen]
            if not frontier:
                break
            seen.update(frontier)
            docs = es.mget(index=indices, ids=frontier, source_excludes=VECTOR_FIELDS)["docs"]
            found = [d for d in docs if d.get("found")]
            # Forgotten links are kept as ids, so the gap in a chain stays visible.
            out += [_public(start.memory_type, d["_id"], d["_source"]) for d in found]
            out += [{"id": d["_id"], "forgotten": True} for d in docs if not d.get("found")]
            frontier = [i for d in found for i in (d["_source"].get(field) or [])]
        return out

    return {"memory": _public(start.memory_type, start.id, start.source),
            "older": walk("supersedes"), "newer": walk("superseded_by")}


def subject_export(*, subject: Subject) -> dict[str, Any]:
    """Everything stored for the subject (no embeddings, no catalog), grouped by memory type."""
    require_dls()
    refresh_ensure(subject=subject)  # the last turn, stored without waiting, is exported too
    es = subject_es_client(subject=subject)
    scope = memory_scope(subject=subject)
    out: dict[str, list] = {t.value: [] for t in USER_TYPES}
    prefix = index_prefix_for(tenant=subject.tenant)
    for hit in helpers.scan(es, index=",".join(alias_name(t, prefix=prefix) for t in USER_TYPES),
                            query={"query": {"bool": {"filter": [{"term": {"user_id": scope["user_id"]}}]}},
                                   "_source": {"excludes": VECTOR_FIELDS}, "sort": ["_doc"]}, size=500):
        memory_type = MemoryType(hit["_source"]["memory_type"])
        out[memory_type.value].append(_public(memory_type, hit["_id"], hit["_source"]))
    _with_usage(out[MemoryType.SEMANTIC.value])
    for items in out.values():
        items.sort(key=lambda d: (d.get("occurred_at") or d.get("created_at") or "", d["id"]))
    return {"tenant_id": scope["tenant_id"], "user_id": scope["user_id"], "memories": out}


# ---------------------------------------------------------------- listings (the inspector's reads)

@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    next_cursor: str | None  # opaque search_after cursor for the next (older) page; None at the end


def _cursor_encode(sort: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(sort, separators=(",", ":")).encode()).decode()


def _cursor_decode(cursor: str) -> list[Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError):
        raise ValidationFailed("invalid cursor", details={"field": "cursor"}, code="invalid_cursor") from None
    if not isinstance(value, list) or len(value) != 2:
        raise ValidationFailed("invalid cursor", details={"field": "cursor"}, code="invalid_cursor")
    return value


def _own_filter(subject: Subject, memory_type: MemoryType, *, include_superseded: bool = True) -> list[dict]:
    scope = memory_scope(subject=subject)
    filters: list[dict] = [{"term": {"tenant_id": scope["tenant_id"]}}, {"term": {"memory_type": memory_type.value}}]
    if memory_type is not MemoryType.CATALOG:
        filters.append({"term": {"user_id": scope["user_id"]}})
    if not include_superseded:
        filters.append({"bool": {"must_not": {"exists": {"field": "superseded_by"}}}})
    return filters


def episode_list(*, subject: Subject, size: int = 50, cursor: str | None = None) -> Page:
    """The subject's episodes, newest first (by ``occurred_at``, then write time), ``size`` at a
    time; ``cursor`` (from the previous page) continues with older ones via ``search_after``.

    Known limit: two episodes with the same occurred_at and created_at (to the millisecond) at a
    page boundary can be skipped; the index holds no other unique sortable field."""
    if not 1 <= size <= 500:
        raise ValidationFailed("size must be 1-500", details={"field": "size"}, code="invalid_size")
    require_dls()
    refresh_ensure(subject=subject)  # the subject's deferred writes are listed too
    body: dict[str, Any] = {
        "size": size, "_source": {"excludes": VECTOR_FIELDS},
        "query": {"bool": {"filter": _own_filter(subject, MemoryType.EPISODIC)}},
        "sort": [{"occurred_at": {"order": "desc"}}, {"created_at": {"order": "desc"}}],
        "track_total_hits": False,
    }
    if cursor:
        body["search_after"] = _cursor_decode(cursor)
    hits = subject_es_client(subject=subject).search(index=_alias(subject, MemoryType.EPISODIC), **body)["hits"]["hits"]
    items = [_public(MemoryType.EPISODIC, h["_id"], h["_source"]) for h in hits]
    return Page(items=items, next_cursor=_cursor_encode(hits[-1]["sort"]) if len(hits) == size else None)


def episode_latest_write(*, subject: Subject) -> str | None:
    """The write time (``created_at``) of the subject's most recently written episode, or None."""
    require_dls()
    refresh_ensure(subject=subject)  # the subject's deferred writes are listed too
    hits = subject_es_client(subject=subject).search(
        index=_alias(subject, MemoryType.EPISODIC), size=1, source_includes=["created_at"], track_total_hits=False,
        query={"bool": {"filter": _own_filter(subject, MemoryType.EPISODIC)}},
        sort=[{"created_at": {"order": "desc"}}])["hits"]["hits"]
    return hits[0]["_source"]["created_at"] if hits else None


def episode_list_written_since(*, subject: Subject, since: datetime | str, size: int = 100) -> list[dict[str, Any]]:
    """Episodes written (``created_at``) strictly after ``since``, newest write first: the live
    feed's poll, with ``since`` the newest write time it has shown (``episode_latest_write``).

    Known limit: an episode written in the same millisecond as ``since`` is not returned (it
    appears on the next page load); write times, not event times, so a back-dated import still shows.
    """
    since = clean_datetime(since, field="since")
    require_dls()
    refresh_ensure(subject=subject)  # the subject's deferred writes are listed too
    hits = subject_es_client(subject=subject).search(
        index=_alias(subject, MemoryType.EPISODIC), size=size, source_excludes=VECTOR_FIELDS, track_total_hits=False,
        query={"bool": {"filter": [*_own_filter(subject, MemoryType.EPISODIC),
                                   {"range": {"created_at": {"gt": since.isoformat()}}}]}},
        sort=[{"created_at": {"order": "desc"}}, {"occurred_at": {"order": "desc"}}])["hits"]["hits"]
    return [_public(MemoryType.EPISODIC, h["_id"], h["_source"]) for h in hits]


def _list(subject: Subject, memory_type: MemoryType, *, include_superseded: bool, size: int,
          sort: list[dict]) -> list[dict[str, Any]]:
    require_dls()
    refresh_ensure(subject=subject)  # the subject's deferred writes are listed too
    hits = subject_es_client(subject=subject).search(
        index=_alias(subject, memory_type), size=size, source_excludes=VECTOR_FIELDS, track_total_hits=False,
        query={"bool": {"filter": _own_filter(subject, memory_type, include_superseded=include_superseded)}},
        sort=sort)["hits"]["hits"]
    return _with_usage([_public(memory_type, h["_id"], h["_source"]) for h in hits])


def fact_list(*, subject: Subject, include_superseded: bool = False, size: int = 200) -> list[dict[str, Any]]:
    """The subject's facts, newest first; superseded ones only when asked."""
    return _list(subject, MemoryType.SEMANTIC, include_superseded=include_superseded, size=size,
                 sort=[{"created_at": {"order": "desc"}}])


def playbook_list(*, subject: Subject, include_superseded: bool = False, size: int = 200) -> list[dict[str, Any]]:
    """The subject's playbooks, newest first, each with ``posterior``: the Beta(1 + successes,
    1 + failures) mean and the outcome multiplier recall applies (memory_app.recall)."""
    items = _list(subject, MemoryType.PROCEDURAL, include_superseded=include_superseded, size=size,
                  sort=[{"created_at": {"order": "desc"}}])
    for item in items:
        s, f = int(item.get("success_count") or 0), int(item.get("failure_count") or 0)
        item["posterior"] = {"mean": (1.0 + s) / (2.0 + s + f),
                             "multiplier": rc.outcome_multiplier(successes=s, failures=f)}
    return items


def catalog_list(*, subject: Subject, size: int = 200) -> list[dict[str, Any]]:
    """The tenant's catalog entries as the subject's key sees them, newest first."""
    return _list(subject, MemoryType.CATALOG, include_superseded=True, size=size,
                 sort=[{"created_at": {"order": "desc"}}])


def subject_memory_counts(*, subject: Subject) -> dict[str, int]:
    """How many memories of each own type the subject has (superseded included), in one request."""
    require_dls()
    refresh_ensure(subject=subject)  # the subject's deferred writes are listed too
    scope = memory_scope(subject=subject)
    response = subject_es_client(subject=subject).search(
        index=",".join(_alias(subject, t) for t in USER_TYPES), size=0,
        query={"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}},
                                   {"term": {"user_id": scope["user_id"]}}]}},
        aggs={"types": {"terms": {"field": "memory_type", "size": 10}}})
    counts = {t.value: 0 for t in USER_TYPES}
    counts.update({b["key"]: b["doc_count"] for b in response["aggregations"]["types"]["buckets"]})
    return counts


def subjects_memory_stats(*, tenant: Tenant, subjects: list[Subject]) -> dict[str, dict[str, Any]]:
    """Per end-user of one tenant: counts per memory type and last activity, for a page of
    end-users in ONE aggregation request (not one per end-user).

    This is the one memory read not made through an end-user's own key: a DLS key sees one
    end-user only, and a page of 50 would cost 50 requests. It reads through the writer
    credential, returns no document at all (``size`` 0: counts and dates only, never content),
    and is filtered to the tenant and the listed end-users.
    """
    if not subjects:
        return {}
    if any(s.tenant_id != tenant.pk for s in subjects):
        raise ValidationFailed("end-users of another tenant", code="invalid_subjects")
    require_dls()
    user_ids = [str(s.user_id) for s in subjects]
    prefix = index_prefix_for(tenant=tenant)
    response = writer_es_client(prefix=prefix).search(
        index=",".join(alias_name(t, prefix=prefix) for t in USER_TYPES), size=0,
        query={"bool": {"filter": [{"term": {"tenant_id": tenant.slug}}, {"terms": {"user_id": user_ids}}]}},
        aggs={"users": {"terms": {"field": "user_id", "size": len(user_ids)},
                        "aggs": {"types": {"terms": {"field": "memory_type", "size": 10}},
                                 "last_write": {"max": {"field": "created_at"}},
                                 "last_event": {"max": {"field": "occurred_at"}}}}})
    out: dict[str, dict[str, Any]] = {}
    for bucket in response["aggregations"]["users"]["buckets"]:
        counts = {t.value: 0 for t in USER_TYPES}
        counts.update({b["key"]: b["doc_count"] for b in bucket["types"]["buckets"]})
        stamps = [v for v in (bucket["last_write"].get("value_as_string"), bucket["last_event"].get("value_as_string"))
                  if v]
        out[bucket["key"]] = {"counts": counts, "total": bucket["doc_count"],
                              "last_activity": max(stamps) if stamps else None}
    return out


def playbook_outcomes(*, subject: Subject, playbook_id: str, limit: int = 200) -> list[dict[str, Any]]:
    """Outcome history of one of the subject's playbooks, oldest first, from the audit log
    (``playbook.outcome`` events: time, success, who reported it)."""
    events = (AuditEvent.objects.filter(action="playbook.outcome", subject=subject, target_id=playbook_id)
              .order_by("-created_at")[:limit])
    return [{"at": e.created_at, "success": bool(e.details.get("success")), "actor": e.actor}
            for e in reversed(list(events))]
