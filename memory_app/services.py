"""Memory writes: episodes, facts, playbooks, catalog entries, outcomes, supersession, forget, erase, import.

Contracts shared by every service here:
- Input is validated before anything is written; a ValidationFailed means nothing was stored.
- Writes go through the narrowly privileged writer credential, stamped with the subject's scope
  (tenant_id/user_id come from the subject, never from the caller's payload).
- Before an existing document is updated or deleted, it is read through the subject's own
  document-level-security key: what the subject cannot see does not exist for it (NotFound).
- A write returns once a following recall can see it: it refreshes the index itself (``refresh=True``,
  not ``wait_for``, which would hold the answer until the periodic refresh, up to
  ``ES_REFRESH_INTERVAL``), or, with ``defer_refresh``, marks the subject so that its next read
  refreshes first (memory_app.freshness).
- A multi-document operation that fails part-way undoes what it did before raising.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from elasticsearch import ApiError, ConflictError, Elasticsearch, NotFoundError, TransportError, helpers

from engram_core.errors import Conflict, NotFound, ServiceUnavailable, ValidationFailed
from engram_core.es.client import unavailable_answer
from memory_app import context as derived
from memory_app.language.concepts import concepts_of, concepts_of_memory
from memory_app.embeddings import get_embedder
from memory_app import selectors
from engram_core.es.schema import HIDDEN_FIELDS, USER_TYPES, VECTOR_FIELDS, MemoryType, alias_name
from memory_app.freshness import refresh_defer, refresh_ensure
from memory_app.models import IdempotencyRecord, OutboxEntry
from memory_app.usage import usage_forget
from engram_core.validation import clean_external_id
from memory_app.validation import (
    clean_confidence,
    clean_datetime,
    clean_ids,
    clean_metadata,
    clean_session_id,
    clean_text,
    memory_not_found,
)
from tenants.models import Subject, Tenant
from tenants.selectors import memory_scope
from tenants.selectors import index_prefix_for
from tenants.services import (
    audit_record,
    subject_es_client,
    subject_keys_revoke_all,
    writer_es_client,
    writer_prefix,
)

log = logging.getLogger(__name__)

CONTRADICTIONS = ("natural", "harsh")


def write_target(*, tenant: Tenant) -> tuple[Elasticsearch, str]:
    """The writer client and index prefix for ``tenant``'s memories (shared or its own indices)."""
    prefix = writer_prefix(tenant=tenant)
    return writer_es_client(prefix=prefix), prefix


def _episodic_alias(subject: Subject) -> str:
    """The episodic alias of the indices holding ``subject``'s tenant (shared or dedicated)."""
    return alias_name(MemoryType.EPISODIC, prefix=index_prefix_for(tenant=subject.tenant))


def new_memory_id() -> str:
    return uuid.uuid4().hex


# Client-chosen ids never become document ids as they are: ids are one space shared by every
# tenant, so a raw client id could collide with (and reveal, by a 409) another end-user's.
_CLIENT_ID_NAMESPACE = uuid.UUID("6f1d4c1e-3b0a-4d7e-9a55-2c8e0b1f7a10")


def client_memory_id(*, tenant_id: int, external_id: str, client_id: str) -> str:
    """The stored id of a memory whose id the client chose: stable, and scoped to one end-user of
    one tenant (the same client id of two end-users gives two ids)."""
    return uuid.uuid5(_CLIENT_ID_NAMESPACE, f"{tenant_id}\x1f{external_id}\x1f{client_id}").hex


_SERVER_ID = re.compile(r"[0-9a-f]{32}(-\d+)?")


def client_id_rekey(doc_id: str, source: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """es_setup's migration of an imported episode stored under a client's raw id (before ids were
    namespaced): its new, namespaced id, and the raw id kept as ``client_id``. Ids Engram
    assigned, and documents of end-users no longer known, are left as they are."""
    if (source.get("memory_type") != MemoryType.EPISODIC.value or source.get("source") != "import"
            or source.get("client_id") or _SERVER_ID.fullmatch(doc_id)):
        return None
    subject = Subject.objects.filter(tenant__slug=source.get("tenant_id"), user_id=source.get("user_id")).first()
    if subject is None:
        return None
    return (client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id, client_id=doc_id),
            {**source, "client_id": doc_id})


def migration_rekey(doc_id: str, source: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """es_setup's change to a migrated document (None: none): ``client_id_rekey``, and the concepts
    of a memory stored before they existed (memory_app.language.concepts), computed as a write computes them."""
    rekeyed = client_id_rekey(doc_id, source)
    doc_id, source = rekeyed or (doc_id, source)
    if "concepts" in source or not settings.ENGRAM_CONCEPTS or not isinstance(source.get("text"), str):
        return rekeyed
    return doc_id, {**source, "concepts": concepts_of_memory(source)}


def episodes_assign_ids(*, tenant_id: int, external_id: str, episodes: list[dict[str, Any]], prefix: str
                        ) -> list[dict[str, Any]]:
    """Fix each episode's stored id before an import is accepted: ``client_id`` + a namespaced
    ``memory_id`` for an episode carrying an ``id`` of the client's, ``<prefix>-<n>`` otherwise."""
    assigned = []
    for n, episode in enumerate(episodes):
        episode = dict(episode)
        client_id = episode.pop("id", None)
        if client_id is not None:
            episode["client_id"] = client_id
            episode["memory_id"] = client_memory_id(tenant_id=tenant_id, external_id=external_id,
                                                    client_id=client_id)
        else:
            episode.setdefault("memory_id", f"{prefix}-{n}")
        assigned.append(episode)
    return assigned


def duplicate_ids_validate(*, ids: Iterable[str | None], field: str) -> None:
    """ValidationFailed when one request names the same id twice (it could never all be stored)."""
    seen: set[str] = set()
    duplicates = [i for i in ids if i is not None and (i in seen or seen.add(i))]
    if duplicates:
        raise ValidationFailed(f"{field} names the same id more than once: {', '.join(sorted(set(duplicates)))}",
                               details={"field": field, "ids": sorted(set(duplicates))}, code="duplicate_ids")


def _now() -> datetime:
    return timezone.now()


def _accepted(accepted_at: datetime | str | None) -> datetime:
    return clean_datetime(accepted_at, field="accepted_at") or _now()


def embedding_text(memory_type: MemoryType, doc: dict[str, Any]) -> str:
    """What the dense leg sees for a document (BM25 sees the fields themselves)."""
    if memory_type is MemoryType.PROCEDURAL:
        return f"{doc['trigger']}\n{doc['steps']}"
    if memory_type is MemoryType.CATALOG:
        return f"{doc['title']}\n{doc['text']}"
    return doc["text"]  # an episode's vector also holds its context: see context.episode_vectors


def _clean_memory_id(memory_id: str | None) -> str:
    if memory_id is None:
        return new_memory_id()
    if not isinstance(memory_id, str) or not 8 <= len(memory_id) <= 64 or not memory_id.replace("-", "").isalnum():
        raise ValidationFailed("memory id must be 8-64 letters, digits or dashes", details={"field": "id"},
                               code="invalid_id")
    return memory_id


# ---------------------------------------------------------------- validation
# Pure checks of a write's input, shared by every path (REST, MCP, outbox acceptance, the write
# services themselves): an accepted write cannot fail validation at replay.

EPISODE_ROLES = ("user", "assistant", "system", "tool")
WRITE_SOURCES = ("agent", "mcp")


def external_id_validate(value: Any) -> str:
    """The one rule for an end-user's external id: 1-200 characters, no control characters."""
    return clean_external_id(value)


def steps_validate(value: Any, *, field: str = "steps") -> Any:
    """A playbook's ``steps`` (or ``refined_steps``) as stored: text as given, or a list of steps
    joined one per line (blank steps dropped); REST and MCP take both. Anything else is refused;
    the text itself is checked with the write (``write_validate``)."""
    if isinstance(value, list):
        if not all(isinstance(step, str) for step in value):
            raise ValidationFailed(f"{field} must be text or a list of strings", details={"field": field},
                                   code="invalid_text")
        return "\n".join(step.strip() for step in value if step.strip())
    return value


def _opt_text(p: dict[str, Any], name: str, limit: int | None = None) -> None:
    if p.get(name) is not None:
        clean_text(p[name], field=name, limit=limit)


def _memory_common_validate(p: dict[str, Any]) -> None:
    clean_metadata(p.get("metadata"))
    if p.get("source", "agent") not in WRITE_SOURCES:
        raise ValidationFailed("source must be one of " + ", ".join(WRITE_SOURCES), details={"field": "source"},
                               code="invalid_source")


def role_validate(role: Any) -> str:
    if role not in EPISODE_ROLES:
        raise ValidationFailed("role must be one of " + ", ".join(EPISODE_ROLES), details={"field": "role"},
                               code="invalid_role")
    return role


def contradiction_validate(contradiction: Any) -> str:
    if contradiction not in CONTRADICTIONS:
        raise ValidationFailed("contradiction must be 'natural' or 'harsh'", details={"field": "contradiction"},
                               code="invalid_contradiction")
    return contradiction


def outcome_success_validate(success: Any) -> bool:
    if not isinstance(success, bool):
        raise ValidationFailed("success must be true or false", details={"field": "success"}, code="invalid_outcome")
    return success


def episode_validate(p: dict[str, Any]) -> None:
    _memory_common_validate(p)
    clean_text(p.get("text"))
    _opt_text(p, "context")
    clean_session_id(p.get("session_id"))
    clean_datetime(p.get("occurred_at"), field="occurred_at")
    role_validate(p.get("role") or "user")


def fact_validate(p: dict[str, Any]) -> None:
    _memory_common_validate(p)
    clean_text(p.get("text"))
    clean_ids(p.get("supporting_episode_ids"), field="supporting_episode_ids", limit=1000)
    _superseding_validate(p)


def playbook_validate(p: dict[str, Any]) -> None:
    _memory_common_validate(p)
    clean_text(p.get("trigger"), field="trigger")
    clean_text(p.get("steps"), field="steps")
    _superseding_validate(p)


def _superseding_validate(p: dict[str, Any]) -> None:
    clean_confidence(p.get("confidence", 1.0))
    clean_ids(p.get("supersedes"), field="supersedes", limit=settings.ENGRAM_MAX_SUPERSEDES)
    contradiction_validate(p.get("contradiction", "natural"))


def outcome_validate(p: dict[str, Any]) -> None:
    outcome_success_validate(p.get("success"))
    _opt_text(p, "refined_steps")
    if p.get("operation_id") is not None and not isinstance(p["operation_id"], str):
        raise ValidationFailed("operation_id must be a string", details={"field": "operation_id"}, code="invalid_id")


def forget_validate(p: dict[str, Any]) -> None:
    clean_text(p.get("reason"), field="reason", limit=500)


def import_validate(p: dict[str, Any]) -> None:
    episodes = p.get("episodes") or []
    if not isinstance(episodes, list) or not episodes:
        raise ValidationFailed("no episodes to import", code="empty_import")
    if len(episodes) > settings.ENGRAM_MAX_IMPORT_EPISODES:
        raise ValidationFailed(f"an import holds at most {settings.ENGRAM_MAX_IMPORT_EPISODES} episodes",
                               code="import_too_large")
    for n, episode in enumerate(episodes):
        try:
            if not isinstance(episode, dict):
                raise ValidationFailed("each episode must be an object", code="invalid_episode")
            episode_validate(episode)
            if episode.get("occurred_at") is None:
                raise ValidationFailed("occurred_at is required for imported episodes",
                                       details={"field": "occurred_at"}, code="invalid_datetime")
        except ValidationFailed as exc:
            raise ValidationFailed(f"episode {n}: {exc.message}", details={**exc.details, "index": n},
                                   code=exc.code) from None
    for key in ("id", "client_id", "memory_id"):
        duplicate_ids_validate(ids=[e.get(key) for e in episodes], field="episodes")


_VALIDATORS: dict[str, Callable[[dict[str, Any]], None]] = {
    "episode": episode_validate, "fact": fact_validate, "playbook": playbook_validate,
    "outcome": outcome_validate, "forget": forget_validate, "import": import_validate, "erase": lambda p: None,
}


def write_validate(*, operation: str, payload: dict[str, Any]) -> None:
    """Check a write of ``operation`` (an outbox operation name) before it is accepted;
    ValidationFailed names the first problem."""
    _VALIDATORS[str(operation)](payload)


# ---------------------------------------------------------------- writes


# What makes two creates "the same write": a retry of a create that landed (its answer lost) finds
# a document with these fields equal, and gets that document back instead of a conflict.
_CREATE_IDENTITY = ("tenant_id", "user_id", "memory_type", "text", "title", "trigger", "steps", "role",
                    "session_id", "context", "metadata", "supersedes", "contradiction", "source")


def _store(*, tenant: Tenant, memory_type: MemoryType, memory_id: str, doc: dict[str, Any],
           refresh: bool = True) -> dict[str, Any]:
    """Create the document in ``tenant``'s indices. A document already under ``memory_id`` with the
    same content from the same end-user is this write applied before (a retry): it is returned as
    it is. Any other document there is a Conflict."""
    if "embedding" not in doc:
        doc["embedding"] = get_embedder().embed_documents([embedding_text(memory_type, doc)])[0]
    writer, prefix = write_target(tenant=tenant)
    index = alias_name(memory_type, prefix=prefix)
    try:
        writer.index(index=index, id=memory_id, document=doc, op_type="create", refresh=refresh)
    except ConflictError:
        existing = writer.options(ignore_status=404).get(index=index, id=memory_id,
                                                         source_excludes=VECTOR_FIELDS)
        source = existing.get("_source") if existing.get("found") else None
        if source is None or any(source.get(k) != doc.get(k) for k in _CREATE_IDENTITY):
            raise Conflict(f"a memory with id {memory_id!r} already exists", details={"id": memory_id}) from None
        doc = source
    return {"id": memory_id, **{k: v for k, v in doc.items() if k not in (*VECTOR_FIELDS, *HIDDEN_FIELDS)}}


def _base_doc(*, subject: Subject, memory_type: MemoryType, text: str, now: datetime, metadata: dict,
              source: str) -> dict[str, Any]:
    return {
        **memory_scope(subject=subject),
        "memory_type": memory_type.value,
        "text": text,
        "created_at": now.isoformat(),
        "source": source,
        "metadata": metadata,
        "concepts": concepts_of(text),
    }


def episode_write(*, subject: Subject, text: str, occurred_at: datetime | str | None = None, role: str = "user",
                  session_id: str | None = None, context: str | None = None, metadata: dict | None = None,
                  memory_id: str | None = None, source: str = "agent",
                  accepted_at: datetime | str | None = None, defer_refresh: bool = False) -> dict[str, Any]:
    """Store one episodic event (e.g. the verbatim user turn). Visible to recall on return; with
    ``defer_refresh``, visible to the subject's next recall (memory_app.freshness) without
    waiting for a refresh here.

    ``accepted_at`` is when Engram accepted the write (a write replayed from the outbox keeps the
    time it was accepted, not the time it is applied); it defaults ``created_at`` and ``occurred_at``.

    ``context`` (optional) is the conversation just before the turn; recall matches on it with a
    low weight, which finds short replies ("yes, last Tuesday") by what they answer. Without it,
    an episode with a ``session_id`` gets its context derived from the session's preceding
    episodes (memory_app.context).
    """
    text = clean_text(text)
    context = clean_text(context, field="context") if context is not None else None
    session_id = clean_session_id(session_id)
    metadata = clean_metadata(metadata)
    memory_id = _clean_memory_id(memory_id)
    now = _accepted(accepted_at)
    occurred = clean_datetime(occurred_at, field="occurred_at") or now
    role = role_validate(role)
    doc = _base_doc(subject=subject, memory_type=MemoryType.EPISODIC, text=text, now=now, metadata=metadata,
                    source=source)
    doc.update(occurred_at=occurred.isoformat(), role=role, session_id=session_id, context=context)
    if context is None and session_id:
        refresh_ensure(subject=subject)  # the session's last turn may be stored but not yet searchable
    parts: Sequence[str] = [context] if context is not None else ()
    if context is None and (found := derived.context_for_turn(es=subject_es_client(subject=subject),
                                                              index=_episodic_alias(subject),
                                                              scope=memory_scope(subject=subject),
                                                              session_id=session_id, occurred_at=occurred)):
        doc.update(context_ids=found.ids, derived_context=found.text)
        parts = found.texts
    # Cached: the session's previous turns were embedded when they were written, and a turn's
    # own text is also its recall's query (turn_submit embeds it first).
    doc.update(derived.episode_vectors([(text, parts)], cached=True)[0])
    if defer_refresh:
        refresh_defer(subject=subject, memory_type=MemoryType.EPISODIC, memory_id=memory_id)
    return _store(tenant=subject.tenant, memory_type=MemoryType.EPISODIC, memory_id=memory_id, doc=doc,
                  refresh=not defer_refresh)


def fact_write(*, subject: Subject, text: str, confidence: float = 1.0, supersedes: list[str] | None = None,
               contradiction: str = "natural", supporting_episode_ids: list[str] | None = None,
               metadata: dict | None = None, memory_id: str | None = None, source: str = "agent",
               accepted_at: datetime | str | None = None, defer_refresh: bool = False) -> dict[str, Any]:
    """Store a semantic fact, optionally superseding older facts of the same subject. With
    ``defer_refresh``, returns without waiting for a refresh; the subject's next read through
    Engram sees it (memory_app.freshness).

    A harsh contradiction lowers the new fact's confidence by ENGRAM_HARSH_CONFIDENCE_PENALTY.
    Raises NotFound if a superseded id is not the subject's (missing and "not yours" alike).
    """
    text = clean_text(text)
    now = _accepted(accepted_at)
    doc = _base_doc(subject=subject, memory_type=MemoryType.SEMANTIC, text=text, now=now,
                    metadata=clean_metadata(metadata), source=source)
    doc.update(
        last_used_at=now.isoformat(),  # its use count starts at 0 and lives in the database (memory_app.usage)
        confidence=clean_confidence(confidence),
        supporting_episode_ids=clean_ids(supporting_episode_ids, field="supporting_episode_ids", limit=1000),
    )
    return _write_superseding(subject=subject, memory_type=MemoryType.SEMANTIC, memory_id=memory_id, doc=doc,
                              supersedes=supersedes, contradiction=contradiction, now=now,
                              defer_refresh=defer_refresh)


def playbook_write(*, subject: Subject, trigger: str, steps: str, supersedes: list[str] | None = None,
                   contradiction: str = "natural", confidence: float = 1.0, metadata: dict | None = None,
                   memory_id: str | None = None, source: str = "agent",
                   accepted_at: datetime | str | None = None, defer_refresh: bool = False) -> dict[str, Any]:
    """Store a procedural playbook (trigger + steps) with zeroed outcome counters
    (``defer_refresh`` as for facts)."""
    trigger = clean_text(trigger, field="trigger")
    steps = clean_text(steps, field="steps")
    now = _accepted(accepted_at)
    doc = _base_doc(subject=subject, memory_type=MemoryType.PROCEDURAL, text=f"{trigger}\n{steps}", now=now,
                    metadata=clean_metadata(metadata), source=source)
    doc.update(trigger=trigger, steps=steps, success_count=0, failure_count=0,
               confidence=clean_confidence(confidence))
    return _write_superseding(subject=subject, memory_type=MemoryType.PROCEDURAL, memory_id=memory_id, doc=doc,
                              supersedes=supersedes, contradiction=contradiction, now=now,
                              defer_refresh=defer_refresh)


def _write_superseding(*, subject: Subject, memory_type: MemoryType, memory_id: str | None, doc: dict[str, Any],
                       supersedes: list[str] | None, contradiction: str, now: datetime,
                       defer_refresh: bool = False) -> dict[str, Any]:
    memory_id = _clean_memory_id(memory_id)
    old_ids = clean_ids(supersedes, field="supersedes", limit=settings.ENGRAM_MAX_SUPERSEDES)
    contradiction_validate(contradiction)
    if memory_id in old_ids:
        raise ValidationFailed("a memory cannot supersede itself", details={"field": "supersedes"},
                               code="invalid_ids")
    # Deferred: the next read refreshes. A creation names its document (searchable => visible);
    # a supersession also updates older documents after it, so it names none.
    refresh = not defer_refresh
    if not old_ids:
        if defer_refresh:
            refresh_defer(subject=subject, memory_type=memory_type, memory_id=memory_id)
        return _store(tenant=subject.tenant, memory_type=memory_type, memory_id=memory_id, doc=doc, refresh=refresh)

    old = selectors.visible_documents(subject=subject, ids=old_ids, types=[memory_type])
    missing = [i for i in old_ids if i not in old]
    if missing:
        raise NotFound(f"cannot supersede {', '.join(map(repr, missing))}: no such {memory_type.value} memory "
                       f"for this subject", details={"ids": missing})
    doc.update(supersedes=old_ids, contradiction=contradiction)
    if contradiction == "harsh":
        doc["confidence"] = max(0.0, doc["confidence"] - settings.ENGRAM_HARSH_CONFIDENCE_PENALTY)

    if defer_refresh:
        refresh_defer(subject=subject, memory_type=memory_type)
    stored = _store(tenant=subject.tenant, memory_type=memory_type, memory_id=memory_id, doc=doc, refresh=False)
    writer, prefix = write_target(tenant=subject.tenant)
    done: list[selectors.Visible] = []
    try:
        for visible in old.values():
            done.append(_mark_superseded(subject=subject, writer=writer, visible=visible, memory_id=memory_id,
                                         now=now))
        if refresh:  # one refresh makes the new document and every mark visible
            writer.indices.refresh(index=alias_name(memory_type, prefix=prefix))
    except (ApiError, NotFound, Conflict) as exc:
        _undo_supersede(writer=writer, new_index=alias_name(memory_type, prefix=prefix), new_id=memory_id, done=done)
        if isinstance(exc, ConflictError):
            raise Conflict("a superseded memory changed concurrently; nothing was written, retry",
                           details={"ids": old_ids}, code="concurrent_update") from None
        raise
    return stored


def _mark_superseded(*, subject: Subject, writer: Elasticsearch, visible: selectors.Visible, memory_id: str,
                     now: datetime, attempts: int = 20) -> selectors.Visible:
    """Append ``memory_id`` to the old document's ``superseded_by`` (not refreshed: the caller
    refreshes once, or defers); returns the document as it was just before (what an undo
    restores). Recall bumps use counts at any time, which changes the sequence number: on a
    conflict, re-read through the subject's key and try again."""
    for _attempt in range(attempts):
        previous = visible.source.get("superseded_by") or []
        if memory_id in previous:  # already marked (a retried write): never twice
            return visible
        try:
            writer.update(index=visible.index, id=visible.id, if_seq_no=visible.seq_no,
                          if_primary_term=visible.primary_term,
                          doc={"superseded_by": [*previous, memory_id], "superseded_at": now.isoformat()})
            return visible
        except ConflictError:
            fresh = selectors.visible_documents(subject=subject, ids=[visible.id], types=[visible.memory_type])
            if visible.id not in fresh:
                raise NotFound(f"cannot supersede {visible.id!r}: it was forgotten meanwhile",
                               details={"ids": [visible.id]}) from None
            visible = fresh[visible.id]
    raise Conflict("a superseded memory keeps changing concurrently; nothing was written, retry",
                   details={"ids": [visible.id]}, code="concurrent_update")


def _undo_supersede(*, writer: Elasticsearch, new_index: str, new_id: str, done: list[selectors.Visible]) -> None:
    """Compensate a supersession that failed part-way: restore the old docs, drop the new one."""
    for visible in done:
        writer.update(index=visible.index, id=visible.id,
                      doc={"superseded_by": visible.source.get("superseded_by"),
                           "superseded_at": visible.source.get("superseded_at")})
    writer.options(ignore_status=404).delete(index=new_index, id=new_id, refresh=True)


def catalog_entry_write(*, tenant: Tenant, title: str, text: str, metadata: dict | None = None,
                        memory_id: str | None = None, source: str = "tenant") -> dict[str, Any]:
    """Store a tenant-wide catalog entry (no user_id: every subject of the tenant can recall it)."""
    title = clean_text(title, field="title", limit=500)
    text = clean_text(text)
    now = _now()
    doc = {"tenant_id": tenant.slug, "memory_type": MemoryType.CATALOG.value, "title": title, "text": text,
           "created_at": now.isoformat(), "source": source, "metadata": clean_metadata(metadata)}
    doc["concepts"] = concepts_of_memory(doc)
    return _store(tenant=tenant, memory_type=MemoryType.CATALOG, memory_id=_clean_memory_id(memory_id), doc=doc)


_OUTCOME_IDS_KEPT = 100


def playbook_outcome_record(*, subject: Subject, playbook_id: str, success: bool,
                            refined_steps: str | None = None, operation_id: str | None = None,
                            episode_id: str | None = None, actor: Any = "agent",
                            defer_refresh: bool = False) -> dict[str, Any]:
    """Count one success or failure of a playbook; optionally store refined steps. With
    ``defer_refresh``, the subject's next read refreshes (memory_app.freshness) instead of this call.

    Increments are exact under concurrency (optimistic concurrency control, retried). The count is
    idempotent when the outcome is identified: by ``operation_id`` (fixed when the write was
    accepted; the playbook keeps the ids of its last outcomes) or by ``episode_id`` (the episode
    that reported it, from consolidation; it joins ``supporting_episode_ids``). A repeat is a no-op.
    Each counted outcome is also a content-free ``playbook.outcome`` audit event: the outcome history.
    """
    outcome_success_validate(success)
    refined = clean_text(refined_steps, field="refined_steps") if refined_steps is not None else None
    if episode_id is not None:
        episode_id = clean_ids([episode_id], field="episode_id", limit=1)[0]
    writer, _prefix = write_target(tenant=subject.tenant)
    for _attempt in range(20):
        visible = selectors.visible_document(subject=subject, memory_id=playbook_id, types=[MemoryType.PROCEDURAL])
        src = visible.source
        applied = src.get("outcome_ids") or []
        supporting = list(src.get("supporting_episode_ids") or [])
        if (operation_id is not None and operation_id in applied) or \
                (episode_id is not None and episode_id in supporting):
            return {"id": visible.id, **{k: v for k, v in src.items() if k not in VECTOR_FIELDS}}
        now = _now().isoformat()
        update: dict[str, Any] = (
            {"success_count": int(src.get("success_count") or 0) + 1, "last_success_at": now} if success
            else {"failure_count": int(src.get("failure_count") or 0) + 1}
        )
        if refined is not None:
            update["refined_steps"] = refined
        if operation_id is not None:
            update["outcome_ids"] = [*applied, operation_id][-_OUTCOME_IDS_KEPT:]
        if episode_id is not None:
            update["supporting_episode_ids"] = [*supporting, episode_id]
        try:
            if defer_refresh:
                refresh_defer(subject=subject, memory_type=MemoryType.PROCEDURAL)
            writer.update(index=visible.index, id=visible.id, doc=update, if_seq_no=visible.seq_no,
                          if_primary_term=visible.primary_term, refresh=not defer_refresh)
        except ConflictError:
            continue
        audit_record(actor=actor, action="playbook.outcome", tenant=subject.tenant, subject=subject,
                     target_id=visible.id, details={"success": success})
        return {"id": visible.id, **{k: v for k, v in src.items() if k not in VECTOR_FIELDS}, **update}
    raise Conflict("the playbook is being updated too often; retry", details={"id": playbook_id},
                   code="concurrent_update")


def fact_support_add(*, subject: Subject, memory_id: str, episode_ids: list[str], confidence_step: float = 0.05,
                     metadata: dict | None = None) -> tuple[dict[str, Any], bool]:
    """Add supporting episodes to one of the subject's current facts (a near-duplicate was seen
    again): their ids join ``supporting_episode_ids`` and confidence rises by ``confidence_step``
    (capped at 1). Idempotent: episodes already supporting the fact change nothing. ``metadata``
    keys are merged into the fact's metadata. Returns (the fact, whether it changed).
    Raises NotFound if the fact is not the subject's.
    """
    ids = clean_ids(episode_ids, field="supporting_episode_ids", limit=1000)
    writer = write_target(tenant=subject.tenant)[0]
    for _attempt in range(20):
        visible = selectors.visible_document(subject=subject, memory_id=memory_id, types=[MemoryType.SEMANTIC])
        src = visible.source
        supporting = list(src.get("supporting_episode_ids") or [])
        new = [i for i in ids if i not in supporting]
        merged_metadata = {**(src.get("metadata") or {}), **(metadata or {})}
        if not new and merged_metadata == (src.get("metadata") or {}):
            return {"id": visible.id, **src}, False
        update: dict[str, Any] = {"metadata": clean_metadata(merged_metadata)}
        if new:
            update["supporting_episode_ids"] = [*supporting, *new][-1000:]
            update["confidence"] = min(1.0, float(src.get("confidence") or 0.0) + confidence_step * len(new))
        try:
            writer.update(index=visible.index, id=visible.id, doc=update, if_seq_no=visible.seq_no,
                          if_primary_term=visible.primary_term, refresh=True)
        except ConflictError:
            continue
        return {"id": visible.id, **src, **update}, True
    raise Conflict("the fact is being updated too often; retry", details={"id": memory_id})


def supersession_complete(*, subject: Subject, memory_id: str, memory_type: MemoryType) -> int:
    """Finish a supersession whose new document landed but whose old documents were not marked
    (the writer died in between): every id in the new document's ``supersedes`` gets it in its
    ``superseded_by``. Idempotent; returns how many old documents were marked now."""
    new = selectors.visible_document(subject=subject, memory_id=memory_id, types=[memory_type])
    old_ids = list(new.source.get("supersedes") or [])
    old = selectors.visible_documents(subject=subject, ids=old_ids, types=[memory_type])
    writer, prefix = write_target(tenant=subject.tenant)
    marked = 0
    for visible in old.values():
        if memory_id not in (visible.source.get("superseded_by") or []):
            _mark_superseded(subject=subject, writer=writer, visible=visible, memory_id=memory_id, now=_now())
            marked += 1
    if marked:
        writer.indices.refresh(index=alias_name(memory_type, prefix=prefix))
    return marked


def memory_forget(*, subject: Subject, memory_id: str, reason: str, actor: str) -> None:
    """Hard-delete one of the subject's memories; leave a content-free tombstone in the audit log."""
    reason = clean_text(reason, field="reason", limit=500)
    visible = selectors.visible_document(subject=subject, memory_id=memory_id)
    if visible.memory_type is MemoryType.EPISODIC:
        # Before the delete: a failure here leaves the episode in place, so forget can be retried;
        # the other order could leave its text in a follower's context with nothing left to forget.
        _context_forget(subject=subject, memory_id=memory_id)
    writer = write_target(tenant=subject.tenant)[0]
    try:
        writer.delete(index=visible.index, id=visible.id, refresh=True)
    except NotFoundError:
        # Forgotten meanwhile; the redacted contexts written above still become visible now.
        writer.indices.refresh(index=visible.index)
        raise memory_not_found(memory_id) from None
    if visible.memory_type is MemoryType.SEMANTIC:
        usage_forget(memory_ids=[visible.id])
    audit_record(actor=actor, action="memory.forget", tenant=subject.tenant, subject=subject, target_id=memory_id,
                 details={"memory_type": visible.memory_type.value, "reason": reason})
    memory_copies_purge(subject=subject, memory_id=memory_id, texts=_texts_of(visible.source))
    _cached_vectors_drop()


def _cached_vectors_drop() -> None:
    """Empty this process's cache of embedded texts (a turn's text and sentences go through it,
    keyed by digest): a forgotten text's vector must not outlive the forget here. Other processes'
    entries expire after ENGRAM_EMBEDDER_QUERY_CACHE_SECONDS."""
    if (cache := getattr(get_embedder(), "query_cache", None)) is not None:
        cache.clear()


def _texts_of(source: dict[str, Any]) -> set[str]:
    return {v for k in ("text", "title", "trigger", "steps", "refined_steps", "context")
            if isinstance(v := source.get(k), str) and v}


def _redacted(value: Any, *, memory_id: str, texts: set[str], top: bool = True) -> tuple[Any, bool]:
    """``value`` with every memory object of ``memory_id`` below the top level reduced to its id,
    and every string holding one of ``texts`` replaced; and whether anything changed."""
    if isinstance(value, dict):
        if not top and value.get("id") == memory_id and len(value) > 1:
            return {"id": memory_id, "forgotten": True}, True
        changed = False
        out = {}
        for k, v in value.items():
            out[k], c = _redacted(v, memory_id=memory_id, texts=texts, top=False)
            changed |= c
        return out, changed
    if isinstance(value, list):
        pairs = [_redacted(v, memory_id=memory_id, texts=texts, top=False) for v in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    if isinstance(value, str) and any(t in value for t in texts):
        return "[forgotten]", True
    return value, False


def memory_copies_purge(*, subject: Subject, memory_id: str, texts: set[str]) -> int:
    """Redact every copy Engram keeps of a forgotten memory outside Elasticsearch: the stored API
    responses of the subject's Idempotency-Keys (a turn's answer carries recalled memories) and
    queued outbox payloads. A redacted response is still replayed (its status and the rest of
    its body), so a retried write is not run again. Returns how many rows changed."""
    changed = 0
    for model, field in ((IdempotencyRecord, "response_body"), (OutboxEntry, "payload"), (OutboxEntry, "result")):
        for row in model.objects.filter(tenant=subject.tenant, external_id=subject.external_id).only("pk", field):
            value, dirty = _redacted(getattr(row, field), memory_id=memory_id, texts=texts)
            if dirty:
                model.objects.filter(pk=row.pk).update(**{field: value})
                changed += 1
    return changed


def _context_forget(*, subject: Subject, memory_id: str) -> None:
    """Re-index the episodes whose derived context held a forgotten episode, without its text."""
    es = subject_es_client(subject=subject)
    index = _episodic_alias(subject)
    dependents = derived.dependents_of(es=es, index=index, scope=memory_scope(subject=subject), memory_id=memory_id)
    if not dependents:
        return
    texts = derived.resolve(es=es, index=index, ids=[i for d in dependents for i in d["context_ids"] if i != memory_id])
    updates: list[dict[str, Any]] = []
    for dep in dependents:
        ids = [i for i in dep["context_ids"] if i != memory_id and i in texts]
        updates.append({"context_ids": ids or None, "derived_context": "\n".join(texts[i] for i in ids) or None})
    vectors = derived.episode_vectors([(dep["text"], [texts[i] for i in update["context_ids"] or ()])
                                       for dep, update in zip(dependents, updates, strict=True)])
    # A dependent forgotten meanwhile is fine (404). One client for the loop: ``.options()`` builds one per call.
    # Not refreshed one by one: the forget's delete, right after, refreshes the same index.
    writer = write_target(tenant=subject.tenant)[0].options(ignore_status=404)
    for dep, update, vector in zip(dependents, updates, vectors, strict=True):
        writer.update(index=index, id=dep["id"], doc={**update, **vector})


def vectors_rebuild(es: Elasticsearch, index: str, memory_type: MemoryType, hits: list[dict[str, Any]]) -> None:
    """Compute the vector fields of documents again, in place in each hit's ``_source``, as a write
    of them would today: an index migration calls this when the embedder changed
    (``engram_core.es.schema``). An episode's context is its explicit ``context`` or the texts of
    its ``context_ids`` still in ``index``, as on the write path."""
    sources = [hit["_source"] for hit in hits]
    for source in sources:
        for field in VECTOR_FIELDS:
            source.pop(field, None)
    if memory_type is not MemoryType.EPISODIC:
        vectors = get_embedder().embed_documents([embedding_text(memory_type, s) for s in sources])
        for source, vector in zip(sources, vectors, strict=True):
            source["embedding"] = vector
        return
    texts = derived.resolve(es=es, index=index, ids=[i for s in sources if s.get("context") is None
                                                    for i in s.get("context_ids") or ()])
    items = [(s["text"], [s["context"]] if s.get("context") is not None
              else [texts[i] for i in s.get("context_ids") or () if i in texts]) for s in sources]
    for source, fields in zip(sources, derived.episode_vectors(items), strict=True):
        source.update(fields)


def subject_erase(*, subject: Subject, actor: str) -> int:
    """Delete every document and key of a subject. Returns the number of documents deleted."""
    scope = memory_scope(subject=subject)
    writer, prefix = write_target(tenant=subject.tenant)
    deleted = 0
    indices = ",".join(alias_name(t, prefix=prefix) for t in USER_TYPES)
    query = {"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}}, {"term": {"user_id": scope["user_id"]}}]}}
    # Writes stored without waiting for a refresh (turns) must be found by the scan below.
    writer.indices.refresh(index=indices)
    # No _delete_by_query on every cluster: scan the ids, delete them in bulk, until none remain.
    while True:
        actions = [{"_op_type": "delete", "_index": alias_name(h["_source"]["memory_type"], prefix=prefix),
                    "_id": h["_id"]}
                   for h in helpers.scan(writer, index=indices, size=1000,
                                         query={"query": query, "_source": ["memory_type"]})]
        if not actions:
            break
        # refresh=True, not wait_for: the next scan must not find them, whatever the refresh interval.
        for ok, item in helpers.streaming_bulk(writer, actions, raise_on_error=False, refresh=True):
            deleted += ok
    subject_keys_revoke_all(subject=subject, actor=actor)
    audit_record(actor=actor, action="subject.erase", tenant=subject.tenant, subject=subject,
                 target_id=str(subject.user_id), details={"documents_deleted": deleted})
    _subject_pii_erase(subject=subject)
    return deleted


def _subject_pii_erase(*, subject: Subject) -> None:
    """What the database holds of an erased end-user goes too: stored API responses are deleted,
    settled outbox entries lose their content and the external id, and the subject row becomes a
    content-free tombstone (its opaque user_id, which the audit log refers to)."""
    tombstone = f"erased:{subject.user_id}"
    IdempotencyRecord.objects.filter(tenant=subject.tenant, external_id=subject.external_id).delete()
    # Tenant-wide requests that named the end-user in their body (creating it) stored it too.
    for record in IdempotencyRecord.objects.filter(token__tenant=subject.tenant, tenant__isnull=True):
        if subject.external_id in json.dumps(record.response_body, default=str):
            record.delete()
    (OutboxEntry.objects.filter(tenant=subject.tenant, external_id=subject.external_id)
     .exclude(status=OutboxEntry.Status.PENDING).update(external_id=tombstone, payload={}))
    usage_forget(subject=subject)
    Subject.objects.filter(pk=subject.pk).update(external_id=tombstone, display_name="")
    _cached_vectors_drop()



def _import_ids(subject: Subject, raw: dict[str, Any]) -> dict[str, str | None]:
    if raw.get("memory_id") is not None:
        client_id = raw.get("client_id")
        return {"id": _clean_memory_id(raw["memory_id"]),
                "client_id": _clean_memory_id(client_id) if client_id is not None else None}
    if raw.get("id") is not None:
        client_id = _clean_memory_id(raw["id"])
        return {"id": client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id,
                                       client_id=client_id), "client_id": client_id}
    return {"id": new_memory_id(), "client_id": None}


@dataclass(frozen=True)
class EpisodeIn:
    text: str
    occurred_at: datetime
    role: str = "user"
    session_id: str | None = None
    context: str | None = None
    metadata: dict | None = None
    id: str | None = None
    client_id: str | None = None


def computed_ahead(items: Sequence[Any], compute: Callable[[Any], Any]) -> Iterator[tuple[Any, Any]]:
    """Each item with ``compute(item)``, in order, the next item's computed in a worker thread
    while the caller uses this one's. An import embeds its next batch while the bulk helper sends
    this one, so the embedder and Elasticsearch's indexing run side by side instead of taking
    turns. If the caller stops early, the item being computed finishes and nothing follows it."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-ahead") as pool:
        pending = pool.submit(compute, items[0])
        for n, item in enumerate(items):
            result = pending.result()
            if n + 1 < len(items):
                pending = pool.submit(compute, items[n + 1])
            yield item, result


def episodes_import(*, subject: Subject, episodes: Iterable[dict[str, Any]],
                    progress: Callable[[int, int], None] | None = None, batch_size: int = 256,
                    accepted_at: datetime | str | None = None) -> list[str]:
    """Bulk-import historical episodes with their original timestamps.

    An episode's ``id`` is the client's own: it is kept as ``client_id`` and the stored id is
    namespaced to the subject (``client_memory_id``); ``memory_id`` (set by
    ``episodes_assign_ids`` when a write is accepted) is the stored id itself. Two episodes with
    the same id are refused up front (ValidationFailed ``duplicate_ids``).
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
                                     role=role_validate(raw.get("role") or "user"),
                                     session_id=clean_session_id(raw.get("session_id")),
                                     context=clean_text(raw["context"], field="context")
                                     if raw.get("context") is not None else None,
                                     metadata=clean_metadata(raw.get("metadata")),
                                     **_import_ids(subject, raw)))
        except ValidationFailed as exc:
            raise ValidationFailed(f"episode {n}: {exc.message}", details={**exc.details, "index": n},
                                   code=exc.code) from None
    if not cleaned:
        raise ValidationFailed("no episodes to import", code="empty_import")
    duplicate_ids_validate(ids=[e.client_id for e in cleaned], field="episodes")
    duplicate_ids_validate(ids=[e.id for e in cleaned], field="episodes")

    scope = memory_scope(subject=subject)
    contexts = derived.contexts_for_batch(es=subject_es_client(subject=subject), index=_episodic_alias(subject),
                                          scope=scope, episodes=cleaned)
    found = {e.id: c for e, c in zip(cleaned, contexts, strict=True) if c}
    now = _accepted(accepted_at).isoformat()
    writer, prefix = write_target(tenant=subject.tenant)
    index = alias_name(MemoryType.EPISODIC, prefix=prefix)

    def context_fields(episode: EpisodeIn) -> dict[str, Any]:
        c = found.get(episode.id)
        return {"context_ids": c.ids, "derived_context": c.text} if c else {}

    def vectors_of(batch: list[EpisodeIn]) -> list[dict[str, Any]]:
        return derived.episode_vectors([
            (e.text, [e.context] if e.context is not None else found[e.id].texts if e.id in found else ())
            for e in batch])

    def actions():
        batches = [cleaned[start:start + batch_size] for start in range(0, len(cleaned), batch_size)]
        for batch, vectors in computed_ahead(batches, vectors_of):
            for episode, vector in zip(batch, vectors, strict=True):
                source = {
                    **scope, "memory_type": MemoryType.EPISODIC.value, "text": episode.text,
                    "occurred_at": episode.occurred_at.isoformat(), "created_at": now, "role": episode.role,
                    "session_id": episode.session_id, "context": episode.context,
                    "metadata": episode.metadata or {}, "source": "import", "concepts": concepts_of(episode.text),
                    **context_fields(episode),
                    **({"client_id": episode.client_id} if episode.client_id else {})}
                sent[episode.id] = {k: source.get(k) for k in _CREATE_IDENTITY}
                yield {"_op_type": "create", "_index": index, "_id": episode.id,
                       "_source": {**source, **vector}}

    sent: dict[str, dict[str, Any]] = {}
    written: list[str] = []
    failures: list[dict] = []

    def undo() -> None:
        helpers.bulk(writer, ({"_op_type": "delete", "_index": index, "_id": i} for i in written),
                     raise_on_error=False, refresh=True)

    # No refresh per chunk (each would wait up to a refresh interval): one refresh at the end.
    try:
        for ok, item in helpers.streaming_bulk(writer, actions(), chunk_size=batch_size, raise_on_error=False,
                                               max_retries=3):
            result = item["create"]
            if ok:
                written.append(result["_id"])
                if progress:
                    progress(len(written), len(cleaned))
            else:
                failures.append(result)
    except Exception:
        # A later batch's embedding failed, or the cluster went away between chunks: the chunks
        # already written go again, as on a refusal (if the cluster cannot take the deletes either,
        # the import is retried from the outbox, where the same creates are not conflicts).
        if written:
            try:
                undo()
            except (ApiError, TransportError) as exc:
                log.warning("import: could not delete the %d episodes written before a failure: %s", len(written), exc)
        raise
    # A create whose stored document is the one sent is not a conflict, as in _store: either this
    # call's own chunk sent again by the client (its answer timed out after the cluster applied
    # it; same created_at, so undone with the rest on failure), or an earlier import of the same
    # episodes retried by its client (kept as it is whatever happens here).
    if conflicts := [f["_id"] for f in failures if f.get("status") == 409]:
        stored = writer.mget(index=index, ids=conflicts, source_excludes=VECTOR_FIELDS)["docs"]
        same = {d["_id"]: d["_source"] for d in stored
                if d.get("found") and all(d["_source"].get(k) == v for k, v in sent[d["_id"]].items())}
        written += [i for i in conflicts if i in same and same[i].get("created_at") == now]
        failures = [f for f in failures if f["_id"] not in same]
    if failures:
        undo()
        first = failures[0]
        if unavailable_answer(first.get("status", 0), first.get("error", {}).get("type")):
            # Busy after the bulk helper's retries, or an index write-blocked by a migration: an
            # outage (the submit path queues the import), not a refusal of these episodes.
            raise ServiceUnavailable("Elasticsearch cannot take the import's writes now; retry later",
                                     code="elasticsearch_unreachable")
        error = Conflict if first.get("status") == 409 else ValidationFailed
        raise error(f"import failed at episode {first['_id']!r} ({first.get('error', {}).get('type', 'error')}); "
                    "nothing was kept", details={"failed": len(failures)}, code="import_failed")
    # Visible to the next recall before returning, through the same refresh path as deferred turns.
    refresh_defer(subject=subject, memory_type=MemoryType.EPISODIC)
    refresh_ensure(subject=subject)
    return [e.id for e in cleaned]
