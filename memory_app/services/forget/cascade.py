"""The cascade step of a forget: the facts and playbooks derived from a forgotten episode follow
it, each forgotten by the same steps as the episode (delete, copies, audit, contexts) or kept
with its remaining support (``support``) and flagged."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory_app import selectors
from memory_app.services.forget import audit, contexts, copies, documents, support
from memory_app.services.context import ContextOptions
from memory_app.services.forget.forgetting import Forgetting
from tenants.models import Subject
from tenants.services.audit import Actor


@dataclass
class Cascade:
    """What went with a forgotten episode: the facts and playbooks derived from it that were
    forgotten, those kept with their remaining support and flagged for review, and, when the
    caller opted out of the cascade, those kept as they are."""

    forgotten: list[dict[str, str]] = field(default_factory=list)
    flagged: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[dict[str, str]]]:
        return {"forgotten": self.forgotten, "flagged": self.flagged, "kept": self.kept}

    def ids(self) -> dict[str, list[str]]:
        """The ids alone, by fate (what the audit log keeps)."""
        return {fate: [m["id"] for m in memories] for fate, memories in self.as_dict().items() if memories}


def derived_follow(*, subject: Subject, gone: set[str], reason: str, actor: Actor, cascade: bool = True,
                   context_options: ContextOptions, only: set[str] | None = None) -> Cascade:
    """The facts and playbooks derived from the episodes ``gone`` follow them (``derived_fate``):
    forgotten, or flagged with their remaining support; with ``cascade`` off, only the ids of
    ``gone`` leave their support. ``only``: the derived memories to consider (all by default).
    The one place the cascade is written: forget, and consolidation for a fact it derived from an
    episode forgotten meanwhile (``derived_support_check``) or before forgets cascaded.
    ``context_options``: the context settings, read at the caller's entry."""
    found = selectors.derived_memories(subject=subject, episode_ids=gone)
    if only is not None:
        found = {i: d for i, d in found.items() if i in only}
    present = selectors.episodes_present(subject=subject, ids=[i for d in found.values()
                                                               for i in d.source.get("supporting_episode_ids") or []
                                                               if i not in gone])
    out = Cascade()
    for d in found.values():
        fate = selectors.derived_fate(d, gone=gone, present=present)
        if fate is None:
            continue
        entry = {"id": d.id, "memory_type": d.memory_type.value}
        cause = sorted(gone.intersection(d.source.get("supporting_episode_ids") or []))
        forgetting = Forgetting.of(subject=subject, visible=d, reason=reason, actor=actor, context=context_options)
        action: str | None = None
        if cascade and fate == "forgotten":  # the same steps as the episode's own forget
            if documents.derived_delete(forgetting):
                documents.counter_drop(forgetting)
                copies.copies_purge(forgetting)
                contexts.contexts_redact(subject=subject, phrases=forgetting.own_phrases, options=context_options)
                action = "memory.forget"
            out.forgotten.append(entry)
        else:
            # Kept: without the forgotten episodes in its support; cascading, flagged for review
            # too (its support left is what is still present).
            support.support_trim(forgetting, keep=(lambda i: i not in gone and i in present) if cascade
                                 else (lambda i: i not in gone), flag=cascade)
            action = "memory.flagged" if cascade else None
            (out.flagged if cascade else out.kept).append(entry)
        if action is not None:  # the tombstone or the flag, last, as for the episode's own forget
            audit.derived_audit(forgetting, action=action, cause=cause)
    return out


def derived_support_check(*, subject: Subject, memory_id: str, context_options: ContextOptions,
                          actor: Actor = "consolidation") -> Cascade:
    """After a fact or playbook naming supporting episodes is written: the episodes among them
    forgotten meanwhile (a forget that ran while it was being derived) take it with them, as
    that forget would have."""
    visible = selectors.visible_documents(subject=subject, ids=[memory_id], types=selectors.DERIVED_TYPES)
    support = set(visible[memory_id].source.get("supporting_episode_ids") or []) if memory_id in visible else set()
    gone = support - selectors.episodes_present(subject=subject, ids=support)
    if not gone:
        return Cascade()
    return derived_follow(subject=subject, gone=gone, reason="support_forgotten", actor=actor, only={memory_id},
                          context_options=context_options)
