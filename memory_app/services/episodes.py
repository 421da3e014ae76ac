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
from memory_app.validation import (
    Limits,
    clean_datetime,
    clean_metadata,
    clean_optional_text,
    clean_role,
    clean_session_id,
    clean_text,
)
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client


def episode_write(*, subject: Subject, text: str, occurred_at: datetime | str | None = None, role: str = "user",
                  session_id: str | None = None, context: str | None = None, metadata: dict | None = None,
                  memory_id: str | None = None, source: str = "agent",
                  accepted_at: datetime | str | None = None, defer_refresh: bool = False,
                  context_options: derived.ContextOptions | None = None, limits: Limits | None = None
                  ) -> dict[str, Any]:
    """Store one episodic event (e.g. the verbatim user turn). Visible to recall on return; with
    ``defer_refresh``, visible to the subject's next recall (memory_app.freshness) without
    waiting for a refresh here.

    ``accepted_at`` is when Engram accepted the write (a write replayed from the outbox keeps the
    time it was accepted, not the time it is applied); it defaults ``created_at`` and ``occurred_at``.

    ``context`` (optional) is the conversation just before the turn; recall matches on it with a
    low weight, which finds short replies ("yes, last Tuesday") by what they answer. Without it,
    an episode with a ``session_id`` gets its context derived from the session's preceding
    episodes (``services.context``; ``context_options``: the settings, read here when not given).
    ``limits``: the limits it was checked within at the edge (read here when not given).
    """
    options = context_options or derived.ContextOptions.from_settings()
    limits = limits or Limits.from_settings()
    text = clean_text(text, limit=limits.text_chars)
    context = clean_optional_text(context, field="context", limit=limits.text_chars)
    session_id = clean_session_id(session_id)
    metadata = clean_metadata(metadata, limit=limits.metadata_bytes)
    memory_id = memory_id_or_new(memory_id)
    now = accepted_time(accepted_at)
    occurred = clean_datetime(occurred_at, field="occurred_at") or now
    role = clean_role(role)
    doc = base_document(subject=subject, memory_type=MemoryType.EPISODIC, text=text, now=now, metadata=metadata,
                        source=source)
    doc.update(occurred_at=occurred.isoformat(), role=role, session_id=session_id, context=context,
               **episode_dates(text=text, occurred_at=occurred))
    if context is None and session_id:
        refresh_ensure(subject=subject)  # the session's last turn may be stored but not yet searchable
    parts: Sequence[str] = [context] if context is not None else ()
    if context is None and (found := derived.context_for_turn(es=subject_es_client(subject=subject),
                                                              index=episodic_alias(subject=subject),
                                                              scope=memory_scope(subject=subject),
                                                              session_id=session_id, occurred_at=occurred,
                                                              turns=options.turns)):
        doc.update(context_ids=found.ids, derived_context=found.text)
        parts = found.texts
    # Cached: the session's previous turns were embedded when they were written, and a turn's
    # own text is also its recall's query (turns.turn_create embeds it first).
    doc.update(derived.episode_vectors([(text, parts)], options=options, cached=True)[0])
    stored = document_create(subject=subject, memory_type=MemoryType.EPISODIC, memory_id=memory_id, doc=doc,
                             refresh=not defer_refresh)
    if defer_refresh:  # once stored: a read refreshing before the write landed must not clear its mark
        refresh_defer(subject=subject, memory_type=MemoryType.EPISODIC, memory_id=memory_id,
                      seconds=limits.pending_seconds)
    return stored
