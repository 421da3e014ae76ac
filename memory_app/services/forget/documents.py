"""The delete step of a forget: the memory's own records, its Elasticsearch document
(``document_delete``; a derived memory's support trimmed when it keeps some) and, apart, its use
counter in the database (``counter_drop``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone
from elasticsearch import NotFoundError

from engram_core.errors import Conflict, NotFound
from engram_core.es.schema import MemoryType
from memory_app import selectors
from memory_app.services.forget.forgetting import Forgetting
from memory_app.services.store import document_update, subject_writes
from memory_app.usage import usage_forget
from memory_app.validation import memory_not_found
from tenants.models import Subject
from tenants.selectors import SubjectGone


def document_delete(forgetting: Forgetting) -> None:
    """Delete the document, visible to searches on return. NotFound when it went meanwhile."""
    visible = forgetting.visible
    with subject_writes(subject=forgetting.subject) as target:
        try:
            target.writer.delete(index=visible.index, id=visible.id, refresh=True)
        except NotFoundError:
            # Forgotten meanwhile; the redacted contexts written before still become visible now.
            target.writer.indices.refresh(index=visible.index)
            raise memory_not_found(visible.id) from None


def counter_drop(forgetting: Forgetting) -> None:
    """A forgotten fact's use counter goes with it."""
    if forgetting.memory_type is MemoryType.SEMANTIC:
        usage_forget(memory_ids=[forgetting.memory_id])


def derived_delete(forgetting: Forgetting) -> bool:
    """Delete a derived memory's document; False when it was gone already."""
    visible = forgetting.visible
    try:
        with subject_writes(subject=forgetting.subject) as target:
            target.writer.delete(index=visible.index, id=visible.id, refresh=True)
    except NotFoundError:
        return False
    return True


def support_trim(*, subject: Subject, visible: selectors.Visible, keep: Callable[[str], bool], flag: bool) -> None:
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
