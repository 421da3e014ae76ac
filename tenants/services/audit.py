"""The audit log: content-free, hash-chained events, one chain per tenant."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from tenants import audit_chain
from tenants.models import AgentToken, AuditEvent, Subject, Tenant

Actor = AbstractBaseUser | AgentToken | str

# Memory document fields: audit details must never carry them.
_CONTENT_FIELDS = frozenset({"text", "content", "title", "trigger", "steps", "refined_steps", "embedding", "passages"})


def audit_record(*, actor: Actor, action: str, tenant: Tenant | None = None, subject: Subject | None = None,
                 target_id: str = "", details: dict | None = None) -> AuditEvent:
    """Append one audit event. ``details`` is content-free metadata (ids, counts, reasons).

    Raises ValueError when ``details`` names a memory content field: the audit log outlives
    forgets and erasures, so it must never hold what was forgotten.
    """
    details = details or {}
    leaked = _CONTENT_FIELDS & set(details)
    if leaked:
        raise ValueError(f"audit details must not carry memory content: {sorted(leaked)}")
    if subject is not None and tenant is None:
        tenant = subject.tenant
    actor_type, actor_label = _actor(actor)
    event = AuditEvent(actor_type=actor_type, actor=actor_label, action=action,
                       tenant=tenant, tenant_slug=tenant.slug if tenant else "",
                       subject=subject, subject_ref=str(subject.user_id) if subject else "",
                       target_id=str(target_id), details=details, chain=tenant.slug if tenant else "")
    # Chain it to the tenant's previous event. Two writers racing for the same seq: the unique
    # (chain, seq) constraint refuses the second, which re-reads the head and tries again.
    for _attempt in range(20):
        try:
            with transaction.atomic():
                head = AuditEvent.objects.filter(chain=event.chain).order_by("-seq").values("seq", "hash").first()
                event.seq = (head["seq"] if head else 0) + 1
                event.prev_hash = head["hash"] if head else audit_chain.GENESIS
                event.created_at = timezone.now()
                event.hash = audit_chain.link_hash(prev_hash=event.prev_hash, fields=event.chain_fields())
                event.save(force_insert=True)
            return event
        except IntegrityError:
            event.pk = None
            event._state.adding = True
    raise RuntimeError("could not append to the audit chain: too much contention")


def _actor(actor: Actor) -> tuple[str, str]:
    if isinstance(actor, AgentToken):
        return AuditEvent.ActorType.AGENT_TOKEN, f"{actor.prefix} ({actor.name})"[:200]
    if isinstance(actor, AbstractBaseUser):
        return AuditEvent.ActorType.USER, actor.get_username()[:200]
    return AuditEvent.ActorType.SYSTEM, str(actor)[:200]
