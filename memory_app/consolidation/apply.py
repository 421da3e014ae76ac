"""Every write consolidation makes, in one place: facts, merges, supersessions, playbooks,
outcomes, review flags and the episode watermark. Each goes through memory_app.services (the
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
from engram_core.es.schema import MemoryType, alias_name
from memory_app.services.facts import fact_support_add, fact_write, playbook_outcome_record, playbook_write
from memory_app.services.store import write_target
from memory_app.services.supersession import supersession_complete
from tenants.models import Subject

SOURCE = "consolidation"


def _metadata(action: FactAction, run_id: int | None, extractor: str) -> dict[str, Any]:
    return {"consolidation": {"slot": action.slot, "value": action.candidate.value, "run": run_id,
                              "extractor": extractor}}


def fact_apply(*, subject: Subject, action: FactAction, run_id: int | None, extractor: str) -> str:
    """Apply one fact action; returns what happened: created | superseded | merged | unchanged."""
    candidate = action.candidate
    if action.kind == "merge":
        _, changed = fact_support_add(subject=subject, memory_id=action.memory_id,
                                      episode_ids=list(candidate.episode_ids))
        return "merged" if changed else "unchanged"
    if action.kind == "exists":
        supersession_complete(subject=subject, memory_id=action.memory_id, memory_type=MemoryType.SEMANTIC)
        return "unchanged"
    try:
        fact_write(subject=subject, text=candidate.text, confidence=candidate.confidence,
                   supersedes=action.supersedes or None, contradiction=action.contradiction,
                   supporting_episode_ids=list(candidate.episode_ids),
                   metadata=_metadata(action, run_id, extractor), memory_id=action.memory_id,
                   source=SOURCE)
    except Conflict as exc:
        if exc.details.get("id") != action.memory_id:
            raise
        # Written by an earlier attempt that died before finishing: complete it, write nothing new.
        supersession_complete(subject=subject, memory_id=action.memory_id, memory_type=MemoryType.SEMANTIC)
        return "unchanged"
    return "superseded" if action.supersedes else "created"


def playbook_apply(*, subject: Subject, action: PlaybookAction, run_id: int | None, extractor: str) -> str:
    """Apply one playbook action; returns created | outcome | unchanged."""
    candidate = action.candidate
    created = False
    if action.kind == "create":
        try:
            playbook_write(subject=subject, trigger=candidate.trigger, steps=candidate.steps,
                           confidence=0.8, memory_id=action.playbook_id, source=SOURCE,
                           metadata={"consolidation": {"run": run_id, "extractor": extractor}})
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
                            episode_id=candidate.outcome_episode_id, refined_steps=candidate.refined_steps)
    if created:
        return "created"
    return "unchanged" if counted else "outcome"


def fact_flag_review(*, subject: Subject, memory_id: str, metadata: dict[str, Any]) -> bool:
    """Flag a fact whose every supporting episode was forgotten (kept, marked for a human)."""
    consolidation = {**(metadata.get("consolidation") or {}), "review": "supporting_episodes_forgotten",
                     "flagged_at": timezone.now().isoformat()}
    _, changed = fact_support_add(subject=subject, memory_id=memory_id, episode_ids=[],
                                  metadata={"consolidation": consolidation})
    return changed


def episodes_mark_consolidated(*, subject: Subject, episodes: list[PendingEpisode]) -> int:
    """Advance the watermark: stamp ``consolidated_at`` on the episodes read (they were read
    through the end-user's key; the sequence numbers prove they did not change since). An
    episode forgotten or changed meanwhile is left alone. Returns how many were stamped."""
    if not episodes:
        return 0
    now = timezone.now().isoformat()
    writer, prefix = write_target(tenant=subject.tenant)
    index = alias_name(MemoryType.EPISODIC, prefix=prefix)
    actions = ({"_op_type": "update", "_index": index, "_id": p.episode.id, "if_seq_no": p.seq_no,
                "if_primary_term": p.primary_term, "doc": {"consolidated_at": now}} for p in episodes)
    stamped = 0
    for ok, item in helpers.streaming_bulk(writer, actions, raise_on_error=False,
                                           raise_on_exception=True, refresh=True):
        status = item["update"].get("status")
        if ok:
            stamped += 1
        elif status not in (404, 409):
            raise RuntimeError(f"could not advance the consolidation watermark: {item['update'].get('error')}")
    return stamped
