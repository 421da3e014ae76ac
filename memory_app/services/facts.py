"""Facts, playbooks and catalog entries, and the counters they carry: playbook outcomes and a
fact's supporting episodes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from engram_core.errors import Conflict
from engram_core.es.schema import VECTOR_FIELDS, MemoryType
from memory_app import selectors
from memory_app.freshness import refresh_defer
from memory_app.providers import concepts_of_memory
from memory_app.services.store import (
    accepted_time,
    base_document,
    document_create,
    document_update,
    memory_id_or_new,
    subject_writes,
)
from memory_app.services.supersession import superseding_write
from memory_app.validation import (
    FactFields,
    Limits,
    OutcomeFields,
    PlaybookFields,
    clean_datetime,
    SUPPORTING_IDS_MAX,
    TITLE_MAX_CHARS,
    clean_metadata,
    clean_supporting_ids,
    clean_text,
)
from tenants.models import Subject, Tenant
from tenants.services.audit import audit_record


def fact_write(*, subject: Subject, text: str, confidence: float = 1.0, supersedes: list[str] | None = None,
               contradiction: str = "natural", supporting_episode_ids: list[str] | None = None,
               metadata: dict | None = None, memory_id: str | None = None, source: str = "agent",
               accepted_at: datetime | str | None = None, defer_refresh: bool = False,
               valid_from: datetime | str | None = None, limits: Limits | None = None) -> dict[str, Any]:
    """Store a semantic fact for a caller with no edge (consolidation, the eval, seed, tests): its
    fields are cleaned (``FactFields.clean``, as the edge cleans a write's; ``source`` is the
    caller's own), then stored (``fact_store``). ``limits``: read here when not given.
    """
    limits = limits or Limits.from_settings()
    fact = FactFields.clean({"text": text, "confidence": confidence, "supersedes": supersedes,
                             "contradiction": contradiction, "supporting_episode_ids": supporting_episode_ids,
                             "metadata": metadata}, limits=limits, source=source)
    return fact_store(subject=subject, fact=fact, memory_id=memory_id, accepted_at=accepted_at,
                      defer_refresh=defer_refresh, valid_from=valid_from, limits=limits)


def fact_store(*, subject: Subject, fact: FactFields, limits: Limits, memory_id: str | None = None,
               accepted_at: datetime | str | None = None, defer_refresh: bool = False,
               valid_from: datetime | str | None = None) -> dict[str, Any]:
    """Store a semantic fact, its fields as cleaned (``FactFields``), superseding the older facts
    it names. With ``defer_refresh``, returns without waiting for a refresh; the subject's next read
    through Engram sees it (memory_app.freshness).

    A harsh contradiction lowers the new fact's confidence by ``limits.harsh_penalty``.
    ``valid_from``: when the fact became true (default: the write time); the facts it supersedes
    stop being valid then (``valid_to``).
    Raises NotFound if a superseded id is not the subject's (missing and "not yours" alike).
    """
    now = accepted_time(accepted_at)
    doc = base_document(subject=subject, memory_type=MemoryType.SEMANTIC, text=fact.text, now=now,
                        metadata=fact.metadata, source=fact.source)
    doc.update(
        last_used_at=now.isoformat(),  # its use count starts at 0 and lives in the database (memory_app.usage)
        confidence=fact.confidence,
        supporting_episode_ids=list(fact.supporting_episode_ids),
        valid_from=(clean_datetime(valid_from, field="valid_from") or now).isoformat(),
    )
    return superseding_write(subject=subject, memory_type=MemoryType.SEMANTIC, memory_id=memory_id, doc=doc,
                             fields=fact, now=now, defer_refresh=defer_refresh,
                             harsh_penalty=limits.harsh_penalty,
                             pending_seconds=limits.pending_seconds)


def playbook_write(*, subject: Subject, trigger: str, steps: str, supersedes: list[str] | None = None,
                   contradiction: str = "natural", confidence: float = 1.0, metadata: dict | None = None,
                   memory_id: str | None = None, source: str = "agent", supporting_episode_ids: list[str] | None = None,
                   accepted_at: datetime | str | None = None, defer_refresh: bool = False,
                   limits: Limits | None = None) -> dict[str, Any]:
    """Store a procedural playbook for a caller with no edge, as ``fact_write`` does a fact
    (``PlaybookFields.clean``, then ``playbook_store``). ``supporting_episode_ids``: the episodes
    it was derived from (consolidation's), which it follows when they are forgotten."""
    limits = limits or Limits.from_settings()
    playbook = PlaybookFields.clean({"trigger": trigger, "steps": steps, "supersedes": supersedes,
                                     "contradiction": contradiction, "confidence": confidence,
                                     "metadata": metadata}, limits=limits, source=source)
    return playbook_store(subject=subject, playbook=playbook, memory_id=memory_id, accepted_at=accepted_at,
                          defer_refresh=defer_refresh, limits=limits,
                          supporting_episode_ids=clean_supporting_ids(supporting_episode_ids))


def playbook_store(*, subject: Subject, playbook: PlaybookFields, limits: Limits, memory_id: str | None = None,
                   accepted_at: datetime | str | None = None, defer_refresh: bool = False,
                   supporting_episode_ids: list[str] | None = None) -> dict[str, Any]:
    """Store a procedural playbook (trigger + steps), its fields as cleaned (``PlaybookFields``),
    with zeroed outcome counters (``defer_refresh`` and ``limits`` as for facts).
    ``supporting_episode_ids``: the episodes it was derived from (consolidation's, cleaned)."""
    now = accepted_time(accepted_at)
    trigger, steps = playbook.trigger, playbook.steps
    doc = base_document(subject=subject, memory_type=MemoryType.PROCEDURAL, text=f"{trigger}\n{steps}", now=now,
                        metadata=playbook.metadata, source=playbook.source)
    doc.update(trigger=trigger, steps=steps, success_count=0, failure_count=0, confidence=playbook.confidence)
    if supporting_episode_ids:
        doc["supporting_episode_ids"] = supporting_episode_ids
    return superseding_write(subject=subject, memory_type=MemoryType.PROCEDURAL, memory_id=memory_id, doc=doc,
                             fields=playbook, now=now, defer_refresh=defer_refresh,
                             harsh_penalty=limits.harsh_penalty,
                             pending_seconds=limits.pending_seconds)


def catalog_entry_write(*, tenant: Tenant, title: str, text: str, metadata: dict | None = None,
                        memory_id: str | None = None, source: str = "tenant", limits: Limits | None = None
                        ) -> dict[str, Any]:
    """Store a tenant-wide catalog entry (no user_id: every subject of the tenant can recall it).
    ``limits``: as for facts."""
    limits = limits or Limits.from_settings()
    title = clean_text(title, field="title", limit=TITLE_MAX_CHARS)
    text = clean_text(text, limit=limits.text_chars)
    now = timezone.now()
    doc = {"tenant_id": tenant.slug, "memory_type": MemoryType.CATALOG.value, "title": title, "text": text,
           "created_at": now.isoformat(), "source": source,
           "metadata": clean_metadata(metadata, limit=limits.metadata_bytes)}
    doc["concepts"] = concepts_of_memory(doc)
    return document_create(tenant=tenant, memory_type=MemoryType.CATALOG, memory_id=memory_id_or_new(memory_id),
                           doc=doc)


_OUTCOME_IDS_KEPT = 100


def playbook_outcome_record(*, subject: Subject, playbook_id: str, success: bool,
                            refined_steps: str | None = None, operation_id: str | None = None,
                            episode_id: str | None = None, actor: Any = "agent",
                            defer_refresh: bool = False, limits: Limits | None = None) -> dict[str, Any]:
    """Count one success or failure of a playbook for a caller with no edge (consolidation, the
    eval, seed, tests): the outcome is cleaned (``OutcomeFields.clean``, as the edge cleans an
    outcome write's), then counted (``playbook_outcome_store``). ``limits``: read here when not given."""
    limits = limits or Limits.from_settings()
    outcome = OutcomeFields.clean({"success": success, "refined_steps": refined_steps, "operation_id": operation_id},
                                  limits=limits, episode_id=episode_id)
    return playbook_outcome_store(subject=subject, playbook_id=playbook_id, outcome=outcome, actor=actor,
                                  defer_refresh=defer_refresh, limits=limits)


def playbook_outcome_store(*, subject: Subject, playbook_id: str, outcome: OutcomeFields, limits: Limits,
                           actor: Any = "agent", defer_refresh: bool = False) -> dict[str, Any]:
    """Count one success or failure of a playbook, as cleaned (``OutcomeFields``); store its
    refined steps when it has some. With ``defer_refresh``, the subject's next read refreshes
    (memory_app.freshness) instead of this call.

    Increments are exact under concurrency (``document_update``). The count is idempotent when the
    outcome is identified: by ``operation_id`` (fixed when the write was accepted; the playbook
    keeps the ids of its last outcomes) or by ``episode_id`` (the episode that reported it, from
    consolidation; it joins ``supporting_episode_ids``). A repeat is a no-op. Each counted outcome
    is also a content-free ``playbook.outcome`` audit event: the outcome history. Raises NotFound
    if the playbook is not the subject's, Conflict (``concurrent_update``) if it keeps changing.
    """
    success, refined = outcome.success, outcome.refined_steps
    operation_id, episode_id = outcome.operation_id, outcome.episode_id

    def count(visible: selectors.Visible) -> dict[str, Any] | None:
        src = visible.source
        applied = src.get("outcome_ids") or []
        supporting = list(src.get("supporting_episode_ids") or [])
        if (operation_id is not None and operation_id in applied) or \
                (episode_id is not None and episode_id in supporting):
            return None
        now = timezone.now().isoformat()
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
        return update

    with subject_writes(subject=subject) as target:
        visible, update = document_update(
            writer=target.writer, change=count, refresh=not defer_refresh,
            read=lambda: selectors.visible_document(subject=subject, memory_id=playbook_id,
                                                    types=[MemoryType.PROCEDURAL]),
            conflict=Conflict("the playbook is being updated too often; retry", details={"id": playbook_id},
                              code="concurrent_update"))
    if update is not None and defer_refresh:  # once stored (see memory_app.freshness)
        refresh_defer(subject=subject, memory_type=MemoryType.PROCEDURAL, seconds=limits.pending_seconds)
    if update is not None:
        audit_record(actor=actor, action="playbook.outcome", tenant=subject.tenant, subject=subject,
                     target_id=visible.id, details={"success": success})
    return {"id": visible.id, **{k: v for k, v in visible.source.items() if k not in VECTOR_FIELDS}, **(update or {})}


def fact_support_add(*, subject: Subject, memory_id: str, episode_ids: list[str], confidence_step: float = 0.05,
                     metadata: dict | None = None, limits: Limits | None = None) -> tuple[dict[str, Any], bool]:
    """Add supporting episodes to one of the subject's current facts (a near-duplicate was seen
    again): their ids join ``supporting_episode_ids`` and confidence rises by ``confidence_step``
    (capped at 1). Idempotent: episodes already supporting the fact change nothing. ``metadata``
    keys are merged into the fact's metadata. Returns (the fact, whether it changed).
    Raises NotFound if the fact is not the subject's. ``limits``: as for ``fact_write``.
    """
    limits = limits or Limits.from_settings()
    ids = clean_supporting_ids(episode_ids)

    def support(visible: selectors.Visible) -> dict[str, Any] | None:
        src = visible.source
        supporting = list(src.get("supporting_episode_ids") or [])
        new = [i for i in ids if i not in supporting]
        merged_metadata = {**(src.get("metadata") or {}), **(metadata or {})}
        if not new and merged_metadata == (src.get("metadata") or {}):
            return None
        update: dict[str, Any] = {"metadata": clean_metadata(merged_metadata, limit=limits.metadata_bytes)}
        if new:
            update["supporting_episode_ids"] = [*supporting, *new][-SUPPORTING_IDS_MAX:]
            update["confidence"] = min(1.0, float(src.get("confidence") or 0.0) + confidence_step * len(new))
        return update

    with subject_writes(subject=subject) as target:
        visible, update = document_update(
            writer=target.writer, change=support, refresh=True,
            read=lambda: selectors.visible_document(subject=subject, memory_id=memory_id,
                                                    types=[MemoryType.SEMANTIC]),
            conflict=Conflict("the fact is being updated too often; retry", details={"id": memory_id}))
    return {"id": visible.id, **visible.source, **(update or {})}, update is not None
