"""Forget and erase: a memory, or every memory and key of an end-user, goes from every store that
holds a copy of it (derived contexts, stored API responses, outbox payloads, use counters,
cached vectors), leaving a content-free tombstone in the audit log."""

from __future__ import annotations

import json
from typing import Any

from elasticsearch import NotFoundError, helpers

from engram_core.es.schema import USER_TYPES, MemoryType, alias_name
from memory_app import selectors
from memory_app.embeddings import get_embedder
from memory_app.models import IdempotencyRecord, OutboxEntry
from memory_app.services import context as derived
from memory_app.services.store import episodic_alias, write_target
from memory_app.usage import usage_forget
from memory_app.validation import clean_reason, memory_not_found
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.audit import audit_record
from tenants.services.clients import subject_es_client
from tenants.services.keys import subject_keys_revoke_all


def memory_forget(*, subject: Subject, memory_id: str, reason: str, actor: str) -> None:
    """Hard-delete one of the subject's memories; leave a content-free tombstone in the audit log."""
    reason = clean_reason(reason)
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
    index = episodic_alias(subject=subject)
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
