"""Episodes: the raw, time-stamped events (every user turn as it landed)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from engram_core.es.schema import MemoryType
from memory_app.freshness import refresh_defer, refresh_ensure
from memory_app.services import context as derived
from memory_app.services.store import (
    accepted_time,
    base_document,
    document_create,
    episode_dates,
    episodic_alias,
    memory_id_or_new,
)
from memory_app.validation import EpisodeFields, Limits
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client


def episode_write(*, subject: Subject, text: str, occurred_at: datetime | str | None = None, role: str = "user",
                  session_id: str | None = None, context: str | None = None, metadata: dict | None = None,
                  memory_id: str | None = None, source: str = "agent",
                  accepted_at: datetime | str | None = None, defer_refresh: bool = False,
                  context_options: derived.ContextOptions | None = None, limits: Limits | None = None
                  ) -> dict[str, Any]:
    """Store one episodic event for a caller with no edge (the eval, seed, tests): its fields are
    cleaned (``EpisodeFields.clean``, as the edge cleans a write's; ``source`` is the caller's own),
    then stored (``episode_store``). ``limits`` and ``context_options``: read here when not given.
    """
    limits = limits or Limits.from_settings()
    episode = EpisodeFields.clean({"text": text, "occurred_at": occurred_at, "role": role, "session_id": session_id,
                                   "context": context, "metadata": metadata}, limits=limits, source=source)
    return episode_store(subject=subject, episode=episode, memory_id=memory_id, accepted_at=accepted_at,
                         defer_refresh=defer_refresh, limits=limits,
                         context_options=context_options or derived.ContextOptions.from_settings())


def episode_store(*, subject: Subject, episode: EpisodeFields, limits: Limits,
                  context_options: derived.ContextOptions, memory_id: str | None = None,
                  accepted_at: datetime | str | None = None, defer_refresh: bool = False) -> dict[str, Any]:
    """Store one episodic event (e.g. the verbatim user turn), its fields as cleaned
    (``EpisodeFields``). Visible to recall on return; with ``defer_refresh``, visible to the
    subject's next recall (memory_app.freshness) without waiting for a refresh here (its mark
    lives ``limits.pending_seconds``).

    ``accepted_at`` is when Engram accepted the write (a write replayed from the outbox keeps the
    time it was accepted, not the time it is applied); it defaults ``created_at`` and ``occurred_at``.

    ``context`` (optional) is the conversation just before the turn; recall matches on it with a
    low weight, which finds short replies ("yes, last Tuesday") by what they answer. Without it,
    an episode with a ``session_id`` gets its context derived from the session's preceding
    episodes (``services.context``, with ``context_options``: read at the entry).
    """
    text, context, session_id = episode.text, episode.context, episode.session_id
    memory_id = memory_id_or_new(memory_id)
    now = accepted_time(accepted_at)
    occurred = episode.occurred_at or now
    doc = base_document(subject=subject, memory_type=MemoryType.EPISODIC, text=text, now=now,
                        metadata=episode.metadata, source=episode.source)
    doc.update(occurred_at=occurred.isoformat(), role=episode.role, session_id=session_id, context=context,
               **episode_dates(text=text, occurred_at=occurred))
    if context is None and session_id:
        refresh_ensure(subject=subject)  # the session's last turn may be stored but not yet searchable
    parts: Sequence[str] = [context] if context is not None else ()
    if context is None and (found := derived.context_for_turn(es=subject_es_client(subject=subject),
                                                              index=episodic_alias(subject=subject),
                                                              scope=memory_scope(subject=subject),
                                                              session_id=session_id, occurred_at=occurred,
                                                              turns=context_options.turns)):
        doc.update(context_ids=found.ids, derived_context=found.text)
        parts = found.texts
    # Cached: the session's previous turns were embedded when they were written, and a turn's
    # own text is also its recall's query (turns.turn_create embeds it first).
    doc.update(derived.episode_vectors([(text, parts)], options=context_options, cached=True)[0])
    stored = document_create(subject=subject, memory_type=MemoryType.EPISODIC, memory_id=memory_id, doc=doc,
                             refresh=not defer_refresh)
    if defer_refresh:  # once stored: a read refreshing before the write landed must not clear its mark
        refresh_defer(subject=subject, memory_type=MemoryType.EPISODIC, memory_id=memory_id,
                      seconds=limits.pending_seconds)
    return stored
