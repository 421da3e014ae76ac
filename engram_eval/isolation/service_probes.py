"""Isolation probes through Engram's own memory services: each end-user tries to reach every other
end-user's documents by every service entry point. Being served anything foreign is a leak, and a
refusal must be the same NotFound a missing id gets."""

from __future__ import annotations

import json

from django.utils import timezone

from engram_core.errors import NotFound
from engram_core.es.schema import USER_TYPES
from memory_app.selectors import memory_get, memory_history, subject_export
from memory_app.recall import memory_recall

from .report import ProbeRecorder, ProbeScope
from .world import SeededDoc, World
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write, playbook_outcome_record
from memory_app.services.forget import memory_forget


def _not_found(scope: ProbeScope, call) -> None:
    try:
        result = call()
    except NotFound:
        return
    scope.leak(f"served instead of NotFound: {str(result)[:120]}")


def service_probes(world: World, recorder: ProbeRecorder) -> None:
    for who in world.subjects:
        allowed = {d.id for d in world.visible(who)}
        for other in world.subjects:
            if other is who:
                continue
            # Recall with the other subject's own marker word, including superseded documents.
            with recorder.probe("service.recall(other's marker)", who) as scope:
                hits = memory_recall(subject=who.subject, query=f"{other.marker} memory", k=100,
                                     include_superseded=True)
                scope.ids([h["id"] for h in hits], allowed=allowed)
            foreign: list[SeededDoc] = [d for d in world.docs_of(other) if d.memory_type in USER_TYPES]
            for doc in foreign:
                with recorder.probe("service.memory_get(other's id)", who) as scope:
                    _not_found(scope, lambda d=doc: memory_get(subject=who.subject, memory_id=d.id))
                with recorder.probe("service.memory_history(other's id)", who) as scope:
                    _not_found(scope, lambda d=doc: memory_history(subject=who.subject, memory_id=d.id))
                with recorder.probe("service.memory_forget(other's id)", who) as scope:
                    _not_found(scope, lambda d=doc: memory_forget(
                        subject=who.subject, memory_id=d.id, reason="other", actor="isolation-probe"))
                if doc.memory_type.value == "semantic":
                    with recorder.probe("service.fact_write(supersedes other's id)", who) as scope:
                        _not_found(scope, lambda d=doc: fact_write(
                            subject=who.subject, text="probe", supersedes=[d.id]))
                if doc.memory_type.value == "procedural":
                    with recorder.probe("service.playbook_outcome(other's id)", who) as scope:
                        _not_found(scope, lambda d=doc: playbook_outcome_record(
                            subject=who.subject, playbook_id=d.id, success=True))
        with recorder.probe("service.subject_export", who) as scope:
            exported = subject_export(subject=who.subject)
            scope.ids([m["id"] for items in exported["memories"].values() for m in items], allowed=allowed)


def _recall_bytes(who, now) -> tuple[bytes, list[str]]:
    hits = memory_recall(subject=who.subject, query=f"{who.marker} memory probe", k=20, explain=True, now=now)
    return json.dumps(hits, sort_keys=True, default=str).encode(), [h["id"] for h in hits]


def recall_drift_probes(world: World, recorder: ProbeRecorder) -> None:
    """Another tenant writes memories holding a subject's own words through Engram; the subject's
    recall response (every field, explain included) must stay byte-identical. In shared indices
    BM25 ranks can still move through idf (the documented residual); any other change is a leak."""
    now = timezone.now()
    seen: set[str] = set()
    for who in world.subjects:
        if who.tenant_id in seen:
            continue
        seen.add(who.tenant_id)
        others = [s for s in world.subjects if s.tenant_id != who.tenant_id]
        writer_side = next((s for s in others if not s.dedicated), others[0])
        with recorder.probe("service.recall_drift(other tenant writes)", who) as scope:
            before, order_before = _recall_bytes(who, now)
            planted = [episode_write(subject=writer_side.subject,
                                              text=f"{who.marker} memory probe planted {n} {who.marker}")["id"]
                       for n in range(8)]
            try:
                after, order_after = _recall_bytes(who, now)
            finally:
                for memory_id in planted:
                    memory_forget(subject=writer_side.subject, memory_id=memory_id, reason="other",
                                           actor="isolation-probe")
            if before != after:
                detail = f"recall response changed ({len(before)} -> {len(after)} bytes)"
                if order_before != order_after and not who.dedicated:
                    scope.figure(detail + ": rank order moved", residual=True)
                else:
                    scope.leak(detail)
