"""The audit log: content-free events, each keyed-hash-chained to the previous one of its tenant."""

from __future__ import annotations

import functools
import logging

from celery import current_app
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from elasticsearch import ApiError, TransportError

from tenants import audit_chain
from tenants.crypto import audit_keyring
from tenants.models import AgentToken, AuditEvent, Subject, Tenant
from tenants.selectors import CheckpointStoreError
from tenants.services.audit_checkpoints import audit_checkpoint_write, audit_keying_pin

Actor = AbstractBaseUser | AgentToken | str
log = logging.getLogger(__name__)
# Why a checkpoint could not be written: no credential or key, the store unreadable or refusing.
_STORE_ERRORS = (ImproperlyConfigured, CheckpointStoreError, ApiError, TransportError)

# Memory document fields: audit details must never carry them.
_CONTENT_FIELDS = frozenset({"text", "content", "title", "trigger", "steps", "refined_steps", "embedding", "passages"})


class AuditChainUnkeyed(ImproperlyConfigured):
    """The chain's newest event is not keyed: it was begun before the audit keys, or rewritten by
    someone without them. Nothing is appended until an operator has verified it and re-anchored it
    (``manage.py audit_reanchor``): appending would sign over whatever the database holds."""


def audit_record(*, actor: Actor, action: str, tenant: Tenant | None = None, subject: Subject | None = None,
                 target_id: str = "", details: dict | None = None) -> AuditEvent:
    """Append one audit event. ``details`` is content-free metadata (ids, counts, reasons).

    The first event of a chain keys it: once the transaction commits, a checkpoint pins it
    (``audit_keying_pin``). Raises ValueError when ``details`` names a memory content field (the
    audit log outlives forgets and erasures, so it must never hold what was forgotten), and
    AuditChainUnkeyed when the chain's newest event is not keyed.
    """
    details = details or {}
    leaked = _CONTENT_FIELDS & set(details)
    if leaked:
        raise ValueError(f"audit details must not carry memory content: {sorted(leaked)}")
    if subject is not None and tenant is None:
        tenant = subject.tenant
    keyring = audit_keyring()
    actor_type, actor_name = actor_label(actor)
    chain = tenant.slug if tenant else ""
    # Two writers racing for the same seq: the unique (chain, seq) constraint refuses the second,
    # which re-reads the head and tries again.
    for _attempt in range(20):
        event = AuditEvent(actor_type=actor_type, actor=actor_name, action=action,
                           tenant=tenant, tenant_slug=tenant.slug if tenant else "",
                           subject=subject, subject_ref=str(subject.user_id) if subject else "",
                           target_id=str(target_id), details=details, chain=chain)
        try:
            with transaction.atomic():
                head = (AuditEvent.objects.filter(chain=chain).order_by("-seq")
                        .values("seq", "hash", "key_id", "created_at").first())
                if head and not head["key_id"]:
                    raise AuditChainUnkeyed(
                        f"the audit chain {chain or '(no tenant)'} ends with an unkeyed event (seq {head['seq']}): it "
                        "was begun before the audit keys, or rewritten; verify it, then run manage.py "
                        "audit_reanchor")
                _append(event, head, keyring)
            break
        except IntegrityError:
            continue
    else:
        raise RuntimeError("could not append to the audit chain: too much contention")
    if head is None:
        after_commit(lambda: _pin_keying(chain))
    if (every := checkpoint_spacing()) and event.seq % every == 0:
        # robust: a broker that is down must not fail the action that was just recorded
        after_commit(lambda: current_app.send_task("tenants.tasks.audit_checkpoint", kwargs={"chains": [chain]}))
    return event


@functools.cache
def checkpoint_spacing() -> int:
    """Every how many events of a chain a checkpoint is queued (0: on the beat's schedule only).
    One spacing for the whole log, whichever of its ~30 callers appends, so the deployment's and
    fixed for the process, as its key ring is; not a parameter a caller could vary (dropped when
    settings change, ``tenants.apps``)."""
    return settings.ENGRAM_AUDIT_CHECKPOINT_EVENTS


def after_commit(fn) -> None:
    """Run ``fn`` once the current transaction commits; a failure is logged, never raised into the
    action that was recorded. (Tests, whose transaction never commits, run it at once.)"""
    transaction.on_commit(fn, robust=True)


def _pin_keying(chain: str) -> None:
    try:
        audit_keying_pin(chain=chain)
    except _STORE_ERRORS as exc:
        # The periodic checkpoint pins it later (every chain without a checkpoint has moved), and
        # the verifier says how late: the chain up to it rests on the database alone until then.
        log.warning("audit chain %s: its keying event is not pinned yet: %s", chain or "(no tenant)", exc)


def _append(event: AuditEvent, head: dict | None, keyring: audit_chain.Keyring) -> dict:
    """Link ``event`` to ``head``, sign it under the key valid now and insert it; the new head.
    Its time never goes back from the head's (clocks of two hosts may differ): the verifier
    refuses a chain whose time goes back, which is what an inserted or back-dated event shows."""
    event.seq = (head["seq"] if head else 0) + 1
    event.prev_hash = head["hash"] if head else audit_chain.GENESIS
    event.created_at = max(timezone.now(), head["created_at"]) if head else timezone.now()
    try:
        event.key_id = keyring.signer(event.created_at)
    except audit_chain.KeyringError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    event.hash = audit_chain.link_hash(prev_hash=event.prev_hash, fields=event.chain_fields(), keyring=keyring)
    event.save(force_insert=True)
    return {"seq": event.seq, "hash": event.hash, "key_id": event.key_id, "created_at": event.created_at}


def audit_reanchor(*, chain: str, actor: Actor) -> AuditEvent:
    """Key a chain begun before the audit keys (an operator's decision, after verifying its unkeyed
    events, which rest on the database alone): a keyed ``audit.reanchored`` event naming the
    unkeyed head, whose key signs that head; its checkpoint is written at once. Raises ValueError
    when the chain's newest event is keyed already (or it has none)."""
    keyring = audit_keyring()
    tenant = Tenant.objects.filter(slug=chain).first() if chain else None
    with transaction.atomic():
        head = (AuditEvent.objects.select_for_update().filter(chain=chain).order_by("-seq")
                .values("seq", "hash", "key_id", "created_at").first())
        if head is None or head["key_id"]:
            raise ValueError(f"the audit chain {chain or '(no tenant)'} does not end with an unkeyed event")
        actor_type, actor_name = actor_label(actor)
        event = AuditEvent(actor_type=actor_type, actor=actor_name, action="audit.reanchored",
                           tenant=tenant, tenant_slug=chain, chain=chain,
                           details={"unkeyed_events": head["seq"], "unkeyed_head": head["hash"]})
        _append(event, head, keyring)
    after_commit(lambda: _pin_keying(chain))
    return event


def actor_label(actor: Actor) -> tuple[str, str]:
    """(actor type, the name an audit event gives the actor)."""
    if isinstance(actor, AgentToken):
        return AuditEvent.ActorType.AGENT_TOKEN, f"{actor.prefix} ({actor.name})"[:200]
    if isinstance(actor, AbstractBaseUser):
        return AuditEvent.ActorType.USER, actor.get_username()[:200]
    return AuditEvent.ActorType.SYSTEM, str(actor)[:200]


def audit_export_start(*, tenant: Tenant, actor: Actor, fmt: str, filters: dict) -> int:
    """Record an export of the tenant's audit log and checkpoint its chain: the seq the export runs
    to (its latest checkpoint's, so a complete export is proved by checkpoints throughout; the
    chain's head when no checkpoint could be written, which the export then shows). The event
    holds an HMAC of the filters, not their text: a filter may name an end-user, and the log
    outlives their erasure."""
    keyring = audit_keyring()
    given = {k: str(v) for k, v in filters.items() if v}
    kid = keyring.primary
    digest = keyring.sign("engram audit export filters\n" + audit_chain.canonical(given, tuple(sorted(given))), kid=kid)
    event = audit_record(actor=actor, action="audit.exported", tenant=tenant,
                         details={"format": fmt, "filtered": bool(given),
                                  **({"filters_hmac": digest[:32], "key_id": kid} if given else {})})
    try:
        [result] = audit_checkpoint_write(chains=[tenant.slug])
    except _STORE_ERRORS:  # the export still goes out; its verification shows what is unpinned
        log.exception("audit export of %s: no checkpoint written", tenant.slug)
        return event.seq
    return result.checkpoint["seq"] if result.state != "refused" and result.checkpoint else event.seq
