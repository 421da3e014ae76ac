"""The audit log: content-free events, each keyed-hash-chained to the previous one of its tenant."""

from __future__ import annotations

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from tenants import audit_chain
from tenants.crypto import audit_keyring
from tenants.models import AgentToken, AuditEvent, Subject, Tenant

Actor = AbstractBaseUser | AgentToken | str

# Memory document fields: audit details must never carry them.
_CONTENT_FIELDS = frozenset({"text", "content", "title", "trigger", "steps", "refined_steps", "embedding", "passages"})
REANCHOR_ACTOR = "audit-keys"


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
    keyring = audit_keyring()
    actor_type, actor_label = _actor(actor)
    chain = tenant.slug if tenant else ""
    # Two writers racing for the same seq: the unique (chain, seq) constraint refuses the second,
    # which re-reads the head and tries again.
    for _attempt in range(20):
        event = AuditEvent(actor_type=actor_type, actor=actor_label, action=action,
                           tenant=tenant, tenant_slug=tenant.slug if tenant else "",
                           subject=subject, subject_ref=str(subject.user_id) if subject else "",
                           target_id=str(target_id), details=details, chain=chain)
        try:
            with transaction.atomic():
                head = AuditEvent.objects.filter(chain=chain).order_by("-seq").values("seq", "hash", "key_id").first()
                if head and not head["key_id"]:
                    head = _append(_reanchor(head=head, tenant=tenant, chain=chain), head, keyring)
                _append(event, head, keyring)
            break
        except IntegrityError:
            continue
    else:
        raise RuntimeError("could not append to the audit chain: too much contention")
    if (every := settings.ENGRAM_AUDIT_CHECKPOINT_EVENTS) and event.seq % every == 0:
        # robust: a broker that is down must not fail the action that was just recorded
        transaction.on_commit(lambda: current_app.send_task("tenants.tasks.audit_checkpoint",
                                                            kwargs={"chains": [chain]}), robust=True)
    return event


def _append(event: AuditEvent, head: dict | None, keyring: audit_chain.Keyring) -> dict:
    """Link ``event`` to ``head``, sign it under the primary key and insert it; the new head."""
    event.seq = (head["seq"] if head else 0) + 1
    event.prev_hash = head["hash"] if head else audit_chain.GENESIS
    event.created_at = timezone.now()
    event.key_id = keyring.primary
    event.hash = audit_chain.link_hash(prev_hash=event.prev_hash, fields=event.chain_fields(), keyring=keyring)
    event.save(force_insert=True)
    return {"seq": event.seq, "hash": event.hash, "key_id": event.key_id}


def _reanchor(*, head: dict, tenant: Tenant | None, chain: str) -> AuditEvent:
    """The first keyed event of a chain begun before the keys: it names the unkeyed head it
    follows, and its key signs that head, so the unkeyed events before it cannot be rewritten
    unseen from here on."""
    return AuditEvent(actor_type=AuditEvent.ActorType.SYSTEM, actor=REANCHOR_ACTOR, action="audit.reanchored",
                      tenant=tenant, tenant_slug=tenant.slug if tenant else "", chain=chain,
                      details={"unkeyed_events": head["seq"], "unkeyed_head": head["hash"]})


def _actor(actor: Actor) -> tuple[str, str]:
    if isinstance(actor, AgentToken):
        return AuditEvent.ActorType.AGENT_TOKEN, f"{actor.prefix} ({actor.name})"[:200]
    if isinstance(actor, AbstractBaseUser):
        return AuditEvent.ActorType.USER, actor.get_username()[:200]
    return AuditEvent.ActorType.SYSTEM, str(actor)[:200]
