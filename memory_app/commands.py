"""Writes as typed commands: what a caller asks for is checked once, here, at the edge (the API,
MCP, the inspector, a command), into a frozen value that everything below trusts (the turn
service, the outbox, dispatch, replay), the write's end-user among it. ``write_command`` checks
any subject write; ``turn_command`` a user turn (its episode and the recall on its text)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from engram_core.es.outage import is_outage
from engram_core.es.schema import MemoryType
from memory_app.models import OutboxEntry
from memory_app.services.context import ContextOptions
from memory_app.services.store import new_memory_id
from memory_app.validation import (
    Limits,
    OutcomeFields,
    WriteFields,
    clean_k,
    clean_memory_id,
    clean_timezone,
    clean_types,
    write_validate,
)
from tenants.models import Subject, Tenant
from tenants.selectors import subject_find, subject_unknown
from tenants.services.audit import Actor
from tenants.services.keys import KeyLifetimes
from tenants.services.subjects import subject_get_or_create

Op = OutboxEntry.Operation
# The operations that create a memory, and the type of memory each creates.
CREATES = {Op.EPISODE: MemoryType.EPISODIC, Op.FACT: MemoryType.SEMANTIC, Op.PLAYBOOK: MemoryType.PROCEDURAL}
# The operations that need the end-user to exist already; every other one creates them on first use.
ON_EXISTING = (Op.OUTCOME, Op.FORGET, Op.ERASE)


@dataclass(frozen=True)
class Write:
    """One subject write, checked (``write_command``): ``external_id`` names its end-user (one a
    new end-user may take when the write may create them), ``payload`` passed ``write_validate``,
    and ``memory_id`` is the memory it creates or targets (fixed for a create). ``subject``: the
    end-user, read or created when the write was accepted; None only when it cannot be yet (a
    new end-user during an outage, or one that writes queued ahead of this one create): the write
    is then queued, and its replay reads or creates them. ``limits``: the limits it was checked
    within, and ``context_options``: how an episode's context and vectors are made, both read at
    the edge and used by the services applying it now. ``fields``: the write's fields as cleaned
    (``validation.write_fields``; None for an erase), which its service applies as they are."""

    operation: Op
    external_id: str
    payload: Mapping[str, Any]
    limits: Limits
    context_options: ContextOptions
    memory_id: str = ""
    subject: Subject | None = None
    fields: WriteFields | None = None


def write_command(*, tenant: Tenant, external_id: str, operation: Op | str, payload: Mapping[str, Any],
                  limits: Limits, context_options: ContextOptions, lifetimes: KeyLifetimes,
                  actor: Actor = "api", memory_id: str = "") -> Write:
    """Check a write of ``operation`` for the end-user ``external_id`` of ``tenant`` (an id the
    edge cleaned: ``clean_external_id``) within ``limits``, and read its end-user: created now
    (by ``actor``, its key within ``lifetimes``) when the write may create them. The options are
    read by the caller at its entry. ValidationFailed names the first problem; nothing is
    accepted then. An id no memory can have, or an end-user who does not exist for a write that
    needs one, is NotFound now, not at replay."""
    op = Op(operation)
    payload = dict(payload)
    fields = write_validate(operation=op, payload=payload, limits=limits)
    if memory_id:
        clean_memory_id(memory_id)
    elif op in CREATES:
        memory_id = new_memory_id()
    if isinstance(fields, OutcomeFields) and not fields.operation_id:
        # Fixed at acceptance, as a create's id: a replayed outcome counts once.
        fields = replace(fields, operation_id=new_memory_id())
        payload["operation_id"] = fields.operation_id
    # Last: the checks above need no query.
    subject = _subject(tenant=tenant, external_id=external_id, op=op, actor=actor, lifetimes=lifetimes)
    return Write(operation=op, external_id=external_id, payload=payload, limits=limits,
                 context_options=context_options, memory_id=memory_id, subject=subject, fields=fields)


def _subject(*, tenant: Tenant, external_id: str, op: Op, actor: Actor,
             lifetimes: KeyLifetimes) -> Subject | None:
    """The write's end-user, read or created here so that nothing below the edge does. None: not
    yet (an outage, or an end-user only writes queued ahead create): the write is queued then."""
    if op in ON_EXISTING:
        subject = subject_find(tenant=tenant, external_id=external_id)
        if subject is None and not OutboxEntry.objects.pending_for(tenant=tenant, external_id=external_id):
            raise subject_unknown(external_id)  # and no queued write creates them
        return subject
    try:
        # A new one's id must be addressable (ValidationFailed otherwise, outage or not).
        return subject_get_or_create(tenant=tenant, external_id=external_id, actor=actor, lifetimes=lifetimes)
    except Exception as exc:
        if not is_outage(exc):
            raise
        return None  # minting a new end-user's key needs Elasticsearch: the write is accepted, queued


@dataclass(frozen=True)
class Turn:
    """A user turn, checked (``turn_command``): its episode (``write``) and the recall on its
    text (``query``, the text cut to the longest query recall reads, and the recall's options)."""

    write: Write
    query: str
    k: int
    types: list[str] | None
    include_superseded: bool
    explain: bool
    timezone: str | None

    @property
    def recall(self) -> dict[str, Any]:
        """The recall's arguments, the turn itself left out (it is the turn's own memory)."""
        return dict(query=self.query, k=self.k, types=self.types, include_superseded=self.include_superseded,
                    explain=self.explain, timezone=self.timezone, exclude=self.write.memory_id)


def turn_command(*, tenant: Tenant, external_id: str, text: str, max_query_chars: int, limits: Limits,
                 context_options: ContextOptions, lifetimes: KeyLifetimes, actor: Actor = "api",
                 memory_id: str = "",
                 occurred_at: datetime | str | None = None, session_id: str | None = None,
                 context: str | None = None, metadata: dict | None = None, k: int = 5,
                 types: list[str] | None = None, include_superseded: bool = False, explain: bool = False,
                 timezone: str | None = None) -> Turn:
    """Check a user turn for the end-user ``external_id`` (cleaned at the edge) before anything is
    written or recalled: the recall's options, then the episode (``write_command``). The turn's id
    is fixed now: the recall leaves the turn out before it sets copies aside (when the user
    repeats a line, the line said before is what the recall should give back)."""
    clean_k(k, limit=limits.recall_k)
    clean_types(types)
    clean_timezone(timezone)
    payload = {"text": text, "occurred_at": occurred_at, "role": "user", "session_id": session_id,
               "context": context, "metadata": metadata}
    write = write_command(tenant=tenant, external_id=external_id, operation=Op.EPISODE, payload=payload,
                          limits=limits, context_options=context_options, lifetimes=lifetimes, actor=actor,
                          memory_id=memory_id)
    return Turn(write=write, query=text.strip()[:max_query_chars], k=k, types=types,
                include_superseded=include_superseded, explain=explain, timezone=timezone)
