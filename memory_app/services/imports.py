"""Bulk import of historical episodes with their original timestamps: all or nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from elasticsearch import ApiError, TransportError, helpers

from engram_core.errors import Conflict, ServiceUnavailable, ValidationFailed
from engram_core.es.client import unavailable_answer
from engram_core.es.schema import VECTOR_FIELDS, MemoryType
from engram_core.threads import computed_ahead
from memory_app.freshness import refresh_defer, refresh_ensure
from memory_app.providers import concepts_of
from memory_app.services import context as derived
from memory_app.services.store import (
    CREATE_IDENTITY,
    accepted_time,
    client_memory_id,
    episode_dates,
    episodic_alias,
    new_memory_id,
    subject_write_confirm,
    subject_write_target,
)
from memory_app.validation import ImportedEpisode, ImportFields, Limits, duplicate_ids_validate
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client

log = logging.getLogger(__name__)


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


def _stored_id(subject: Subject, episode: ImportedEpisode) -> str:
    if episode.memory_id is not None:
        return episode.memory_id
    if episode.client_id is not None:
        return client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id,
                                client_id=episode.client_id)
    return new_memory_id()


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


def episodes_import(*, subject: Subject, episodes: Iterable[dict[str, Any]],
                    progress: Callable[[int, int], None] | None = None, batch_size: int = 256,
                    accepted_at: datetime | str | None = None,
                    context_options: derived.ContextOptions | None = None, limits: Limits | None = None
                    ) -> list[str]:
    """Bulk-import historical episodes with their original timestamps, for a caller with no edge
    (a command, the eval, seed, tests): the episodes are cleaned (``ImportFields.of``, as the edge
    cleans an import's) and stored (``episodes_store``).

    An episode's ``id`` is the client's own: it is kept as ``client_id`` and the stored id is
    namespaced to the subject (``client_memory_id``); ``memory_id`` (set by
    ``episodes_assign_ids`` when a write is accepted) is the stored id itself. Two episodes with
    the same id are refused up front (ValidationFailed ``duplicate_ids``).
    Every episode is validated first (ValidationFailed names the first bad one's position) and
    nothing is written unless all are valid. ``limits`` and ``context_options``: read here when
    not given.
    """
    limits = limits or Limits.from_settings()
    return episodes_store(subject=subject, imported=ImportFields.of(episodes, limits=limits), limits=limits,
                          progress=progress, batch_size=batch_size, accepted_at=accepted_at,
                          context_options=context_options or derived.ContextOptions.from_settings())


def episodes_store(*, subject: Subject, imported: ImportFields, limits: Limits,
                   context_options: derived.ContextOptions, progress: Callable[[int, int], None] | None = None,
                   batch_size: int = 256, accepted_at: datetime | str | None = None) -> list[str]:
    """Store an import's episodes, as cleaned (``ImportFields``), with their original timestamps:
    all or nothing. If the bulk write fails part-way, the episodes already written are deleted
    again before the error is raised. Returns the stored ids in order. ``limits``: those it was
    checked within (how long its refresh mark lives); ``context_options``: how the episodes'
    contexts and vectors are made (read at the entry)."""
    cleaned = [EpisodeIn(text=e.text, occurred_at=e.occurred_at, role=e.role, session_id=e.session_id,
                         context=e.context, metadata=e.metadata, id=_stored_id(subject, e), client_id=e.client_id)
               for e in imported.episodes]
    # The one check the edge cannot make: ids derived from the client's own within this end-user.
    duplicate_ids_validate(ids=[e.id for e in cleaned], field="episodes")

    scope = memory_scope(subject=subject)
    contexts = derived.contexts_for_batch(es=subject_es_client(subject=subject), index=episodic_alias(subject=subject),
                                          scope=scope, episodes=cleaned, turns=context_options.turns)
    found = {e.id: c for e, c in zip(cleaned, contexts, strict=True) if c}
    now = accepted_time(accepted_at).isoformat()
    target = subject_write_target(subject=subject)
    writer, index = target.writer, target.index(MemoryType.EPISODIC)

    def context_fields(episode: EpisodeIn) -> dict[str, Any]:
        c = found.get(episode.id)
        return {"context_ids": c.ids, "derived_context": c.text} if c else {}

    def vectors_of(batch: list[EpisodeIn]) -> list[dict[str, Any]]:
        return derived.episode_vectors([
            (e.text, [e.context] if e.context is not None else found[e.id].texts if e.id in found else ())
            for e in batch], options=context_options)

    def actions():
        batches = [cleaned[start:start + batch_size] for start in range(0, len(cleaned), batch_size)]
        for batch, vectors in computed_ahead(batches, vectors_of):
            for episode, vector in zip(batch, vectors, strict=True):
                source = {
                    **scope, "memory_type": MemoryType.EPISODIC.value, "text": episode.text,
                    "occurred_at": episode.occurred_at.isoformat(), "created_at": now, "role": episode.role,
                    "session_id": episode.session_id, "context": episode.context,
                    "metadata": episode.metadata or {}, "source": "import", "concepts": concepts_of(episode.text),
                    **episode_dates(text=episode.text, occurred_at=episode.occurred_at),
                    **context_fields(episode),
                    **({"client_id": episode.client_id} if episode.client_id else {})}
                sent[episode.id] = {k: source.get(k) for k in CREATE_IDENTITY}
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
    # A create whose stored document is the one sent is not a conflict, as in document_create: either this
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
    target.created += [(index, i) for i in written]
    subject_write_confirm(subject=subject, target=target)
    # Visible to the next recall before returning, through the same refresh path as deferred turns.
    refresh_defer(subject=subject, memory_type=MemoryType.EPISODIC, seconds=limits.pending_seconds)
    refresh_ensure(subject=subject)
    return [e.id for e in cleaned]
