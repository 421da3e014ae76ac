"""End-users' DLS keys and the writer key: minting, rotation with a grace period, revocation,
and the periodic maintenance that renews and retires them. Every change is an audit event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from engram_core.errors import ValidationFailed
from engram_core.es.schema import shared_prefix
from engram_core.observability import metrics
from tenants import crypto, es_keys
from tenants.models import Subject, SubjectKey, WriterKey
from tenants.selectors import SubjectGone, index_prefix_for
from tenants.services.audit import Actor, audit_record
from tenants.services.guard import keys_supported
from tenants.services.key_cache import subject_key_forget, writer_keys_forget

SYSTEM_KEY_MAINTENANCE = "key-maintenance"


@dataclass(frozen=True)
class KeyLifetimes:
    """How long keys live, as an operator sets them (config/settings/base.py explains each), read
    at an entry: the client factory (``tenants.services.clients``), the maintenance task, the
    admin's and inspector's actions, the creation of an end-user."""

    subject_ttl: timedelta  # a new end-user key's lifetime (ENGRAM_SUBJECT_KEY_TTL_DAYS)
    writer_ttl: timedelta  # a new writer key's lifetime (ENGRAM_WRITER_KEY_TTL_DAYS)
    renew_before: timedelta  # renewed this long before expiry (ENGRAM_KEY_RENEW_BEFORE_DAYS)
    rotation_grace: timedelta  # a rotated key's grace (ENGRAM_KEY_ROTATION_GRACE_SECONDS)
    # A decrypted key's time in the in-process cache (ENGRAM_KEY_CACHE_SECONDS): a key is usable
    # only if it outlives it.
    cache_seconds: int

    @classmethod
    def from_settings(cls) -> KeyLifetimes:
        return cls(subject_ttl=timedelta(days=settings.ENGRAM_SUBJECT_KEY_TTL_DAYS),
                   writer_ttl=timedelta(days=settings.ENGRAM_WRITER_KEY_TTL_DAYS),
                   renew_before=timedelta(days=settings.ENGRAM_KEY_RENEW_BEFORE_DAYS),
                   rotation_grace=timedelta(seconds=settings.ENGRAM_KEY_ROTATION_GRACE_SECONDS),
                   cache_seconds=settings.ENGRAM_KEY_CACHE_SECONDS)


def subject_key_mint(*, subject: Subject, actor: Actor, lifetimes: KeyLifetimes, reason: str = "new") -> SubjectKey:
    """Mint and store a new key for ``subject``. The caller holds the subject's row (or just created
    it), so no other active key can appear meanwhile."""
    prefix = index_prefix_for(tenant=subject.tenant)
    minted = es_keys.mint_subject_key(subject=subject, prefix=prefix, ttl=lifetimes.subject_ttl)
    key = SubjectKey.objects.create(subject=subject, es_key_id=minted.key_id, index_prefix=prefix,
                                    role_version=es_keys.ROLE_VERSION,
                                    secret_encrypted=crypto.encrypt(minted.secret), expires_at=minted.expires_at)
    audit_record(actor=actor, action="subject_key.minted", subject=subject, target_id=minted.key_id,
                 details={"expires_at": minted.expires_at.isoformat(), "reason": reason})
    metrics.KEYS_MINTED.labels("subject").inc()
    return key


def _locked_subject(subject: Subject) -> Subject:
    return Subject.objects.select_for_update().select_related("tenant").get(pk=subject.pk)


def _mintable(locked: Subject) -> Subject:
    """``locked``, unless its erase has begun: an erased end-user never gets a key again (a read
    in flight, a consolidation run holding the end-user, would otherwise mint one)."""
    if locked.erased_at is not None:
        raise SubjectGone.of(locked)
    return locked


def _usable(key: SubjectKey | WriterKey | None, *, prefix: str, lifetimes: KeyLifetimes) -> bool:
    margin = timedelta(seconds=lifetimes.cache_seconds)
    return (key is not None and key.index_prefix == prefix and key.role_version == es_keys.ROLE_VERSION
            and key.expires_at > timezone.now() + margin)


def subject_key_ensure(*, subject: Subject, lifetimes: KeyLifetimes, actor: Actor = SYSTEM_KEY_MAINTENANCE
                       ) -> SubjectKey:
    """``subject``'s usable active key, minting one when it has none, or rotating one that is
    expiring, was minted for another index prefix or under an older grant (the old one keeps its
    grace period). NotFound once the end-user's erase has begun."""
    prefix = index_prefix_for(tenant=subject.tenant)
    key = SubjectKey.objects.active().filter(subject=subject).first()
    if _usable(key, prefix=prefix, lifetimes=lifetimes):
        return key
    with transaction.atomic():
        locked = _mintable(_locked_subject(subject))
        key = SubjectKey.objects.active().filter(subject=locked).first()
        if _usable(key, prefix=prefix, lifetimes=lifetimes):  # another process got here first
            return key
        if key is None:
            return subject_key_mint(subject=locked, actor=actor, lifetimes=lifetimes, reason="missing")
        return _rotate(subject=locked, current=key, actor=actor, lifetimes=lifetimes,
                       grace=lifetimes.rotation_grace, reason="unusable")


def subject_key_rotate(*, subject: Subject, actor: Actor, lifetimes: KeyLifetimes,
                       grace: timedelta | None = None) -> SubjectKey:
    """Mint a new key for ``subject``; the old one stays valid for ``grace`` and is then refused.

    ``grace`` defaults to ``lifetimes.rotation_grace``; zero invalidates the old key
    at once. The end of the grace period is enforced by Elasticsearch (the old key's expiry is
    shortened); the maintenance task then invalidates it for good. Returns the new key.
    """
    grace = lifetimes.rotation_grace if grace is None else grace
    with transaction.atomic():
        locked = _mintable(_locked_subject(subject))
        current = SubjectKey.objects.active().filter(subject=locked).first()
        if current is None:
            key = subject_key_mint(subject=locked, actor=actor, lifetimes=lifetimes,
                                   reason="rotation without an active key")
        else:
            key = _rotate(subject=locked, current=current, actor=actor, lifetimes=lifetimes, grace=grace,
                          reason="rotation")
    subject_key_forget(subject=subject)
    return key


def _rotate(*, subject: Subject, current: SubjectKey, actor: Actor, lifetimes: KeyLifetimes, grace: timedelta,
            reason: str) -> SubjectKey:
    now = timezone.now()
    grace_seconds = max(int(grace.total_seconds()), 0)
    current.rotated_at = now
    current.grace_until = now + timedelta(seconds=grace_seconds)
    current.save(update_fields=["rotated_at", "grace_until"])
    # Mint before touching the old key in Elasticsearch: if minting fails the transaction rolls
    # back and the old key is still the working, active one.
    new = subject_key_mint(subject=subject, actor=actor, lifetimes=lifetimes, reason=reason)
    if grace_seconds == 0:
        es_keys.invalidate_keys(key_ids=[current.es_key_id])
        current.revoked_at = now
    elif current.expires_at > current.grace_until:
        es_keys.expire_key_in(key_id=current.es_key_id, seconds=grace_seconds)
    current.superseded_by = new
    current.save(update_fields=["revoked_at", "superseded_by"])
    audit_record(actor=actor, action="subject_key.rotated", subject=subject, target_id=current.es_key_id,
                 details={"new_key_id": new.es_key_id, "grace_seconds": grace_seconds, "reason": reason})
    metrics.KEYS_ROTATED.labels("subject").inc()
    return new


def subject_key_revoke(*, subject: Subject, actor: Actor, key: SubjectKey | None = None) -> SubjectKey | None:
    """Invalidate ``key`` (default: ``subject``'s active key) now, skipping any grace period.

    Returns the revoked key, or None when there was nothing left to revoke. The next
    ``subject_es_client`` call mints a fresh key: revoking answers a leaked key, it does not lock
    the end-user out (``subject_keys_revoke_all`` is for erasure). Raises ValidationFailed when
    ``key`` belongs to another subject.
    """
    if key is not None and key.subject_id != subject.pk:
        raise ValidationFailed("the key belongs to another end-user")
    with transaction.atomic():
        locked = _locked_subject(subject)
        keys = SubjectKey.objects.live().filter(subject=locked)
        key = (keys.filter(pk=key.pk) if key is not None else keys.filter(rotated_at__isnull=True)).first()
        if key is not None:
            # Database first: if Elasticsearch refuses, the row rolls back and stays truthful.
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
            es_keys.invalidate_keys(key_ids=[key.es_key_id])
            audit_record(actor=actor, action="subject_key.revoked", subject=locked, target_id=key.es_key_id)
    subject_key_forget(subject=subject)
    return key


def subject_keys_revoke_all(*, subject: Subject, actor: Actor) -> int:
    """Invalidate every key of ``subject`` still accepted by Elasticsearch (active and in grace).

    Used by erase-subject. Returns how many keys were invalidated.
    """
    with transaction.atomic():
        locked = _locked_subject(subject)
        keys = list(SubjectKey.objects.live().filter(subject=locked))
        SubjectKey.objects.filter(pk__in=[k.pk for k in keys]).update(revoked_at=timezone.now())
        es_keys.invalidate_keys(key_ids=[k.es_key_id for k in keys])
        audit_record(actor=actor, action="subject_keys.revoked_all", subject=locked,
                     details={"key_ids": [k.es_key_id for k in keys]})
    subject_key_forget(subject=subject)
    return len(keys)


def writer_key_ensure(*, lifetimes: KeyLifetimes, prefix: str | None = None) -> WriterKey:
    """The current writer key for ``prefix``; a new one is minted when none is valid beyond the
    renewal window, and older ones enter their rotation grace."""
    prefix = prefix or shared_prefix()
    renew_at = timezone.now() + lifetimes.renew_before
    live = WriterKey.objects.filter(index_prefix=prefix, rotated_at__isnull=True, revoked_at__isnull=True)
    current = live.filter(expires_at__gt=renew_at, role_version=es_keys.ROLE_VERSION)
    key = current.order_by("-created_at").first()
    if key is not None:
        return key
    with transaction.atomic():
        key = current.select_for_update().order_by("-created_at").first()
        if key is not None:
            return key
        minted = es_keys.mint_writer_key(prefix=prefix, ttl=lifetimes.writer_ttl)
        now = timezone.now()
        # Two processes may race to mint: both keys are valid, the loser's is rotated out later.
        rotated = live.exclude(es_key_id=minted.key_id).update(
            rotated_at=now, grace_until=now + lifetimes.rotation_grace)
        key = WriterKey.objects.create(es_key_id=minted.key_id, secret_encrypted=crypto.encrypt(minted.secret),
                                       index_prefix=prefix, expires_at=minted.expires_at,
                                       role_version=es_keys.ROLE_VERSION)
        audit_record(actor=SYSTEM_KEY_MAINTENANCE, action="writer_key.minted", target_id=minted.key_id,
                     details={"index_prefix": prefix, "expires_at": minted.expires_at.isoformat()})
        metrics.KEYS_MINTED.labels("writer").inc()
        if rotated:
            metrics.KEYS_ROTATED.labels("writer").inc(rotated)
    return key


@dataclass(frozen=True)
class KeyMaintenance:
    rotated: int
    invalidated: int
    writer_invalidated: int


def keys_maintain(*, lifetimes: KeyLifetimes, now: datetime | None = None) -> KeyMaintenance:
    """Rotate subject keys near expiry, invalidate keys whose grace has ended, renew the writer.

    Idempotent; run periodically (``tenants.tasks.maintain_keys``).
    """
    now = now or timezone.now()
    invalidated = _invalidate_past_grace(now=now)
    writer_invalidated = _invalidate_writers_past_grace(now=now)
    renew_at = now + lifetimes.renew_before
    rotated = 0
    for subject in Subject.objects.filter(keys__in=SubjectKey.objects.active().filter(expires_at__lte=renew_at)
                                          ).select_related("tenant").distinct().iterator():
        subject_key_rotate(subject=subject, actor=SYSTEM_KEY_MAINTENANCE, lifetimes=lifetimes)
        rotated += 1
    if keys_supported():
        writer_key_ensure(lifetimes=lifetimes)
    return KeyMaintenance(rotated=rotated, invalidated=invalidated, writer_invalidated=writer_invalidated)


def keys_upgrade(*, lifetimes: KeyLifetimes, actor: Actor = SYSTEM_KEY_MAINTENANCE) -> dict[str, int]:
    """Rotate every live key minted under an older ``es_keys.ROLE_VERSION`` (its grant was wider
    than today's). Subject keys keep the usual rotation grace; stale writer keys are replaced
    and enter their grace. Idempotent; run by ``es_setup`` on every deploy."""
    stale = SubjectKey.objects.active().exclude(role_version=es_keys.ROLE_VERSION)
    subjects = 0
    for subject in Subject.objects.filter(keys__in=stale).select_related("tenant").distinct().iterator():
        subject_key_rotate(subject=subject, actor=actor, lifetimes=lifetimes)
        subjects += 1
    prefixes = sorted(set(WriterKey.objects.filter(rotated_at__isnull=True, revoked_at__isnull=True)
                          .exclude(role_version=es_keys.ROLE_VERSION).values_list("index_prefix", flat=True)))
    for prefix in prefixes:
        writer_key_ensure(lifetimes=lifetimes, prefix=prefix)  # mints a current key; the stale ones enter their grace
    writer_keys_forget()
    return {"subject_keys": subjects, "writer_prefixes": len(prefixes)}


def _invalidate_past_grace(*, now: datetime) -> int:
    keys = list(SubjectKey.objects.filter(revoked_at__isnull=True, rotated_at__isnull=False, grace_until__lte=now)
                .select_related("subject__tenant")[:500])
    es_keys.invalidate_keys(key_ids=[k.es_key_id for k in keys])
    for key in keys:
        SubjectKey.objects.filter(pk=key.pk).update(revoked_at=now)
        audit_record(actor=SYSTEM_KEY_MAINTENANCE, action="subject_key.invalidated", subject=key.subject,
                     target_id=key.es_key_id, details={"reason": "grace period over"})
    return len(keys)


def _invalidate_writers_past_grace(*, now: datetime) -> int:
    keys = list(WriterKey.objects.filter(revoked_at__isnull=True, rotated_at__isnull=False, grace_until__lte=now)[:500])
    es_keys.invalidate_keys(key_ids=[k.es_key_id for k in keys])
    WriterKey.objects.filter(pk__in=[k.pk for k in keys]).update(revoked_at=now)
    for key in keys:
        audit_record(actor=SYSTEM_KEY_MAINTENANCE, action="writer_key.invalidated", target_id=key.es_key_id,
                     details={"reason": "grace period over"})
    return len(keys)

