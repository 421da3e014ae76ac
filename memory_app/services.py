"""Memory writes: episodes, facts, playbooks, catalog entries, outcomes, supersession, forget, erase, import.

Contracts shared by every service here:
- Input is validated before anything is written; a ValidationFailed means nothing was stored.
- Writes go through the narrowly privileged writer credential, stamped with the subject's scope
  (tenant_id/user_id come from the subject, never from the caller's payload).
- Before an existing document is updated or deleted, it is read through the subject's own
  document-level-security key: what the subject cannot see does not exist for it (NotFound).
- A write returns once a following recall can see it (refresh ``wait_for``).
- A multi-document operation that fails part-way undoes what it did before raising.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from elasticsearch import ApiError, ConflictError, Elasticsearch, NotFoundError, helpers

from memory_app import context as derived
from memory_app.embeddings import get_embedder
from memory_app.errors import Conflict, NotFound, ValidationFailed
from memory_app.es.schema import MemoryType, alias_name
from memory_app.validation import (
    clean_confidence,
    clean_datetime,
    clean_ids,
    clean_metadata,
    clean_text,
)
from tenants.models import Subject, Tenant
from tenants.selectors import memory_scope
from tenants.services import audit_record, subject_es_client, subject_keys_revoke_all, writer_es_client

log = logging.getLogger(__name__)

USER_TYPES = (MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL)
CONTRADICTIONS = ("natural", "harsh")


def new_memory_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return timezone.now()


def embedding_text(memory_type: MemoryType, doc: dict[str, Any]) -> str:
    """What the dense leg sees for a document (BM25 sees the fields themselves)."""
    if memory_type is MemoryType.PROCEDURAL:
        return f"{doc['trigger']}\n{doc['steps']}"
    if memory_type is MemoryType.CATALOG:
        return f"{doc['title']}\n{doc['text']}"
    if memory_type is MemoryType.EPISODIC and settings.ENGRAM_EMBED_CONTEXT and (
            context := doc.get("context") or doc.get("derived_context")):
        return f"{context}\n{doc['text']}"
    return doc["text"]


def _clean_memory_id(memory_id: str | None) -> str:
    if memory_id is None:
        return new_memory_id()
    if not isinstance(memory_id, str) or not 8 <= len(memory_id) <= 64 or not memory_id.replace("-", "").isalnum():
        raise ValidationFailed("memory id must be 8-64 letters, digits or dashes", details={"field": "id"},
                               code="invalid_id")
    return memory_id


# ---------------------------------------------------------------- visibility


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
    docs = [{"_index": alias_name(t), "_id": i} for i in ids for t in types]
    response = es.mget(docs=docs, source_excludes=["embedding"])
    found = {}
    for d in response["docs"]:
        src = d.get("_source")
        # The scope check is the code-level second guard behind the key's DLS query.
        if d.get("found") and src.get("tenant_id") == scope["tenant_id"] and src.get("user_id") == scope["user_id"]:
            found[d["_id"]] = Visible(id=d["_id"], index=alias_name(src["memory_type"]),
                                      memory_type=MemoryType(src["memory_type"]), source=src,
                                      seq_no=d["_seq_no"], primary_term=d["_primary_term"])
    return found


def visible_document(*, subject: Subject, memory_id: str, types: Iterable[MemoryType] = USER_TYPES) -> Visible:
    found = visible_documents(subject=subject, ids=[memory_id], types=types)
    if memory_id not in found:
        raise NotFound(f"no memory {memory_id!r} for this subject", details={"id": memory_id})
    return found[memory_id]


# ---------------------------------------------------------------- writes


def _store(*, memory_type: MemoryType, memory_id: str, doc: dict[str, Any], refresh: str | bool = "wait_for"
           ) -> dict[str, Any]:
    doc["embedding"] = get_embedder().embed_documents([embedding_text(memory_type, doc)])[0]
    try:
        writer_es_client().index(index=alias_name(memory_type), id=memory_id, document=doc, op_type="create",
                                 refresh=refresh)
    except ConflictError:
        raise Conflict(f"a memory with id {memory_id!r} already exists", details={"id": memory_id}) from None
    doc.pop("embedding")
    return {"id": memory_id, **{k: v for k, v in doc.items() if k not in derived.HIDDEN_FIELDS}}


def _base_doc(*, subject: Subject, memory_type: MemoryType, text: str, now: datetime, metadata: dict,
              source: str) -> dict[str, Any]:
    return {
        **memory_scope(subject=subject),
        "memory_type": memory_type.value,
        "text": text,
        "created_at": now.isoformat(),
        "source": source,
        "metadata": metadata,
    }


def episode_write(*, subject: Subject, text: str, occurred_at: datetime | str | None = None, role: str = "user",
                  session_id: str | None = None, context: str | None = None, metadata: dict | None = None,
                  memory_id: str | None = None, source: str = "agent") -> dict[str, Any]:
    """Store one episodic event (e.g. the verbatim user turn). Visible to recall on return.

    ``context`` (optional) is the conversation just before the turn; recall matches on it with a
    low weight, which finds short replies ("yes, last Tuesday") by what they answer. Without it,
    an episode with a ``session_id`` gets its context derived from the session's preceding
    episodes (memory_app.context).
    """
    text = clean_text(text)
    context = clean_text(context, field="context") if context is not None else None
    metadata = clean_metadata(metadata)
    memory_id = _clean_memory_id(memory_id)
    now = _now()
    occurred = clean_datetime(occurred_at, field="occurred_at") or now
    if role not in ("user", "assistant", "system", "tool"):
        raise ValidationFailed("role must be one of user, assistant, system, tool", details={"field": "role"},
                               code="invalid_role")
    doc = _base_doc(subject=subject, memory_type=MemoryType.EPISODIC, text=text, now=now, metadata=metadata,
                    source=source)
    doc.update(occurred_at=occurred.isoformat(), role=role, session_id=session_id, context=context)
    if context is None and (found := derived.context_for_turn(es=subject_es_client(subject=subject),
                                                              scope=memory_scope(subject=subject),
                                                              session_id=session_id, occurred_at=occurred)):
        doc.update(context_ids=found.ids, derived_context=found.text)
    return _store(memory_type=MemoryType.EPISODIC, memory_id=memory_id, doc=doc)


def fact_write(*, subject: Subject, text: str, confidence: float = 1.0, supersedes: list[str] | None = None,
               contradiction: str = "natural", supporting_episode_ids: list[str] | None = None,
               metadata: dict | None = None, memory_id: str | None = None, source: str = "agent") -> dict[str, Any]:
    """Store a semantic fact, optionally superseding older facts of the same subject.

    A harsh contradiction lowers the new fact's confidence by ENGRAM_HARSH_CONFIDENCE_PENALTY.
    Raises NotFound if a superseded id is not the subject's (missing and "not yours" alike).
    """
    text = clean_text(text)
    now = _now()
    doc = _base_doc(subject=subject, memory_type=MemoryType.SEMANTIC, text=text, now=now,
                    metadata=clean_metadata(metadata), source=source)
    doc.update(
        last_used_at=now.isoformat(),
        use_count=0,
        confidence=clean_confidence(confidence),
        supporting_episode_ids=clean_ids(supporting_episode_ids, field="supporting_episode_ids", limit=1000),
    )
    return _write_superseding(subject=subject, memory_type=MemoryType.SEMANTIC, memory_id=memory_id, doc=doc,
                              supersedes=supersedes, contradiction=contradiction, now=now)


def playbook_write(*, subject: Subject, trigger: str, steps: str, supersedes: list[str] | None = None,
                   contradiction: str = "natural", confidence: float = 1.0, metadata: dict | None = None,
                   memory_id: str | None = None, source: str = "agent") -> dict[str, Any]:
    """Store a procedural playbook (trigger + steps) with zeroed outcome counters."""
    trigger = clean_text(trigger, field="trigger")
    steps = clean_text(steps, field="steps")
    now = _now()
    doc = _base_doc(subject=subject, memory_type=MemoryType.PROCEDURAL, text=f"{trigger}\n{steps}", now=now,
                    metadata=clean_metadata(metadata), source=source)
    doc.update(trigger=trigger, steps=steps, success_count=0, failure_count=0,
               confidence=clean_confidence(confidence))
    return _write_superseding(subject=subject, memory_type=MemoryType.PROCEDURAL, memory_id=memory_id, doc=doc,
                              supersedes=supersedes, contradiction=contradiction, now=now)


def _write_superseding(*, subject: Subject, memory_type: MemoryType, memory_id: str | None, doc: dict[str, Any],
                       supersedes: list[str] | None, contradiction: str, now: datetime) -> dict[str, Any]:
    memory_id = _clean_memory_id(memory_id)
    old_ids = clean_ids(supersedes, field="supersedes", limit=settings.ENGRAM_MAX_SUPERSEDES)
    if contradiction not in CONTRADICTIONS:
        raise ValidationFailed("contradiction must be 'natural' or 'harsh'", details={"field": "contradiction"},
                               code="invalid_contradiction")
    if memory_id in old_ids:
        raise ValidationFailed("a memory cannot supersede itself", details={"field": "supersedes"},
                               code="invalid_ids")
    if not old_ids:
        return _store(memory_type=memory_type, memory_id=memory_id, doc=doc)

    old = visible_documents(subject=subject, ids=old_ids, types=[memory_type])
    missing = [i for i in old_ids if i not in old]
    if missing:
        raise NotFound(f"cannot supersede {', '.join(map(repr, missing))}: no such {memory_type.value} memory "
                       f"for this subject", details={"ids": missing})
    doc.update(supersedes=old_ids, contradiction=contradiction)
    if contradiction == "harsh":
        doc["confidence"] = max(0.0, doc["confidence"] - settings.ENGRAM_HARSH_CONFIDENCE_PENALTY)

    stored = _store(memory_type=memory_type, memory_id=memory_id, doc=doc, refresh=False)
    writer = writer_es_client()
    done: list[Visible] = []
    try:
        for visible in old.values():
            done.append(_mark_superseded(subject=subject, writer=writer, visible=visible, memory_id=memory_id,
                                         now=now))
    except (ApiError, NotFound, Conflict) as exc:
        _undo_supersede(writer=writer, new_index=alias_name(memory_type), new_id=memory_id, done=done)
        if isinstance(exc, ConflictError):
            raise Conflict("a superseded memory changed concurrently; nothing was written, retry",
                           details={"ids": old_ids}) from None
        raise
    return stored


def _mark_superseded(*, subject: Subject, writer: Elasticsearch, visible: Visible, memory_id: str,
                     now: datetime, attempts: int = 20) -> Visible:
    """Append ``memory_id`` to the old document's ``superseded_by``; returns the document as it was
    just before (what an undo restores). Recall bumps use counts at any time, which changes the
    sequence number: on a conflict, re-read through the subject's key and try again."""
    for _attempt in range(attempts):
        previous = visible.source.get("superseded_by") or []
        try:
            writer.update(index=visible.index, id=visible.id, if_seq_no=visible.seq_no,
                          if_primary_term=visible.primary_term, refresh="wait_for",
                          doc={"superseded_by": [*previous, memory_id], "superseded_at": now.isoformat()})
            return visible
        except ConflictError:
            fresh = visible_documents(subject=subject, ids=[visible.id], types=[visible.memory_type])
            if visible.id not in fresh:
                raise NotFound(f"cannot supersede {visible.id!r}: it was forgotten meanwhile",
                               details={"ids": [visible.id]}) from None
            visible = fresh[visible.id]
    raise Conflict("a superseded memory keeps changing concurrently; nothing was written, retry",
                   details={"ids": [visible.id]})


def _undo_supersede(*, writer: Elasticsearch, new_index: str, new_id: str, done: list[Visible]) -> None:
    """Compensate a supersession that failed part-way: restore the old docs, drop the new one."""
    for visible in done:
        writer.update(index=visible.index, id=visible.id, refresh="wait_for",
                      doc={"superseded_by": visible.source.get("superseded_by"),
                           "superseded_at": visible.source.get("superseded_at")})
    writer.options(ignore_status=404).delete(index=new_index, id=new_id, refresh="wait_for")


def catalog_entry_write(*, tenant: Tenant, title: str, text: str, metadata: dict | None = None,
                        memory_id: str | None = None, source: str = "tenant") -> dict[str, Any]:
    """Store a tenant-wide catalog entry (no user_id: every subject of the tenant can recall it)."""
    title = clean_text(title, field="title", limit=500)
    text = clean_text(text)
    now = _now()
    doc = {"tenant_id": tenant.slug, "memory_type": MemoryType.CATALOG.value, "title": title, "text": text,
           "created_at": now.isoformat(), "source": source, "metadata": clean_metadata(metadata)}
    return _store(memory_type=MemoryType.CATALOG, memory_id=_clean_memory_id(memory_id), doc=doc)


def playbook_outcome_record(*, subject: Subject, playbook_id: str, success: bool,
                            refined_steps: str | None = None) -> dict[str, Any]:
    """Count one success or failure of a playbook; optionally store refined steps.

    Increments are exact under concurrency (optimistic concurrency control, retried).
    """
    if not isinstance(success, bool):
        raise ValidationFailed("success must be true or false", details={"field": "success"}, code="invalid_outcome")
    refined = clean_text(refined_steps, field="refined_steps") if refined_steps is not None else None
    writer = writer_es_client()
    for _attempt in range(20):
        visible = visible_document(subject=subject, memory_id=playbook_id, types=[MemoryType.PROCEDURAL])
        src = visible.source
        now = _now().isoformat()
        update: dict[str, Any] = (
            {"success_count": int(src.get("success_count") or 0) + 1, "last_success_at": now} if success
            else {"failure_count": int(src.get("failure_count") or 0) + 1}
        )
        if refined is not None:
            update["refined_steps"] = refined
        try:
            writer.update(index=visible.index, id=visible.id, doc=update, if_seq_no=visible.seq_no,
                          if_primary_term=visible.primary_term, refresh="wait_for")
        except ConflictError:
            continue
        return {"id": visible.id, **{k: v for k, v in src.items() if k != "embedding"}, **update}
    raise Conflict("the playbook is being updated too often; retry", details={"id": playbook_id})


def memory_forget(*, subject: Subject, memory_id: str, reason: str, actor: str) -> None:
    """Hard-delete one of the subject's memories; leave a content-free tombstone in the audit log."""
    reason = clean_text(reason, field="reason", limit=500)
    visible = visible_document(subject=subject, memory_id=memory_id)
    if visible.memory_type is MemoryType.EPISODIC:
        # Before the delete: a failure here leaves the episode in place, so forget can be retried;
        # the other order could leave its text in a follower's context with nothing left to forget.
        _context_forget(subject=subject, memory_id=memory_id)
    try:
        writer_es_client().delete(index=visible.index, id=visible.id, refresh="wait_for")
    except NotFoundError:
        raise NotFound(f"no memory {memory_id!r} for this subject", details={"id": memory_id}) from None
    audit_record(actor=actor, action="memory.forget", tenant=subject.tenant, subject=subject, target_id=memory_id,
                 details={"memory_type": visible.memory_type.value, "reason": reason})


def _context_forget(*, subject: Subject, memory_id: str) -> None:
    """Re-index the episodes whose derived context held a forgotten episode, without its text."""
    es = subject_es_client(subject=subject)
    dependents = derived.dependents_of(es=es, scope=memory_scope(subject=subject), memory_id=memory_id)
    if not dependents:
        return
    texts = derived.resolve(es=es, ids=[i for d in dependents for i in d["context_ids"] if i != memory_id])
    updates: list[dict[str, Any]] = []
    for dep in dependents:
        ids = [i for i in dep["context_ids"] if i != memory_id and i in texts]
        updates.append({"context_ids": ids or None, "derived_context": "\n".join(texts[i] for i in ids) or None})
    vectors = get_embedder().embed_documents([embedding_text(MemoryType.EPISODIC, {"text": dep["text"], **update})
                                              for dep, update in zip(dependents, updates, strict=True)])
    writer = writer_es_client()
    for dep, update, vector in zip(dependents, updates, vectors, strict=True):
        writer.options(ignore_status=404).update(index=alias_name(MemoryType.EPISODIC), id=dep["id"],
                                                 doc={**update, "embedding": vector}, refresh="wait_for")


def subject_erase(*, subject: Subject, actor: str) -> int:
    """Delete every document and key of a subject. Returns the number of documents deleted."""
    scope = memory_scope(subject=subject)
    writer = writer_es_client()
    deleted = 0
    indices = ",".join(alias_name(t) for t in USER_TYPES)
    query = {"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}}, {"term": {"user_id": scope["user_id"]}}]}}
    # No _delete_by_query on every cluster: scan the ids, delete them in bulk, until none remain.
    while True:
        actions = [{"_op_type": "delete", "_index": alias_name(h["_source"]["memory_type"]), "_id": h["_id"]}
                   for h in helpers.scan(writer, index=indices, size=1000,
                                         query={"query": query, "_source": ["memory_type"]})]
        if not actions:
            break
        for ok, item in helpers.streaming_bulk(writer, actions, raise_on_error=False, refresh="wait_for"):
            deleted += ok
    subject_keys_revoke_all(subject=subject, actor=actor)
    audit_record(actor=actor, action="subject.erase", tenant=subject.tenant, subject=subject,
                 target_id=str(subject.user_id), details={"documents_deleted": deleted})
    return deleted


@dataclass(frozen=True)
class EpisodeIn:
    text: str
    occurred_at: datetime
    role: str = "user"
    session_id: str | None = None
    context: str | None = None
    metadata: dict | None = None
    id: str | None = None


def episodes_import(*, subject: Subject, episodes: Iterable[dict[str, Any]],
                    progress: Callable[[int, int], None] | None = None, batch_size: int = 256) -> list[str]:
    """Bulk-import historical episodes with their original timestamps.

    Every episode is validated first (ValidationFailed names the first bad one's position) and
    nothing is written unless all are valid. If the bulk write fails part-way, the episodes
    already written are deleted again before the error is raised. Returns the ids in order.
    """
    cleaned: list[EpisodeIn] = []
    for n, raw in enumerate(episodes):
        if n >= settings.ENGRAM_MAX_IMPORT_EPISODES:
            raise ValidationFailed(f"an import holds at most {settings.ENGRAM_MAX_IMPORT_EPISODES} episodes",
                                   code="import_too_large")
        try:
            if not isinstance(raw, dict):
                raise ValidationFailed("each episode must be an object", code="invalid_episode")
            occurred = clean_datetime(raw.get("occurred_at"), field="occurred_at")
            if occurred is None:
                raise ValidationFailed("occurred_at is required for imported episodes", details={"field": "occurred_at"},
                                       code="invalid_datetime")
            cleaned.append(EpisodeIn(text=clean_text(raw.get("text")), occurred_at=occurred,
                                     role=raw.get("role") or "user", session_id=raw.get("session_id"),
                                     context=clean_text(raw["context"], field="context")
                                     if raw.get("context") is not None else None,
                                     metadata=clean_metadata(raw.get("metadata")),
                                     id=_clean_memory_id(raw.get("id"))))
        except ValidationFailed as exc:
            raise ValidationFailed(f"episode {n}: {exc.message}", details={**exc.details, "index": n},
                                   code=exc.code) from None
    if not cleaned:
        raise ValidationFailed("no episodes to import", code="empty_import")

    scope = memory_scope(subject=subject)
    contexts = derived.contexts_for_batch(es=subject_es_client(subject=subject), scope=scope, episodes=cleaned)
    found = {e.id: c for e, c in zip(cleaned, contexts, strict=True) if c}
    now = _now().isoformat()
    embedder = get_embedder()
    index = alias_name(MemoryType.EPISODIC)

    def context_fields(episode: EpisodeIn) -> dict[str, Any]:
        c = found.get(episode.id)
        return {"context_ids": c.ids, "derived_context": c.text} if c else {}

    def actions():
        for start in range(0, len(cleaned), batch_size):
            batch = cleaned[start:start + batch_size]
            vectors = embedder.embed_documents([embedding_text(MemoryType.EPISODIC, {
                "text": e.text, "context": e.context, **context_fields(e)}) for e in batch])
            for episode, vector in zip(batch, vectors, strict=True):
                yield {"_op_type": "create", "_index": index, "_id": episode.id, "_source": {
                    **scope, "memory_type": MemoryType.EPISODIC.value, "text": episode.text, "embedding": vector,
                    "occurred_at": episode.occurred_at.isoformat(), "created_at": now, "role": episode.role,
                    "session_id": episode.session_id, "context": episode.context,
                    "metadata": episode.metadata or {}, "source": "import", **context_fields(episode)}}

    writer = writer_es_client()
    written: list[str] = []
    failures: list[dict] = []
    for ok, item in helpers.streaming_bulk(writer, actions(), chunk_size=batch_size, raise_on_error=False,
                                           max_retries=3, refresh="wait_for"):
        result = item["create"]
        if ok:
            written.append(result["_id"])
            if progress:
                progress(len(written), len(cleaned))
        else:
            failures.append(result)
    if failures:
        helpers.bulk(writer, ({"_op_type": "delete", "_index": index, "_id": i} for i in written),
                     raise_on_error=False, refresh="wait_for")
        first = failures[0]
        error = Conflict if first.get("status") == 409 else ValidationFailed
        raise error(f"import failed at episode {first['_id']!r} ({first.get('error', {}).get('type', 'error')}); "
                    "nothing was kept", details={"failed": len(failures)}, code="import_failed")
    return [e.id for e in cleaned]
