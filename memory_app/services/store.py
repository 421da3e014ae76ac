"""The step every write shares: ids, the writer's target, the base document, and the create that
answers a retried write with what it stored the first time."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone
from elasticsearch import ConflictError, Elasticsearch

from engram_core.errors import Conflict, ServiceUnavailable
from engram_core.es.schema import HIDDEN_FIELDS, VECTOR_FIELDS, MemoryType, alias_name
from memory_app.providers import get_embedder
from memory_app.providers import concepts_of
from language.temporal import date_ranges, event_dates, states_time
from memory_app.selectors import Visible
from memory_app.validation import clean_datetime, clean_new_memory_id
from tenants.models import Subject, Tenant
from tenants.selectors import SubjectGone, index_prefix_for, memory_scope
from tenants.services.clients import subject_writer_prefix, writer_es_client, writer_prefix


def write_target(*, tenant: Tenant) -> tuple[Elasticsearch, str]:
    """The writer client and index prefix for ``tenant``'s memories (shared or its own indices):
    for tenant-wide writes (the catalog) and erase; an end-user's writes use ``subject_writes``."""
    prefix = writer_prefix(tenant=tenant)
    return writer_es_client(prefix=prefix), prefix


@dataclass
class SubjectWrites:
    """The writer and index prefix for one end-user's writes, and what they created."""

    writer: Elasticsearch
    prefix: str
    created: list[tuple[str, str]] = field(default_factory=list)  # (index, id) of the documents created

    def index(self, memory_type: MemoryType) -> str:
        return alias_name(memory_type, prefix=self.prefix)


@contextmanager
def subject_writes(*, subject: Subject) -> Iterator[SubjectWrites]:
    """Write for ``subject`` inside the block, checked before (``subject_write_target``) and after
    (``subject_write_confirm``) its writes."""
    target = subject_write_target(subject=subject)
    yield target
    subject_write_confirm(subject=subject, target=target)


def subject_write_target(*, subject: Subject) -> SubjectWrites:
    """Where ``subject``'s writes go, once the end-user is known not to be erased (NotFound) and
    the tenant not to be moving (ServiceUnavailable ``tenant_moving``): one database read."""
    prefix = subject_writer_prefix(subject=subject)
    return SubjectWrites(writer=writer_es_client(prefix=prefix), prefix=prefix)


def subject_write_confirm(*, subject: Subject, target: SubjectWrites) -> None:
    """The same read once the writes landed. An erase that began meanwhile: the documents they
    created are deleted and NotFound raised, so none outlives the erase's last scan. A move that
    began meanwhile (or finished): they may have landed in indices already copied, so the documents
    they created there are deleted and ``tenant_moving`` raised: the write is accepted into the
    outbox and applied again, by its ids, where the tenant's memories are once the move is done."""
    try:
        if subject_writer_prefix(subject=subject) != target.prefix:
            raise ServiceUnavailable("this tenant's memories moved during the write; retry shortly",
                                     code="tenant_moving", details={"retry_after": 5})
    except (SubjectGone, ServiceUnavailable):
        for index, memory_id in target.created:
            target.writer.options(ignore_status=404).delete(index=index, id=memory_id, refresh=True)
        raise


def episodic_alias(*, subject: Subject) -> str:
    """The episodic alias of the indices holding ``subject``'s tenant (shared or dedicated)."""
    return alias_name(MemoryType.EPISODIC, prefix=index_prefix_for(tenant=subject.tenant))


def new_memory_id() -> str:
    return uuid.uuid4().hex


def memory_id_or_new(memory_id: str | None) -> str:
    """The id a create stores its memory under: the caller's (checked), or a new one."""
    return new_memory_id() if memory_id is None else clean_new_memory_id(memory_id)


# Client-chosen ids never become document ids as they are: ids are one space shared by every
# tenant, so a raw client id could collide with (and reveal, by a 409) another end-user's.
_CLIENT_ID_NAMESPACE = uuid.UUID("6f1d4c1e-3b0a-4d7e-9a55-2c8e0b1f7a10")


def client_memory_id(*, tenant_id: int, external_id: str, client_id: str) -> str:
    """The stored id of a memory whose id the client chose: stable, and scoped to one end-user of
    one tenant (the same client id of two end-users gives two ids)."""
    return uuid.uuid5(_CLIENT_ID_NAMESPACE, f"{tenant_id}\x1f{external_id}\x1f{client_id}").hex


def accepted_time(accepted_at: datetime | str | None) -> datetime:
    """When Engram accepted a write (a replayed write keeps it); now when not given."""
    return clean_datetime(accepted_at, field="accepted_at") or timezone.now()


def embedding_text(memory_type: MemoryType, doc: dict[str, Any]) -> str:
    """What the dense leg sees for a document (BM25 sees the fields themselves)."""
    if memory_type is MemoryType.PROCEDURAL:
        return f"{doc['trigger']}\n{doc['steps']}"
    if memory_type is MemoryType.CATALOG:
        return f"{doc['title']}\n{doc['text']}"
    return doc["text"]  # an episode's vector also holds its context: see context.episode_vectors


# What makes two creates "the same write": a retry of a create that landed (its answer lost) finds
# a document with these fields equal, and gets that document back instead of a conflict.
CREATE_IDENTITY = ("tenant_id", "user_id", "memory_type", "text", "title", "trigger", "steps", "role",
                   "session_id", "context", "metadata", "supersedes", "contradiction", "source")


def document_create(*, memory_type: MemoryType, memory_id: str, doc: dict[str, Any], refresh: bool = True,
                    subject: Subject | None = None, tenant: Tenant | None = None) -> dict[str, Any]:
    """Create the document in the indices of ``subject`` (checked before and after,
    ``subject_writes``) or, tenant-wide, of ``tenant``. A document already under ``memory_id``
    with the same content from the same end-user is this write applied before (a retry): it is
    returned as it is. Any other document there is a Conflict."""
    if "embedding" not in doc:
        doc["embedding"] = get_embedder().embed_documents([embedding_text(memory_type, doc)])[0]
    if subject is None:
        writer, prefix = write_target(tenant=tenant)
        return _create(writer=writer, index=alias_name(memory_type, prefix=prefix), memory_id=memory_id, doc=doc,
                       refresh=refresh)
    with subject_writes(subject=subject) as target:
        index = target.index(memory_type)
        created = _create(writer=target.writer, index=index, memory_id=memory_id, doc=doc, refresh=refresh)
        target.created.append((index, memory_id))
    return created


def _create(*, writer: Elasticsearch, index: str, memory_id: str, doc: dict[str, Any], refresh: bool
            ) -> dict[str, Any]:
    try:
        writer.index(index=index, id=memory_id, document=doc, op_type="create", refresh=refresh)
    except ConflictError:
        existing = writer.options(ignore_status=404).get(index=index, id=memory_id,
                                                         source_excludes=VECTOR_FIELDS)
        source = existing.get("_source") if existing.get("found") else None
        if source is None or any(source.get(k) != doc.get(k) for k in CREATE_IDENTITY):
            raise Conflict(f"a memory with id {memory_id!r} already exists", details={"id": memory_id}) from None
        doc = source
    return {"id": memory_id, **{k: v for k, v in doc.items() if k not in (*VECTOR_FIELDS, *HIDDEN_FIELDS)}}


def base_document(*, subject: Subject, memory_type: MemoryType, text: str, now: datetime, metadata: dict,
                  source: str) -> dict[str, Any]:
    """The fields every memory of ``subject`` carries; the scope comes from the subject alone."""
    return {
        **memory_scope(subject=subject),
        "memory_type": memory_type.value,
        "text": text,
        "created_at": now.isoformat(),
        "source": source,
        "metadata": metadata,
        "concepts": concepts_of(text),
    }


def episode_dates(*, text: str, occurred_at: datetime) -> dict[str, Any]:
    """An episode's derived time fields: the days its words name, resolved against when it
    occurred, and whether its words tell a time at all (language.temporal)."""
    return {"event_dates": date_ranges(event_dates(text, when=occurred_at)) or None,
            "states_time": states_time(text, when=occurred_at)}


def document_update(*, writer: Elasticsearch, read: Callable[[], Visible],
                    change: Callable[[Visible], dict[str, Any] | None], conflict: Conflict,
                    visible: Visible | None = None, refresh: bool = False, attempts: int = 20
                    ) -> tuple[Visible, dict[str, Any] | None]:
    """Apply ``change(document)`` (the fields to update; None: nothing to do) to a document only if
    it is still as read (its sequence number): concurrent updates (a recall's use-count bump, another
    outcome) are never lost. On a conflict the document is read again through the subject's key
    (``read``, which raises NotFound once it is gone) and the change computed again; ``conflict`` is
    raised after ``attempts`` tries. ``visible``: the document as the caller has just read it.
    Returns the document as read before the update, and the update (None when nothing changed)."""
    for _attempt in range(attempts):
        visible = visible or read()
        update = change(visible)
        if update is None:
            return visible, None
        try:
            writer.update(index=visible.index, id=visible.id, doc=update, if_seq_no=visible.seq_no,
                          if_primary_term=visible.primary_term, refresh=refresh)
        except ConflictError:
            visible = None
            continue
        return visible, update
    raise conflict
