"""Every write consolidation makes, in one place: facts, merges, supersessions, playbooks,
outcomes, the repair of facts whose episodes went without them, and the episode watermark. Each goes through memory_app.services (the
same validation and visibility rules as an agent's write); re-point these calls here if the
write path changes.

Every function is idempotent: applying the same action twice leaves the same state.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from elasticsearch import helpers

from engram_core.errors import Conflict
from memory_app import selectors
from memory_app.consolidation.resolve import FactAction, PlaybookAction
from memory_app.consolidation.selectors import PendingEpisode
from engram_core.es.schema import MemoryType
from memory_app.services.context import ContextOptions
from memory_app.services.facts import fact_support_add, fact_write, playbook_outcome_record, playbook_write
from memory_app.validation import Limits
from memory_app.services.store import subject_writes
from memory_app.services.forget import derived_follow, derived_support_check
from memory_app.services.supersession import supersession_complete
from tenants.models import Subject

SOURCE = "consolidation"


def _metadata(action: FactAction, run_id: int | None, extractor: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"slot": action.slot, "value": action.candidate.value, "run": run_id, "extractor": extractor}
    if action.change:
        meta["change"] = action.change
    return {"consolidation": meta}


def fact_apply(*, subject: Subject, action: FactAction, run_id: int | None, extractor: str, limits: Limits,
               context: ContextOptions) -> str:
    """Apply one fact action (its writes checked within ``limits``; ``context``: how a cascade it
    meets embeds changed contexts); returns what happened:
    created | superseded | merged | unchanged."""
    candidate = action.candidate
    if action.kind == "merge":
        _, changed = fact_support_add(subject=subject, memory_id=action.memory_id,
                                      episode_ids=list(candidate.episode_ids), limits=limits)
        derived_support_check(subject=subject, memory_id=action.memory_id, actor=SOURCE, context_options=context)
        return "merged" if changed else "unchanged"
    if action.kind == "exists":
        supersession_complete(subject=subject, memory_id=action.memory_id, memory_type=MemoryType.SEMANTIC)
        return "unchanged"
    try:
        fact_write(subject=subject, text=candidate.text, confidence=candidate.confidence,
                   supersedes=action.supersedes or None, contradiction=action.contradiction,
                   supporting_episode_ids=list(candidate.episode_ids),
                   metadata=_metadata(action, run_id, extractor), memory_id=action.memory_id,
                   source=SOURCE, valid_from=action.valid_from, limits=limits)
    except Conflict as exc:
        if exc.details.get("id") != action.memory_id:
            raise
        # Written by an earlier attempt that died before finishing: complete it, write nothing new.
        supersession_complete(subject=subject, memory_id=action.memory_id, memory_type=MemoryType.SEMANTIC)
        return "unchanged"
    derived_support_check(subject=subject, memory_id=action.memory_id, actor=SOURCE, context_options=context)
    return "superseded" if action.supersedes else "created"


def playbook_apply(*, subject: Subject, action: PlaybookAction, run_id: int | None, extractor: str,
                   limits: Limits, context: ContextOptions) -> str:
    """Apply one playbook action (as ``fact_apply``); returns created | outcome | unchanged."""
    candidate = action.candidate
    created = False
    if action.kind == "create":
        try:
            playbook_write(subject=subject, trigger=candidate.trigger, steps=candidate.steps,
                           confidence=0.8, memory_id=action.playbook_id, source=SOURCE,
                           # The outcome's own episode joins when the outcome is counted (once).
                           supporting_episode_ids=[i for i in candidate.episode_ids
                                                   if i != candidate.outcome_episode_id],
                           metadata={"consolidation": {"run": run_id, "extractor": extractor}}, limits=limits)
            created = True
        except Conflict as exc:
            if exc.details.get("id") != action.playbook_id:
                raise
    if candidate.outcome is None or candidate.outcome_episode_id is None:
        return "created" if created else "unchanged"
    before = selectors.visible_document(subject=subject, memory_id=action.playbook_id,
                                       types=[MemoryType.PROCEDURAL]).source
    counted = candidate.outcome_episode_id in (before.get("supporting_episode_ids") or [])
    playbook_outcome_record(subject=subject, playbook_id=action.playbook_id, success=candidate.outcome,
                            episode_id=candidate.outcome_episode_id, refined_steps=candidate.refined_steps,
                            actor=SOURCE, limits=limits)
    derived_support_check(subject=subject, memory_id=action.playbook_id, actor=SOURCE, context_options=context)
    if created:
        return "created"
    return "unchanged" if counted else "outcome"


def derived_repair(*, subject: Subject, facts: list[tuple[str, dict[str, Any]]], present: set[str],
                   context: ContextOptions) -> int:
    """Facts consolidation wrote whose supporting episodes were forgotten without them (before
    forgets took derived memory along) follow those episodes now, as a forget would have taken
    them. Returns how many were forgotten or flagged."""
    ours = {i for i, src in facts if src.get("source") == SOURCE}
    gone = {e for i, src in facts if i in ours for e in src.get("supporting_episode_ids") or []} - present
    if not gone:
        return 0
    followed = derived_follow(subject=subject, gone=gone, reason="support_forgotten", actor=SOURCE, only=ours,
                              context_options=context)
    return len(followed.forgotten) + len(followed.flagged)


def episodes_mark_consolidated(*, subject: Subject, episodes: list[PendingEpisode]) -> int:
    """Advance the watermark: stamp ``consolidated_at`` on the episodes read (they were read
    through the end-user's key; the sequence numbers prove they did not change since). An
    episode forgotten or changed meanwhile is left alone. Returns how many were stamped."""
    if not episodes:
        return 0
    now = timezone.now().isoformat()
    stamped = 0
    with subject_writes(subject=subject) as target:
        index = target.index(MemoryType.EPISODIC)
        actions = ({"_op_type": "update", "_index": index, "_id": p.episode.id, "if_seq_no": p.seq_no,
                    "if_primary_term": p.primary_term, "doc": {"consolidated_at": now}} for p in episodes)
        for ok, item in helpers.streaming_bulk(target.writer, actions, raise_on_error=False,
                                               raise_on_exception=True, refresh=True):
            status = item["update"].get("status")
            if ok:
                stamped += 1
            elif status not in (404, 409):
                raise RuntimeError(f"could not advance the consolidation watermark: {item['update'].get('error')}")
    return stamped
