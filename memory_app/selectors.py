"""Memory reads. Everything here reads through the subject's own document-level-security key."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


from elasticsearch import Elasticsearch, helpers
from engram_core.errors import ValidationFailed
from engram_core.es.schema import HIDDEN_FIELDS, USER_TYPES, VECTOR_FIELDS, MemoryType, alias_name
from memory_app.freshness import refresh_ensure
from memory_app.recall.rank import outcome_multiplier
from memory_app.usage import usage_apply
from memory_app.validation import clean_datetime, memory_not_found
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


# ---------------------------------------------------------------- derived memory
# Facts and playbooks name the episodes they were derived from (``supporting_episode_ids``): they
# follow those episodes when they are forgotten (``memory_app.services.forget``).

DERIVED_TYPES = (MemoryType.SEMANTIC, MemoryType.PROCEDURAL)


def derived_memories(*, subject: Subject, episode_ids: Iterable[str]) -> dict[str, Visible]:
    """The subject's facts and playbooks, current and superseded, that name any of
    ``episode_ids`` among their supporting episodes, as the subject's key sees them now."""
    episode_ids = list(dict.fromkeys(episode_ids))
    if not episode_ids:
        return {}
    refresh_ensure(subject=subject)  # a fact stored without waiting for a refresh is found too
    es = subject_es_client(subject=subject)
    scope = memory_scope(subject=subject)
    query = {"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}}, {"term": {"user_id": scope["user_id"]}},
                                 {"terms": {"supporting_episode_ids": episode_ids}}]}}
    ids = [h["_id"] for h in helpers.scan(es, index=",".join(_alias(subject, t) for t in DERIVED_TYPES), size=500,
                                          query={"query": query, "_source": False})]
    return visible_documents(subject=subject, ids=ids, types=DERIVED_TYPES, es=es)


def episodes_present(*, subject: Subject, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` are episodes the subject still has (a realtime read)."""
    return set(visible_documents(subject=subject, ids=list(dict.fromkeys(ids)), types=[MemoryType.EPISODIC]))


def derived_fate(visible: Visible, *, gone: set[str], present: set[str]) -> str | None:
    """What the episodes ``gone`` going does to a fact or playbook derived from them: None (none
    of them supports it), ``forgotten`` (no supporting episode is left in ``present``) or
    ``flagged`` (some are: it stays, for a person to review). A playbook an agent wrote is never
    forgotten this way: only its outcomes came from episodes."""
    support = visible.source.get("supporting_episode_ids") or []
    if not gone.intersection(support):
        return None
    if any(i in present and i not in gone for i in support):
        return "flagged"
    if visible.memory_type is MemoryType.PROCEDURAL and visible.source.get("source") != "consolidation":
        return "flagged"
    return "forgotten"


def forget_preview(*, subject: Subject, memory_id: str) -> dict[str, Any]:
    """What forgetting one of the subject's memories would take with it: the memory, and for an
    episode each fact and playbook derived from it with its fate (``derived_fate``)."""
    require_dls()
    visible = visible_document(subject=subject, memory_id=memory_id)
    out: dict[str, Any] = {"memory": _public(visible.memory_type, visible.id, visible.source), "derived": []}
    if visible.memory_type is not MemoryType.EPISODIC:
        return out
    derived = derived_memories(subject=subject, episode_ids=[visible.id])
    present = episodes_present(subject=subject, ids=[i for d in derived.values()
                                                     for i in d.source.get("supporting_episode_ids") or []])
    for d in derived.values():
        if fate := derived_fate(d, gone={visible.id}, present=present):
            out["derived"].append({"memory": _public(d.memory_type, d.id, d.source), "fate": fate})
    return out


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


MEMORY_LIST_MAX = 200
# How deep a memory list pages (offset + limit), as Elasticsearch's default max_result_window.
MEMORY_LIST_WINDOW = 10_000
_SCAN_PAGE = 500


def memory_page(*, subject: Subject, memory_type: MemoryType, key: str | None = None, limit: int = 50,
                offset: int = 0, include_superseded: bool = False) -> list[dict[str, Any]]:
    """The subject's memories of one own type, newest written first (``created_at``), ``limit``
    (1-200) from ``offset`` (offset + limit <= 10,000); current ones only unless
    ``include_superseded``. ``key``: only those a client stored under its own key, every one of
    them (an imported episode's ``client_id``; a fact's or playbook's ``metadata.key``, which is
    not indexed, so those are found by reading the type's memories through).
    ValidationFailed for bad input."""
    if memory_type not in USER_TYPES:
        raise ValidationFailed("type must be episodic, semantic or procedural", details={"field": "type"},
                               code="invalid_memory_type")
    if not 1 <= limit <= MEMORY_LIST_MAX:
        raise ValidationFailed(f"limit must be 1-{MEMORY_LIST_MAX}", details={"field": "limit"}, code="invalid_limit")
    if not 0 <= offset or offset + limit > MEMORY_LIST_WINDOW:
        raise ValidationFailed(f"offset must be >= 0 and offset + limit <= {MEMORY_LIST_WINDOW}", details={"field": "offset"},
                               code="invalid_offset")
    require_dls()
    refresh_ensure(subject=subject)  # the subject's deferred writes are listed too
    filters = _own_filter(subject, memory_type, include_superseded=include_superseded)
    es, index = subject_es_client(subject=subject), _alias(subject, memory_type)
    sort = [{"created_at": {"order": "desc"}}, {"occurred_at": {"order": "desc", "unmapped_type": "date"}}]
    if key is not None and memory_type is MemoryType.EPISODIC:
        filters.append({"term": {"client_id": key}})
    elif key is not None:
        found: list[dict[str, Any]] = []
        for start in range(0, 10_000, _SCAN_PAGE):
            hits = es.search(index=index, size=_SCAN_PAGE, from_=start, source_excludes=VECTOR_FIELDS,
                             track_total_hits=False, query={"bool": {"filter": filters}}, sort=sort)["hits"]["hits"]
            found += [h for h in hits if (h["_source"].get("metadata") or {}).get("key") == key]
            if len(hits) < _SCAN_PAGE:
                break
        return _with_usage([_public(memory_type, h["_id"], h["_source"]) for h in found[offset:offset + limit]])
    hits = es.search(index=index, size=limit, from_=offset, source_excludes=VECTOR_FIELDS, track_total_hits=False,
                     query={"bool": {"filter": filters}}, sort=sort)["hits"]["hits"]
    return _with_usage([_public(memory_type, h["_id"], h["_source"]) for h in hits])


def fact_list(*, subject: Subject, include_superseded: bool = False, size: int = 200) -> list[dict[str, Any]]:
    """The subject's facts, newest first; superseded ones only when asked."""
    return _list(subject, MemoryType.SEMANTIC, include_superseded=include_superseded, size=size,
                 sort=[{"created_at": {"order": "desc"}}])


def playbook_list(*, subject: Subject, outcome_weight: float, include_superseded: bool = False,
                  size: int = 200) -> list[dict[str, Any]]:
    """The subject's playbooks, newest first, each with ``posterior``: the Beta(1 + successes,
    1 + failures) mean and the outcome multiplier recall applies at ``outcome_weight``
    (RankingConfig.outcome_weight; memory_app.recall.rank)."""
    items = _list(subject, MemoryType.PROCEDURAL, include_superseded=include_superseded, size=size,
                  sort=[{"created_at": {"order": "desc"}}])
    for item in items:
        s, f = int(item.get("success_count") or 0), int(item.get("failure_count") or 0)
        item["posterior"] = {"mean": (1.0 + s) / (2.0 + s + f),
                             "multiplier": outcome_multiplier(successes=s, failures=f,
                                                              weight=outcome_weight)}
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
