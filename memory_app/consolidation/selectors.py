"""Consolidation reads. Memory reads go through the end-user's own DLS key; the only other read
is the scheduler's count of waiting episodes per end-user (ids and counts, never content)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from elasticsearch import helpers

from engram_core.errors import NotFound
from memory_app.consolidation.extractors import Episode, Known, KnownFact, KnownPlaybook
from memory_app.consolidation.resolve import StoredFact, StoredPlaybook
from engram_core.es.schema import VECTOR_FIELDS, MemoryType, alias_name, shared_prefix
from memory_app.models import ConsolidationRun
from tenants.models import Subject
from tenants.models import Tenant
from tenants.selectors import index_prefix_for, memory_scope
from tenants.services.clients import subject_es_client, writer_es_client


@dataclass(frozen=True)
class PendingEpisode:
    episode: Episode
    seq_no: int
    primary_term: int


def _own(subject: Subject) -> list[dict]:
    scope = memory_scope(subject=subject)
    return [{"term": {"tenant_id": scope["tenant_id"]}}, {"term": {"user_id": scope["user_id"]}}]


def _alias(subject: Subject, memory_type: MemoryType) -> str:
    """``memory_type``'s alias in the indices holding ``subject``'s tenant (shared or dedicated)."""
    return alias_name(memory_type, prefix=index_prefix_for(tenant=subject.tenant))


def _episode(hit: dict) -> Episode:
    src = hit["_source"]
    return Episode(id=hit["_id"], text=src["text"], occurred_at=src.get("occurred_at") or src["created_at"],
                   session_id=src.get("session_id"), role=src.get("role") or "user")


def episodes_pending(*, subject: Subject, limit: int) -> list[PendingEpisode]:
    """The end-user's episodes past the watermark (no ``consolidated_at``), oldest first, at most ``limit``."""
    es = subject_es_client(subject=subject)
    response = es.search(index=_alias(subject, MemoryType.EPISODIC), size=limit,
                         query={"bool": {"filter": _own(subject),
                                         "must_not": [{"exists": {"field": "consolidated_at"}}]}},
                         sort=[{"occurred_at": "asc"}, {"created_at": "asc"}], seq_no_primary_term=True,
                         source_excludes=[*VECTOR_FIELDS, "context"])
    return [PendingEpisode(episode=_episode(h), seq_no=h["_seq_no"], primary_term=h["_primary_term"])
            for h in response["hits"]["hits"]]


def episodes_context(*, subject: Subject, episodes: list[Episode], turns: int) -> list[Episode]:
    """Already consolidated episodes of the same sessions (at most ``turns`` per session), up to
    the earliest new one: what a "that worked" in the new episodes may refer to. One _msearch for
    all sessions."""
    sessions: dict[str, str] = {}
    for e in episodes:
        if e.session_id and e.session_id not in sessions:
            sessions[e.session_id] = e.occurred_at
    if not sessions or turns <= 0:
        return []
    index = _alias(subject, MemoryType.EPISODIC)
    searches: list[dict[str, Any]] = []
    for session_id, first in sessions.items():
        searches += [{"index": index}, {
            "size": turns,
            "_source": {"excludes": [*VECTOR_FIELDS, "context"]},
            "sort": [{"occurred_at": "desc"}],
            "query": {"bool": {"filter": [*_own(subject), {"term": {"session_id": session_id}},
                                          {"exists": {"field": "consolidated_at"}},
                                          {"range": {"occurred_at": {"lte": first}}}]}}}]
    responses = subject_es_client(subject=subject).msearch(searches=searches)["responses"]
    out = []
    for response in responses:
        if "error" in response:
            raise RuntimeError(f"context read failed: {response['error']}")
        out += [_episode(h) for h in response["hits"]["hits"]]
    return out


def fact_neighbours(*, subject: Subject, texts: list[str], vectors: list[list[float]], k: int,
                    words: list[str] | None = None) -> list[list[StoredFact]]:
    """Per candidate text: the end-user's current facts near it by kNN and by BM25, ``k`` each (one
    _msearch); with ``words`` for it, also the ``k`` best by BM25 on those words alone (a change
    told in other words: the text's own words crowd out "my new SO" for "got married")."""
    return _neighbours(subject=subject, memory_type=MemoryType.SEMANTIC, texts=texts, vectors=vectors, k=k,
                       words=words, make=lambda hit, cosine: _with_cosine(
                           StoredFact.from_source(hit["_id"], hit["_source"]), cosine))


def playbook_neighbours(*, subject: Subject, texts: list[str], vectors: list[list[float]], k: int
                        ) -> list[list[StoredPlaybook]]:
    return _neighbours(subject=subject, memory_type=MemoryType.PROCEDURAL, texts=texts, vectors=vectors, k=k,
                       make=lambda hit, cosine: StoredPlaybook(
                           id=hit["_id"], trigger=hit["_source"]["trigger"], steps=hit["_source"]["steps"], cosine=cosine,
                           supporting_episode_ids=list(hit["_source"].get("supporting_episode_ids") or [])))


def _with_cosine(fact: StoredFact, cosine: float) -> StoredFact:
    fact.cosine = cosine
    return fact


def _neighbours(*, subject: Subject, memory_type: MemoryType, texts: list[str], vectors: list[list[float]], k: int,
                make, words: list[str] | None = None):
    if not texts:
        return []
    words = words or [""] * len(texts)
    index = _alias(subject, memory_type)
    current = {"bool": {"filter": _own(subject), "must_not": [{"exists": {"field": "superseded_by"}}]}}
    searches: list[dict[str, Any]] = []
    for text, vector, extra in zip(texts, vectors, words, strict=True):
        # A knn query, as the recall's (recall.knn_clause): it runs in the query phase, without a
        # round of its own; the filter is applied inside the kNN search either way.
        searches += [{"index": index}, {"size": k, "_source": {"excludes": VECTOR_FIELDS},
                                        "query": {"knn": {"field": "embedding", "query_vector": vector, "k": k,
                                                          "num_candidates": max(50, k * 5), "filter": current}}}]
        searches += [{"index": index}, {"size": k, "_source": {"excludes": VECTOR_FIELDS},
                                        "query": {"bool": {"must": [{"match": {"text": text}}],
                                                           "filter": [current]}}}]
        if extra:
            searches += [{"index": index}, {"size": k, "_source": {"excludes": VECTOR_FIELDS},
                                            "query": {"bool": {"must": [{"match": {"text": extra}}],
                                                               "filter": [current]}}}]
    responses = iter(subject_es_client(subject=subject).msearch(searches=searches)["responses"])
    out = []
    for extra in words:
        knn, *lexical = [next(responses) for _ in range(3 if extra else 2)]
        for response in (knn, *lexical):
            if "error" in response:
                raise RuntimeError(f"neighbour search failed: {response['error']}")
        found: dict[str, Any] = {}
        for hit in knn["hits"]["hits"]:
            found[hit["_id"]] = make(hit, 2 * hit["_score"] - 1)  # cosine similarity's score is (1 + cos) / 2
        for response in lexical:
            for hit in response["hits"]["hits"]:
                found.setdefault(hit["_id"], make(hit, 0.0))
        out.append(list(found.values()))
    return out


def memories_existing(*, subject: Subject, ids: list[str], memory_type: MemoryType) -> dict[str, dict[str, Any]]:
    """Which of ``ids`` exist for the end-user (through their key), with their sources."""
    if not ids:
        return {}
    docs = subject_es_client(subject=subject).mget(index=_alias(subject, memory_type), ids=ids,
                                                   source_excludes=VECTOR_FIELDS)["docs"]
    # A get by id applies no alias filter (every type's alias leads to the one index): check the type.
    return {d["_id"]: d["_source"] for d in docs
            if d.get("found") and d["_source"].get("memory_type") == memory_type.value}


def facts_with_support(*, subject: Subject) -> list[tuple[str, dict[str, Any]]]:
    """The end-user's current facts that name supporting episodes."""
    es = subject_es_client(subject=subject)
    return [(h["_id"], h["_source"]) for h in helpers.scan(
        es, index=_alias(subject, MemoryType.SEMANTIC), size=500,
        query={"query": {"bool": {"filter": [*_own(subject), {"exists": {"field": "supporting_episode_ids"}}],
                                  "must_not": [{"exists": {"field": "superseded_by"}}]}},
               "_source": ["text", "supporting_episode_ids", "metadata", "source"]})]


def known_memories(*, subject: Subject, limit: int) -> Known:
    """The end-user's current facts and playbooks, most recently created first (at most ``limit``
    of each), with playbook counters: what an extractor that decides supersessions and outcomes
    itself is shown. One _msearch through the end-user's key."""
    if limit <= 0:
        return Known()
    current = {"bool": {"filter": _own(subject), "must_not": [{"exists": {"field": "superseded_by"}}]}}
    searches = [{"index": _alias(subject, MemoryType.SEMANTIC)},
                {"size": limit, "query": current, "sort": [{"created_at": "desc"}],
                 "_source": ["text", "metadata.consolidation.slot"]},
                {"index": _alias(subject, MemoryType.PROCEDURAL)},
                {"size": limit, "query": current, "sort": [{"created_at": "desc"}],
                 "_source": ["trigger", "steps", "refined_steps", "success_count", "failure_count"]}]
    facts, playbooks = subject_es_client(subject=subject).msearch(searches=searches)["responses"]
    for response in (facts, playbooks):
        if "error" in response:
            raise RuntimeError(f"known memories read failed: {response['error']}")
    return Known(
        facts=tuple(KnownFact(id=h["_id"], text=h["_source"]["text"],
                              slot=((h["_source"].get("metadata") or {}).get("consolidation") or {}).get("slot"))
                    for h in facts["hits"]["hits"]),
        playbooks=tuple(KnownPlaybook(id=h["_id"], trigger=h["_source"]["trigger"], steps=h["_source"]["steps"],
                                      success_count=int(h["_source"].get("success_count") or 0),
                                      failure_count=int(h["_source"].get("failure_count") or 0),
                                      refined_steps=h["_source"].get("refined_steps"))
                        for h in playbooks["hits"]["hits"]))


def episodes_pending_by_subject(*, now: datetime) -> list[dict[str, Any]]:
    """Per end-user with waiting episodes: tenant slug, user id, how many wait, the newest one's
    ``created_at``. Read with the writer credential because it spans end-users; it returns
    ids and counts only. Covers the shared indices and every dedicated tenant's own."""
    prefixes = {index_prefix_for(tenant=t) for t in Tenant.objects.all()} | {shared_prefix()}
    out: list[dict[str, Any]] = []
    for prefix in sorted(prefixes):
        out += _pending_in(prefix=prefix)
    return out


def _pending_in(*, prefix: str) -> list[dict[str, Any]]:
    es = writer_es_client(prefix=prefix)
    out, after = [], None
    while True:
        composite: dict[str, Any] = {"size": 500, "sources": [{"tenant_id": {"terms": {"field": "tenant_id"}}},
                                                             {"user_id": {"terms": {"field": "user_id"}}}]}
        if after:
            composite["after"] = after
        response = es.search(index=alias_name(MemoryType.EPISODIC, prefix=prefix), size=0,
                             query={"bool": {"must_not": [{"exists": {"field": "consolidated_at"}}]}},
                             aggs={"subjects": {"composite": composite,
                                                "aggs": {"newest": {"max": {"field": "created_at"}}}}})
        agg = response["aggregations"]["subjects"]
        for bucket in agg["buckets"]:
            out.append({**bucket["key"], "pending": bucket["doc_count"],
                        "newest": bucket["newest"].get("value_as_string") or bucket["newest"].get("value")})
        after = agg.get("after_key")
        if not agg["buckets"] or not after:
            return out


def consolidation_runs_list(*, subject: Subject, limit: int = 20) -> list[ConsolidationRun]:
    """The end-user's most recent consolidation runs, newest first."""
    return list(ConsolidationRun.objects.filter(subject=subject).order_by("-created_at", "-pk")[:limit])


def consolidation_run_get(*, subject: Subject, run_id: int) -> ConsolidationRun:
    """One of the end-user's runs; NotFound when missing or another end-user's."""
    try:
        return ConsolidationRun.objects.get(subject=subject, pk=run_id)
    except (ConsolidationRun.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such consolidation run for this end-user", details={"run_id": run_id}) from None
