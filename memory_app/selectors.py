"""Memory reads. Everything here reads through the subject's own document-level-security key."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from elasticsearch import helpers

from memory_app import recall as rc
from memory_app.embeddings import get_embedder, get_reranker
from memory_app.errors import ValidationFailed
from memory_app.es.schema import MemoryType, alias_name
from memory_app.freshness import refresh_ensure
from memory_app.services import USER_TYPES, visible_document
from memory_app.usage import usage_record
from memory_app.validation import clean_datetime, clean_k, clean_text, clean_types
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services import require_dls, subject_es_client


def _public(memory_type: MemoryType, memory_id: str, source: dict[str, Any]) -> dict[str, Any]:
    return {"id": memory_id, **{k: v for k, v in source.items() if k != "embedding"}, "memory_type": memory_type.value}


def memory_recall(*, subject: Subject, query: str, k: int = 10, types: list[str] | None = None,
                  since: datetime | str | None = None, until: datetime | str | None = None,
                  include_superseded: bool = False, explain: bool = False, record_use: bool = True,
                  now: datetime | None = None, ensure_fresh: bool = True) -> list[dict[str, Any]]:
    """The k most useful memories for ``query``: hybrid BM25 + kNN over every requested type and
    the tenant catalog in one ``_msearch``, fused and weighted as described in memory_app.recall.

    ``explain`` adds per hit its ranks, fused score and every multiplier. Returned semantic facts
    get ``use_count``/``last_used_at`` bumped in the background (``record_use``).
    """
    query = clean_text(query, field="query", limit=settings.ENGRAM_MAX_QUERY_CHARS)
    k = clean_k(k)
    memory_types = clean_types(types)
    since = clean_datetime(since, field="since")
    until = clean_datetime(until, field="until")
    if since and until and since > until:
        raise ValidationFailed("since must not be after until", details={"field": "since"}, code="invalid_time_range")
    require_dls()
    now = now or timezone.now()
    if ensure_fresh:
        refresh_ensure(subject=subject)  # the subject's last turn, stored without waiting, is found

    es = subject_es_client(subject=subject)
    body = rc.msearch_body(types=memory_types, query=query, vector=get_embedder().embed_query(query),
                           scope=memory_scope(subject=subject), include_superseded=include_superseded,
                           since=since, until=until, index_for={t: alias_name(t) for t in memory_types})
    responses = es.msearch(searches=body)["responses"]
    for response in responses:
        if "error" in response:
            raise RuntimeError(f"recall leg failed: {response['error']}")
    hits = list(rc.fuse(responses=responses).values())
    if reranker := get_reranker():
        pool = sorted(hits, key=lambda h: -h.rrf)[: settings.ENGRAM_RERANK_POOL]
        scores = reranker.rerank(query, [_rerank_text(h) for h in pool])
        for rank, (hit, value) in enumerate(sorted(zip(pool, scores, strict=True), key=lambda p: -p[1]), start=1):
            hit.rerank_score, hit.rerank_rank = float(value), rank
        hits = pool
    ranked = rc.score(hits, now=now)[:k]
    if record_use:
        usage_record(ids=[h.id for h in ranked if h.memory_type is MemoryType.SEMANTIC], at=now)
    results = []
    for hit in ranked:
        item = {**_public(hit.memory_type, hit.id, hit.source), "score": hit.score}
        if explain:
            item["explain"] = hit.explain()
        results.append(item)
    return results


def _rerank_text(hit: rc.Hit) -> str:
    src = hit.source
    if hit.memory_type is MemoryType.PROCEDURAL:
        return f"{src.get('trigger', '')}\n{src.get('steps', '')}"
    if hit.memory_type is MemoryType.CATALOG:
        return f"{src.get('title', '')}\n{src.get('text', '')}"
    return src.get("text", "")


def memory_get(*, subject: Subject, memory_id: str) -> dict[str, Any]:
    """One of the subject's memories; NotFound when missing or not the subject's."""
    require_dls()
    visible = visible_document(subject=subject, memory_id=memory_id)
    return _public(visible.memory_type, visible.id, visible.source)


def memory_history(*, subject: Subject, memory_id: str) -> dict[str, Any]:
    """The supersession chain around a memory, both ways: ``older`` (what it superseded, nearest
    first, transitively) and ``newer`` (what superseded it, nearest first, transitively)."""
    require_dls()
    es = subject_es_client(subject=subject)
    start = visible_document(subject=subject, memory_id=memory_id)
    indices = alias_name(start.memory_type)

    def walk(field: str) -> list[dict[str, Any]]:
        seen, out = {start.id}, []
        frontier = list(start.source.get(field) or [])
        while frontier:
            frontier = [i for i in dict.fromkeys(frontier) if i not in seen]
            if not frontier:
                break
            seen.update(frontier)
            docs = es.mget(index=indices, ids=frontier, source_excludes=["embedding"])["docs"]
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
    es = subject_es_client(subject=subject)
    scope = memory_scope(subject=subject)
    out: dict[str, list] = {t.value: [] for t in USER_TYPES}
    for hit in helpers.scan(es, index=",".join(alias_name(t) for t in USER_TYPES),
                            query={"query": {"bool": {"filter": [{"term": {"user_id": scope["user_id"]}}]}},
                                   "_source": {"excludes": ["embedding"]}, "sort": ["_doc"]}, size=500):
        memory_type = MemoryType(hit["_source"]["memory_type"])
        out[memory_type.value].append(_public(memory_type, hit["_id"], hit["_source"]))
    for items in out.values():
        items.sort(key=lambda d: (d.get("occurred_at") or d.get("created_at") or "", d["id"]))
    return {"tenant_id": scope["tenant_id"], "user_id": scope["user_id"], "memories": out}
