"""The audit step of a forget: a content-free tombstone in the tenant's audit chain (the note, the
caller's own words, beside it, outside the chain)."""

from __future__ import annotations

from typing import Any

from language.phrases import phrases_redacted
from memory_app.models import ForgetNote
from memory_app.services.forget.forgetting import Forgetting
from tenants.services.audit import audit_record

def forget_audit(forgetting: Forgetting, *, note: str | None, cascade: bool,
                 derived: dict[str, list[str]] | None) -> None:
    """``memory.forget`` for a memory forgotten by request; ``derived``: for an episode, the ids of
    what followed it, by fate (and ``cascade``, whether the caller let it cascade)."""
    details: dict[str, Any] = {"memory_type": forgetting.memory_type.value, "reason": forgetting.reason}
    if derived is not None:
        details.update(cascade=cascade, derived=derived)
    subject = forgetting.subject
    event = audit_record(actor=forgetting.actor, action="memory.forget", tenant=subject.tenant, subject=subject,
                         target_id=forgetting.memory_id, details=details)
    if note:
        # A note may quote the memory it is about: kept as the copies step would leave it.
        ForgetNote.objects.create(subject=subject, audit_event=event, memory_id=forgetting.memory_id,
                                  note=phrases_redacted(note, phrases=forgetting.phrases))


def derived_audit(forgetting: Forgetting, *, action: str, cause: list[str]) -> None:
    """``memory.forget`` (or ``memory.flagged``) for a derived memory, naming the episodes whose
    forget it followed."""
    subject = forgetting.subject
    audit_record(actor=forgetting.actor, action=action, tenant=subject.tenant, subject=subject,
                 target_id=forgetting.memory_id, details={"memory_type": forgetting.memory_type.value,
                                                          "reason": forgetting.reason, "cascade_of": cause})
