"""Run one write through its service: the step a submit takes now and a replay takes later."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_app.commands import Op
from memory_app.services import episodes, facts, forget, imports
from memory_app.services.context import ContextOptions
from memory_app.validation import (
    EpisodeFields,
    FactFields,
    ForgetFields,
    ImportFields,
    Limits,
    OutcomeFields,
    PlaybookFields,
    WriteFields,
)
from tenants.models import AgentToken, Subject


@dataclass(frozen=True)
class Applied:
    """A write applied: its JSON-able summary (``result``: what the outbox keeps of a replayed
    write)."""

    result: dict[str, Any]


def write_apply(*, subject: Subject, operation: Op, payload: dict[str, Any], memory_id: str,
                actor: AgentToken | str, limits: Limits, context_options: ContextOptions,
                progress: Callable[[int, int], None] | None = None, defer_refresh: bool = False,
                fields: WriteFields | None = None) -> Applied:
    """Run one write through its service for ``subject`` (read or created when the write was
    accepted, or by the replay), within ``limits`` and with ``context_options`` (read at the entry:
    the edge's ``commands.Write``, a replay's options). ``fields``: the write's cleaned fields
    (``commands.Write.fields``; a replay cleans its stored payload into them): its service
    applies them as they are."""
    p = payload
    if operation is Op.EPISODE:
        memory = episodes.episode_store(subject=subject, episode=_typed(fields, EpisodeFields), memory_id=memory_id,
                                        accepted_at=p.get("accepted_at"), defer_refresh=defer_refresh, limits=limits,
                                        context_options=context_options)
        return Applied(result={"memory": memory})
    if operation is Op.FACT:
        memory = facts.fact_store(subject=subject, fact=_typed(fields, FactFields), memory_id=memory_id,
                                  accepted_at=p.get("accepted_at"), defer_refresh=defer_refresh, limits=limits)
        return Applied(result={"memory": memory})
    if operation is Op.PLAYBOOK:
        memory = facts.playbook_store(subject=subject, playbook=_typed(fields, PlaybookFields), memory_id=memory_id,
                                      accepted_at=p.get("accepted_at"), defer_refresh=defer_refresh, limits=limits)
        return Applied(result={"memory": memory})
    if operation is Op.OUTCOME:
        memory = facts.playbook_outcome_store(subject=subject, playbook_id=memory_id,
                                              outcome=_typed(fields, OutcomeFields), actor=actor,
                                              defer_refresh=defer_refresh, limits=limits)
        return Applied(result={"memory": memory})
    if operation is Op.FORGET:
        forgotten = forget.forget_apply(subject=subject, memory_id=memory_id, request=_typed(fields, ForgetFields),
                                        actor=actor, context_options=context_options)
        return Applied(result={"cascade": forgotten["cascade"]})
    if operation is Op.IMPORT:
        ids = imports.episodes_store(subject=subject, imported=_typed(fields, ImportFields), limits=limits,
                                     progress=progress, accepted_at=p.get("accepted_at"),
                                     context_options=context_options)
        return Applied(result={"ids": ids})
    if operation is Op.ERASE:
        deleted = forget.subject_erase(subject=subject, actor=actor)
        return Applied(result={"documents_deleted": deleted})
    raise ValueError(f"unknown outbox operation {operation!r}")


Typed = TypeVar("Typed", EpisodeFields, FactFields, PlaybookFields, OutcomeFields, ForgetFields, ImportFields)


def _typed(fields: WriteFields | None, kind: type[Typed]) -> Typed:
    if not isinstance(fields, kind):
        raise ValueError(f"a write is applied with its cleaned fields ({kind.__name__})")
    return fields
