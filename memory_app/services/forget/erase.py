"""Erase: every document and key of an end-user, and what the database holds of them."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import LogEntry
from django.utils import timezone
from elasticsearch import helpers

from engram_core.es.schema import USER_TYPES, alias_name
from engram_core.validation import ERASED_PREFIX
from memory_app.models import ForgetNote, IdempotencyRecord, OutboxEntry
from memory_app.services.forget.copies import vectors_drop
from memory_app.services.store import write_target
from memory_app.usage import usage_forget
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.audit import Actor, audit_record
from tenants.services.keys import subject_keys_revoke_all


def subject_erase(*, subject: Subject, actor: Actor) -> int:
    """Delete every document and key of a subject. Returns the number of documents deleted.

    The end-user is marked erased first: from then on no key is minted and no memory written for
    them (a request or a consolidation run in flight is refused, and a create that landed
    meanwhile deletes itself: ``store.subject_writes``), so the scan below leaves nothing."""
    writer, prefix = write_target(tenant=subject.tenant)  # (refused while the tenant moves: nothing marked yet)
    Subject.objects.filter(pk=subject.pk, erased_at__isnull=True).update(erased_at=timezone.now())
    scope = memory_scope(subject=subject)
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
        for ok, _item in helpers.streaming_bulk(writer, actions, raise_on_error=False, refresh=True):
            deleted += ok
    subject_keys_revoke_all(subject=subject, actor=actor)
    audit_record(actor=actor, action="subject.erase", tenant=subject.tenant, subject=subject,
                 target_id=str(subject.user_id), details={"documents_deleted": deleted})
    _subject_pii_erase(subject=subject)
    return deleted


def _holds_value(value: Any, wanted: str) -> bool:
    if isinstance(value, dict):
        return any(_holds_value(v, wanted) for v in value.values())
    if isinstance(value, list):
        return any(_holds_value(v, wanted) for v in value)
    return value == wanted


def _subject_pii_erase(*, subject: Subject) -> None:
    """What the database holds of an erased end-user goes too: stored API responses and forget notes
    are deleted, settled outbox entries lose their content and the external id, and the subject
    row becomes a content-free tombstone (its opaque user_id, which the audit log refers to)."""
    tombstone = f"{ERASED_PREFIX}{subject.user_id}"
    IdempotencyRecord.objects.filter(tenant=subject.tenant, external_id=subject.external_id).delete()
    ForgetNote.objects.filter(subject=subject).delete()
    # Tenant-wide requests that named the end-user in their body (creating it) stored it too: a
    # response holding the external id as one of its values (as stored, not as JSON escapes it).
    for record in IdempotencyRecord.objects.filter(token__tenant=subject.tenant, tenant__isnull=True):
        if _holds_value(record.response_body, subject.external_id):
            record.delete()
    # Settled entries keep their operation, status and error code; not what they said nor whom.
    settled = (OutboxEntry.objects.filter(tenant=subject.tenant, external_id=subject.external_id)
               .exclude(status=OutboxEntry.Status.PENDING))
    for entry in settled.exclude(last_error__isnull=True).only("pk", "last_error"):
        code = entry.last_error.get("code") if isinstance(entry.last_error, dict) else None
        OutboxEntry.objects.filter(pk=entry.pk).update(
            last_error={"code": code, "message": "(erased with the end-user)", "details": {}})
    settled.update(external_id=tombstone, payload={})
    usage_forget(subject=subject)
    # The admin's log names objects by type and id; an entry written before it did names them by
    # the end-user's external id.
    for entry in LogEntry.objects.filter(object_repr__contains=f"{subject.tenant.slug}/{subject.external_id}"):
        LogEntry.objects.filter(pk=entry.pk).update(object_repr=f"{entry.content_type.name} {entry.object_id}"[:200])
    Subject.objects.filter(pk=subject.pk).update(external_id=tombstone, display_name="")
    vectors_drop()
