"""Forget and erase: a memory, or every memory and key of an end-user, goes from every store that
holds a copy of it (derived contexts, stored API responses, outbox payloads, use counters,
cached vectors), leaving a content-free tombstone in the audit log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.admin.models import LogEntry
from django.utils import timezone
from elasticsearch import NotFoundError, helpers

from engram_core.errors import Conflict, NotFound
from engram_core.es.schema import USER_TYPES, MemoryType, alias_name
from engram_core.validation import ERASED_PREFIX
from memory_app import selectors
from memory_app.providers import get_embedder
from language.phrases import phrases_redacted
from memory_app.models import ForgetNote, IdempotencyRecord, OutboxEntry
from memory_app.services import context as derived
from memory_app.services.store import document_update, episodic_alias, subject_writes, write_target
from memory_app.usage import usage_forget
from memory_app.validation import clean_cascade, clean_note, clean_reason, memory_not_found
from tenants.models import Subject
from tenants.selectors import SubjectGone, memory_scope
from tenants.services.audit import Actor, audit_record
from tenants.services.clients import subject_es_client
from tenants.services.keys import subject_keys_revoke_all


@dataclass
class Cascade:
    """What went with a forgotten episode: the facts and playbooks derived from it that were
    forgotten, those kept with their remaining support and flagged for review, and, when the
    caller opted out of the cascade, those kept as they are."""

    forgotten: list[dict[str, str]] = field(default_factory=list)
    flagged: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[dict[str, str]]]:
        return {"forgotten": self.forgotten, "flagged": self.flagged, "kept": self.kept}

    def ids(self) -> dict[str, list[str]]:
        """The ids alone, by fate (what the audit log keeps)."""
        return {fate: [m["id"] for m in memories] for fate, memories in self.as_dict().items() if memories}


def memory_forget(*, subject: Subject, memory_id: str, reason: str, actor: Actor, note: str | None = None,
                  cascade: bool = True) -> dict[str, Any]:
    """Hard-delete one of the subject's memories and every copy of it; leave a content-free
    tombstone in the audit log (the reason's code; ``note``, the caller's own words, is kept
    beside it, outside the chain).

    Forgetting an episode takes with it, in the same call, what was derived from it: a fact or
    playbook none of whose supporting episodes is left is forgotten too (audited as a cascade of
    this forget); one with support left keeps only that support and is flagged for review
    (``metadata.review``). ``cascade=False`` keeps them as they are (minus this episode's id), and
    the audit event says so. Forgetting a fact or playbook never touches its episodes.

    Returns ``{"id", "memory_type", "cascade"}``. Raises NotFound when the memory is not the
    subject's (an episode forgotten before still has its cascade completed first).
    """
    reason, note, cascade = clean_reason(reason), clean_note(note), clean_cascade(cascade)
    try:
        visible = selectors.visible_document(subject=subject, memory_id=memory_id)
    except NotFound:
        # Forgotten before, perhaps by a call that failed part-way: what was derived from it
        # still follows it.
        derived_follow(subject=subject, gone={memory_id}, reason=reason, actor=actor, cascade=cascade)
        raise
    texts = _texts_of(visible.source)
    # Before the delete too (and again after it, for a copy made meanwhile): a forget cut short
    # after its delete finds the memory missing when retried, its text gone with it.
    memory_copies_purge(subject=subject, memory_id=memory_id, texts=texts)
    if visible.memory_type is MemoryType.EPISODIC:
        # Before the delete: a failure here leaves the episode in place, so forget can be retried;
        # the other order could leave its text in another episode with nothing left to forget.
        # Turns stored without waiting for a refresh must be found by the searches that follow.
        with subject_writes(subject=subject) as target:
            target.writer.indices.refresh(index=episodic_alias(subject=subject))
        _context_forget(subject=subject, memory_id=memory_id)
        contexts_redact(subject=subject, texts=_texts_of(visible.source, fields=_TEXT_FIELDS))
    with subject_writes(subject=subject) as target:
        try:
            target.writer.delete(index=visible.index, id=visible.id, refresh=True)
        except NotFoundError:
            # Forgotten meanwhile; the redacted contexts written above still become visible now.
            target.writer.indices.refresh(index=visible.index)
            raise memory_not_found(memory_id) from None
    if visible.memory_type is MemoryType.SEMANTIC:
        usage_forget(memory_ids=[visible.id])
    # After the delete: a fact derived from this episode by a run that read it just before is
    # either found here or finds the episode gone when it is written (facts.fact_write).
    followed = Cascade()
    if visible.memory_type is MemoryType.EPISODIC:
        followed = derived_follow(subject=subject, gone={memory_id}, reason=reason, actor=actor, cascade=cascade)
    details: dict[str, Any] = {"memory_type": visible.memory_type.value, "reason": reason}
    if visible.memory_type is MemoryType.EPISODIC:
        details.update(cascade=cascade, derived=followed.ids())
    event = audit_record(actor=actor, action="memory.forget", tenant=subject.tenant, subject=subject,
                         target_id=memory_id, details=details)
    if note:
        ForgetNote.objects.create(subject=subject, audit_event=event, memory_id=memory_id, note=note)
    memory_copies_purge(subject=subject, memory_id=memory_id, texts=texts)
    _cached_vectors_drop()
    return {"id": memory_id, "memory_type": visible.memory_type.value, "cascade": followed.as_dict()}


def derived_follow(*, subject: Subject, gone: set[str], reason: str, actor: Actor, cascade: bool = True,
                   only: set[str] | None = None) -> Cascade:
    """The facts and playbooks derived from the episodes ``gone`` follow them (``derived_fate``):
    forgotten, or flagged with their remaining support; with ``cascade`` off, only the ids of
    ``gone`` leave their support. ``only``: the derived memories to consider (all by default).
    The one place the cascade is written: forget, and consolidation for a fact it derived from an
    episode forgotten meanwhile (``derived_support_check``) or before forgets cascaded."""
    derived = selectors.derived_memories(subject=subject, episode_ids=gone)
    if only is not None:
        derived = {i: d for i, d in derived.items() if i in only}
    present = selectors.episodes_present(subject=subject, ids=[i for d in derived.values()
                                                               for i in d.source.get("supporting_episode_ids") or []
                                                               if i not in gone])
    out = Cascade()
    for d in derived.values():
        fate = selectors.derived_fate(d, gone=gone, present=present)
        if fate is None:
            continue
        entry = {"id": d.id, "memory_type": d.memory_type.value}
        cause = sorted(gone.intersection(d.source.get("supporting_episode_ids") or []))
        if not cascade:
            _support_trim(subject=subject, visible=d, keep=lambda i: i not in gone, flag=False)
            out.kept.append(entry)
        elif fate == "forgotten":
            if _derived_delete(subject=subject, visible=d):
                audit_record(actor=actor, action="memory.forget", tenant=subject.tenant, subject=subject,
                             target_id=d.id, details={"memory_type": d.memory_type.value, "reason": reason,
                                                      "cascade_of": cause})
                memory_copies_purge(subject=subject, memory_id=d.id, texts=_texts_of(d.source))
                contexts_redact(subject=subject, texts=_texts_of(d.source, fields=_TEXT_FIELDS))
            out.forgotten.append(entry)
        else:
            _support_trim(subject=subject, visible=d, keep=lambda i: i not in gone and i in present, flag=True)
            audit_record(actor=actor, action="memory.flagged", tenant=subject.tenant, subject=subject,
                         target_id=d.id, details={"memory_type": d.memory_type.value, "reason": reason,
                                                  "cascade_of": cause})
            out.flagged.append(entry)
    return out


def derived_support_check(*, subject: Subject, memory_id: str, actor: Actor = "consolidation") -> Cascade:
    """After a fact or playbook naming supporting episodes is written: the episodes among them
    forgotten meanwhile (a forget that ran while it was being derived) take it with them, as
    that forget would have."""
    visible = selectors.visible_documents(subject=subject, ids=[memory_id], types=selectors.DERIVED_TYPES)
    support = set(visible[memory_id].source.get("supporting_episode_ids") or []) if memory_id in visible else set()
    gone = support - selectors.episodes_present(subject=subject, ids=support)
    if not gone:
        return Cascade()
    return derived_follow(subject=subject, gone=gone, reason="support_forgotten", actor=actor, only={memory_id})


def _derived_delete(*, subject: Subject, visible: selectors.Visible) -> bool:
    """Delete a derived memory; False when it was gone already."""
    try:
        with subject_writes(subject=subject) as target:
            target.writer.delete(index=visible.index, id=visible.id, refresh=True)
    except NotFoundError:
        return False
    if visible.memory_type is MemoryType.SEMANTIC:
        usage_forget(memory_ids=[visible.id])
    return True


def _support_trim(*, subject: Subject, visible: selectors.Visible, keep: Callable[[str], bool], flag: bool) -> None:
    """Keep only the supporting episodes ``keep`` accepts in a derived memory's support; with
    ``flag``, flag it for review too."""

    def trim(current: selectors.Visible) -> dict[str, Any] | None:
        support = current.source.get("supporting_episode_ids") or []
        kept = [i for i in support if keep(i)]
        if kept == support:
            return None
        update: dict[str, Any] = {"supporting_episode_ids": kept or None}
        if flag:
            metadata = current.source.get("metadata") or {}
            review = metadata.get("review") if isinstance(metadata.get("review"), dict) else {}
            update["metadata"] = {**metadata, "review": {
                "reason": "supporting_episodes_forgotten", "flagged_at": timezone.now().isoformat(),
                "episodes_forgotten": int(review.get("episodes_forgotten") or 0) + len(support) - len(kept)}}
        return update

    try:
        with subject_writes(subject=subject) as target:
            document_update(writer=target.writer, visible=visible, change=trim, refresh=True,
                            read=lambda: selectors.visible_document(subject=subject, memory_id=visible.id,
                                                                    types=[visible.memory_type]),
                            conflict=Conflict("a derived memory keeps changing; retry the forget",
                                              details={"id": visible.id}, code="concurrent_update"))
    except SubjectGone:
        raise
    except NotFound:
        pass  # forgotten meanwhile


def _cached_vectors_drop() -> None:
    """Empty this process's cache of embedded texts (a turn's text and sentences go through it,
    keyed by digest): a forgotten text's vector must not outlive the forget here. Other processes'
    entries expire after ENGRAM_EMBEDDER_QUERY_CACHE_SECONDS."""
    if (cache := getattr(get_embedder(), "query_cache", None)) is not None:
        cache.clear()


_TEXT_FIELDS = ("text", "title", "trigger", "steps", "refined_steps")


def _texts_of(source: dict[str, Any], *, fields: tuple[str, ...] = (*_TEXT_FIELDS, "context")) -> set[str]:
    return {v for k in fields if isinstance(v := source.get(k), str) and v}


# Keys whose strings are someone's own words about other memories (a client's context, a note): a
# quote of a forgotten memory there is replaced, phrase by phrase; other keys' strings are data
# of their own memory (another turn's text stays as it was, whatever it says).
_FREE_TEXT_KEYS = frozenset({"context", "derived_context", "note"})
_FORGOTTEN_OBJECT = "forgotten"


def copies_redacted(value: Any, *, memory_id: str, phrases: Sequence[str], objects: bool = True,
                    top: bool = True, quoting: bool = False) -> tuple[Any, bool]:
    """``value`` (a stored JSON document) without its copies of the forgotten memory ``memory_id``,
    and whether anything changed. With ``objects`` (a stored response): a memory object of
    ``memory_id`` below the top level becomes ``{"id", "forgotten": true}``, and a response about
    the memory itself (its id at the top level: the answer to its own write) has every quote of
    ``phrases`` replaced. Everywhere, a free-text field (``_FREE_TEXT_KEYS``) has its quotes of
    ``phrases`` replaced, on word boundaries (``phrases_redacted``), and nothing else of it. Every
    other value is returned as it was."""
    if isinstance(value, dict):
        if objects and not top and value.get("id") == memory_id and len(value) > 1:
            reduced = {"id": memory_id, _FORGOTTEN_OBJECT: True}
            return reduced, value != reduced
        about = quoting or (objects and top and value.get("id") == memory_id)
        changed, out = False, {}
        for k, v in value.items():
            out[k], c = copies_redacted(v, memory_id=memory_id, phrases=phrases, objects=objects, top=False,
                                        quoting=(about and k != "id") or k in _FREE_TEXT_KEYS)
            changed |= c
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        pairs = [copies_redacted(v, memory_id=memory_id, phrases=phrases, objects=objects, top=False,
                                 quoting=quoting) for v in value]
        return ([p[0] for p in pairs], True) if any(p[1] for p in pairs) else (value, False)
    if isinstance(value, str) and quoting:
        new = phrases_redacted(value, phrases)
        return new, new != value
    return value, False


def memory_copies_purge(*, subject: Subject, memory_id: str, texts: set[str]) -> int:
    """Redact every copy Engram keeps of a forgotten memory outside Elasticsearch (``copies_redacted``):
    the stored API responses of the subject's Idempotency-Keys (a turn's answer carries recalled
    memories), the outbox's payloads (a queued write's context may quote it; the write itself is
    kept whole, whatever memory it is about) and results, and forget notes that quote it. A
    redacted response is still replayed (its status and the rest of its body), so a retried write
    is not run again. Returns how many rows changed."""
    phrases = derived.phrases_of(texts)
    changed = 0
    own = {"tenant": subject.tenant, "external_id": subject.external_id}
    for rows, column, objects in ((IdempotencyRecord.objects.filter(**own), "response_body", True),
                                  (OutboxEntry.objects.filter(**own), "payload", False),
                                  (OutboxEntry.objects.filter(**own), "result", True),
                                  (ForgetNote.objects.filter(subject=subject), "note", False)):
        for row in rows.only("pk", column):
            value, dirty = copies_redacted(getattr(row, column), memory_id=memory_id, phrases=phrases,
                                           objects=objects, quoting=column == "note")
            if dirty:
                rows.model.objects.filter(pk=row.pk).update(**{column: value})
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
    with subject_writes(subject=subject) as target:
        writer = target.writer.options(ignore_status=404)
        for dep, update, vector in zip(dependents, updates, vectors, strict=True):
            writer.update(index=index, id=dep["id"], doc={**update, **vector})


def contexts_redact(*, subject: Subject, texts: set[str]) -> int:
    """Remove forgotten ``texts`` from the explicit contexts clients stored with the subject's other
    episodes: each quote, whole or sentence by sentence, becomes ``[forgotten]`` and the episode
    is embedded again. Returns how many episodes changed."""
    phrases = derived.phrases_of(texts)
    es, index = subject_es_client(subject=subject), episodic_alias(subject=subject)
    changed = [(dep, new) for dep in derived.explicit_dependents(es=es, index=index, scope=memory_scope(subject=subject),
                                                                 phrases=phrases)
               if (new := derived.context_redacted(dep["context"], phrases)) != dep["context"]]
    if not changed:
        return 0
    vectors = derived.episode_vectors([(dep["text"], [new]) for dep, new in changed])
    with subject_writes(subject=subject) as target:
        writer = target.writer.options(ignore_status=404)  # one forgotten meanwhile is fine
        for (dep, new), vector in zip(changed, vectors, strict=True):
            writer.update(index=index, id=dep["id"], doc={"context": new, **vector})
        writer.indices.refresh(index=index)
    return len(changed)


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
        for ok, item in helpers.streaming_bulk(writer, actions, raise_on_error=False, refresh=True):
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
    _cached_vectors_drop()
