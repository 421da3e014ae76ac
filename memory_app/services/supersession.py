"""Supersession: a new fact or playbook replaces older ones of the same subject, which are kept and
marked (``superseded_by``/``superseded_at``), so chains read both ways."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from elasticsearch import ApiError, ConflictError, Elasticsearch

from engram_core.errors import Conflict, NotFound, ValidationFailed
from engram_core.es.schema import MemoryType, alias_name
from memory_app import selectors
from memory_app.freshness import refresh_defer
from memory_app.services.store import document_create, document_update, memory_id_or_new, subject_writes, write_target
from memory_app.validation import SupersedingFields
from tenants.models import Subject


def superseding_write(*, subject: Subject, memory_type: MemoryType, memory_id: str | None, doc: dict[str, Any],
                      fields: SupersedingFields, now: datetime, harsh_penalty: float, pending_seconds: int,
                      defer_refresh: bool = False) -> dict[str, Any]:
    """Create ``doc`` superseding the subject's memories ``fields.supersedes`` (none: a plain
    create), as ``fields.contradiction`` says (both cleaned: ``SupersedingFields``).

    A harsh contradiction lowers the new document's confidence by ``harsh_penalty``; a deferred
    refresh's mark lives ``pending_seconds``.
    Raises NotFound if a superseded id is not the subject's (missing and "not yours" alike), and
    Conflict (``concurrent_update``) when an old document keeps changing; nothing is kept then.
    """
    memory_id = memory_id_or_new(memory_id)
    old_ids, contradiction = list(fields.supersedes), fields.contradiction
    if memory_id in old_ids:
        raise ValidationFailed("a memory cannot supersede itself", details={"field": "supersedes"},
                               code="invalid_ids")
    # Deferred: the next read refreshes, marked once the writes are stored. A creation names its
    # document (searchable => visible); a supersession also updates older documents, so it names none.
    refresh = not defer_refresh
    if not old_ids:
        stored = document_create(subject=subject, memory_type=memory_type, memory_id=memory_id, doc=doc,
                                 refresh=refresh)
        if defer_refresh:
            refresh_defer(subject=subject, memory_type=memory_type, memory_id=memory_id,
                          seconds=pending_seconds)
        return stored

    old = selectors.visible_documents(subject=subject, ids=old_ids, types=[memory_type])
    missing = [i for i in old_ids if i not in old]
    if missing:
        raise NotFound(f"cannot supersede {', '.join(map(repr, missing))}: no such {memory_type.value} memory "
                       f"for this subject", details={"ids": missing})
    doc.update(supersedes=old_ids, contradiction=contradiction)
    if contradiction == "harsh":
        doc["confidence"] = max(0.0, doc["confidence"] - harsh_penalty)

    stored = document_create(subject=subject, memory_type=memory_type, memory_id=memory_id, doc=doc,
                             refresh=False)
    done: list[selectors.Visible] = []
    target = None
    try:
        with subject_writes(subject=subject) as target:
            for visible in old.values():
                done.append(_mark_superseded(subject=subject, writer=target.writer, visible=visible,
                                             memory_id=memory_id, now=now, valid_to=doc.get("valid_from")))
            if refresh:  # one refresh makes the new document and every mark visible
                target.writer.indices.refresh(index=target.index(memory_type))
    except (ApiError, NotFound, Conflict) as exc:
        writer, prefix = (target.writer, target.prefix) if target else write_target(tenant=subject.tenant)
        _undo_supersede(subject=subject, writer=writer, new_index=alias_name(memory_type, prefix=prefix),
                        new_id=memory_id, done=done)
        if isinstance(exc, ConflictError):
            raise Conflict("a superseded memory changed concurrently; nothing was written, retry",
                           details={"ids": old_ids}, code="concurrent_update") from None
        raise
    if defer_refresh:
        refresh_defer(subject=subject, memory_type=memory_type, seconds=pending_seconds)
    return stored


def _mark_superseded(*, subject: Subject, writer: Elasticsearch, visible: selectors.Visible, memory_id: str,
                     now: datetime, valid_to: str | None = None) -> selectors.Visible:
    """Append ``memory_id`` to the old document's ``superseded_by`` (not refreshed: the caller
    refreshes once, or defers); returns the document as it was just before (what an undo
    restores). Recall bumps use counts at any time, which changes the sequence number: on a
    conflict, re-read through the subject's key and try again."""

    def read() -> selectors.Visible:
        fresh = selectors.visible_documents(subject=subject, ids=[visible.id], types=[visible.memory_type])
        if visible.id not in fresh:
            raise NotFound(f"cannot supersede {visible.id!r}: it was forgotten meanwhile",
                           details={"ids": [visible.id]})
        return fresh[visible.id]

    def mark(current: selectors.Visible) -> dict[str, Any] | None:
        previous = current.source.get("superseded_by") or []
        if memory_id in previous:  # already marked (a retried write): never twice
            return None
        marks = {"superseded_by": [*previous, memory_id], "superseded_at": now.isoformat()}
        if valid_to and current.memory_type == MemoryType.SEMANTIC and not current.source.get("valid_to"):
            # It stopped being true when its successor became true, never before it started.
            start = current.source.get("valid_from")
            marks["valid_to"] = start if start and _instant(start) > _instant(valid_to) else valid_to
        return marks

    before, _update = document_update(
        writer=writer, read=read, change=mark, visible=visible,
        conflict=Conflict("a superseded memory keeps changing concurrently; nothing was written, retry",
                          details={"ids": [visible.id]}, code="concurrent_update"))
    return before


def _instant(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _undo_supersede(*, subject: Subject, writer: Elasticsearch, new_index: str, new_id: str,
                    done: list[selectors.Visible]) -> None:
    """Compensate a supersession that failed part-way: take its id out of the old documents it
    marked, and only its id (another supersession may have marked one meanwhile), with their
    sequence numbers as every update; then drop the new document."""
    for before in done:
        def unmark(current: selectors.Visible, before: selectors.Visible = before) -> dict[str, Any] | None:
            marks = current.source.get("superseded_by") or []
            if new_id not in marks:
                return None
            left = [i for i in marks if i != new_id]
            return {"superseded_by": left or None,
                    "superseded_at": current.source.get("superseded_at") if left else before.source.get("superseded_at"),
                    **({"valid_to": current.source.get("valid_to") if left else before.source.get("valid_to")}
                       if before.memory_type == MemoryType.SEMANTIC else {})}

        try:
            document_update(writer=writer, change=unmark,
                            read=lambda before=before: selectors.visible_document(subject=subject, memory_id=before.id,
                                                                                  types=[before.memory_type]),
                            conflict=Conflict("a superseded memory keeps changing; its mark could not be undone",
                                              details={"ids": [before.id]}, code="concurrent_update"))
        except NotFound:
            pass  # forgotten meanwhile: nothing to restore
    writer.options(ignore_status=404).delete(index=new_index, id=new_id, refresh=True)


def supersession_complete(*, subject: Subject, memory_id: str, memory_type: MemoryType) -> int:
    """Finish a supersession whose new document landed but whose old documents were not marked
    (the writer died in between): every id in the new document's ``supersedes`` gets it in its
    ``superseded_by``. Idempotent; returns how many old documents were marked now."""
    new = selectors.visible_document(subject=subject, memory_id=memory_id, types=[memory_type])
    old_ids = list(new.source.get("supersedes") or [])
    old = selectors.visible_documents(subject=subject, ids=old_ids, types=[memory_type])
    marked = 0
    with subject_writes(subject=subject) as target:
        for visible in old.values():
            if memory_id not in (visible.source.get("superseded_by") or []):
                _mark_superseded(subject=subject, writer=target.writer, visible=visible, memory_id=memory_id,
                                 now=timezone.now())
                marked += 1
        if marked:
            target.writer.indices.refresh(index=target.index(memory_type))
    return marked
