"""The value a forget passes from step to step: the memory as read once, through the subject's key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engram_core.es.schema import MemoryType
from memory_app.selectors import Visible
from memory_app.services.context import phrases_of
from tenants.models import Subject
from tenants.services.audit import Actor

# The fields of a memory that are its own text (``context`` is the client's words around it).
TEXT_FIELDS = ("text", "title", "trigger", "steps", "refined_steps")


def texts_of(source: dict[str, Any], *, fields: tuple[str, ...] = (*TEXT_FIELDS, "context")) -> set[str]:
    return {v for k in fields if isinstance(v := source.get(k), str) and v}


@dataclass(frozen=True)
class Forgetting:
    """One memory being forgotten: whose, which document, why and by whom, read once. ``phrases``:
    what of every text it holds its copies may quote (``phrases_of``); ``own_phrases``: the same of
    its own words alone, without the client's context (what other episodes' contexts may quote)."""

    subject: Subject
    visible: Visible
    reason: str
    actor: Actor
    phrases: tuple[str, ...]
    own_phrases: tuple[str, ...]

    @classmethod
    def of(cls, *, subject: Subject, visible: Visible, reason: str, actor: Actor) -> Forgetting:
        return cls(subject=subject, visible=visible, reason=reason, actor=actor,
                   phrases=tuple(phrases_of(texts_of(visible.source))),
                   own_phrases=tuple(phrases_of(texts_of(visible.source, fields=TEXT_FIELDS))))

    @property
    def memory_id(self) -> str:
        return self.visible.id

    @property
    def memory_type(self) -> MemoryType:
        return self.visible.memory_type
