"""The delete step of a forget: the memory's own records, its Elasticsearch document
(``document_delete``, ``derived_delete``) and, apart, its use counter in the database
(``counter_drop``)."""

from __future__ import annotations

from elasticsearch import NotFoundError

from engram_core.es.schema import MemoryType
from memory_app.services.forget.forgetting import Forgetting
from memory_app.services.store import subject_writes
from memory_app.usage import usage_forget
from memory_app.validation import memory_not_found


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
