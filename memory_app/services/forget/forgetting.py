"""The value a forget passes from step to step: the memory as read once, through the subject's key."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from engram_core.es.schema import MemoryType
from memory_app.selectors import Visible
from memory_app.services.context import ContextOptions, phrases_of
from tenants.models import Subject
from tenants.services.audit import Actor

# The fields of a memory that are its own text (``context`` is the client's words around it).
TEXT_FIELDS = ("text", "title", "trigger", "steps", "refined_steps")


def texts_of(source: dict[str, Any], *, fields: tuple[str, ...] = (*TEXT_FIELDS, "context")) -> set[str]:
    return {v for k in fields if isinstance(v := source.get(k), str) and v}


@dataclass(frozen=True)
class Forgetting:
    """A derived or forgotten memory as a forget's steps see it: whose, which document (read once,
    through the subject's key), why and by whom, and the context settings the forget read at its
    entry (``context``: what a changed context is embedded with). ``phrases``: what of every text it holds its
    copies may quote (``phrases_of``); ``own_phrases``: the same of its own words alone, without
    the client's context (what other episodes' contexts may quote). Both computed on first use."""

    subject: Subject
    visible: Visible
    reason: str
    actor: Actor
    context: ContextOptions

    @classmethod
    def of(cls, *, subject: Subject, visible: Visible, reason: str, actor: Actor,
           context: ContextOptions) -> Forgetting:
        return cls(subject=subject, visible=visible, reason=reason, actor=actor, context=context)

    @property
    def memory_id(self) -> str:
        return self.visible.id

    @property
    def memory_type(self) -> MemoryType:
        return self.visible.memory_type

    @cached_property
    def phrases(self) -> tuple[str, ...]:
        return tuple(phrases_of(texts_of(self.visible.source), passages_max=self.context.passages_max))

    @cached_property
    def own_phrases(self) -> tuple[str, ...]:
        return tuple(phrases_of(texts_of(self.visible.source, fields=TEXT_FIELDS),
                                passages_max=self.context.passages_max))
