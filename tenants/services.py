"""Writes for tenants, end-users, keys, agent tokens and the audit log. Keyword-only, typed.

Isolation rests on three services here: ``require_dls`` (refuse to serve memory when the
cluster cannot enforce document-level security), ``subject_es_client`` (reads act as the
end-user's own DLS key) and ``writer_es_client`` (writes use a key that can touch nothing
but the memory aliases).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone
from elasticsearch import Elasticsearch

from engram_core.errors import AuthenticationFailed, ServiceUnavailable, ValidationFailed, database_busy
from engram_core.es.capabilities import Capabilities, probe_capabilities
from engram_core.es.client import api_key_client, base_client
from engram_core.es.schema import shared_prefix
from engram_core.validation import clean_external_id

from . import audit_chain, crypto, es_keys
from .models import AgentToken, AuditEvent, Subject, SubjectKey, Tenant, WriterKey
from .selectors import index_prefix_for, subject_find

log = logging.getLogger(__name__)

Actor = AbstractBaseUser | AgentToken | str
SYSTEM_KEY_MAINTENANCE = "key-maintenance"


# ---------------------------------------------------------------- audit

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


# ---------------------------------------------------------------- capability guard

_caps_lock = threading.Lock()
_caps_cache: tuple[float, Capabilities] | None = None


def _capabilities() -> Capabilities:
    global _caps_cache
    with _caps_lock:
        cached = _caps_cache
    if cached and time.monotonic() - cached[0] < settings.ENGRAM_CAPABILITIES_CACHE_SECONDS:
        return cached[1]
    caps = probe_capabilities()
    if caps.reachable:  # an outage is not cached: recovery is noticed on the next call
        with _caps_lock:
            _caps_cache = (time.monotonic(), caps)
    return caps


def require_dls() -> Capabilities:
    """Return the cluster's capabilities if Engram may serve memory from it.

    Raises ServiceUnavailable (code ``elasticsearch_unreachable``) when the cluster cannot be
    reached, and (code ``isolation_unavailable``) when it cannot enforce document-level
    security, unless ``ENGRAM_ALLOW_INSECURE_NO_DLS`` is set, in which case every call logs
    an error-level warning. The probe is cached for ``ENGRAM_CAPABILITIES_CACHE_SECONDS``.
    """
    caps = _capabilities()
    if not caps.reachable:
        raise ServiceUnavailable("Elasticsearch is unreachable", code="elasticsearch_unreachable",
                                 details={"errors": caps.errors})
    if caps.dls:
        return caps
    if settings.ENGRAM_ALLOW_INSECURE_NO_DLS:
        log.error("INSECURE: serving memory WITHOUT document-level security (ENGRAM_ALLOW_INSECURE_NO_DLS=True): "
                  "end-users are separated by query filters only. %s", "; ".join(caps.errors))
        return caps
    raise ServiceUnavailable(
        "Elasticsearch cannot enforce document-level security, so Engram refuses to serve memory",
        code="isolation_unavailable",
        details={"errors": caps.errors, "licence": caps.licence, "security": caps.security},
    )


def _insecure_client(caps: Capabilities) -> Elasticsearch | None:
    # Only reachable through the development escape hatch: a cluster without security has
    # no API keys at all, so every read and write goes out unauthenticated.
    if caps.security:
        return None
    log.error("INSECURE: Elasticsearch security is off; using an unauthenticated client")
    return base_client()


# ---------------------------------------------------------------- in-process key cache

@dataclass(frozen=True)
class _CachedKey:
    key_id: str
    encoded: str
    prefix: str
    expires_at: datetime
    loaded_at: float
    # The client acting as this key, made once: ``.options()`` builds a new client object per
    # call (about a millisecond of CPU on every request path that asked for one).
    es: Elasticsearch

    def client(self) -> Elasticsearch:
        """This key's client; a new one if the base client was replaced since (``reset_clients``)."""
        return self.es if self.es.transport is base_client().transport else api_key_client(self.encoded)


_key_cache_lock = threading.Lock()
_subject_keys: dict[int, _CachedKey] = {}
_writer_keys: dict[str, _CachedKey] = {}


def _cached(cache: dict, cache_key, *, prefix: str) -> _CachedKey | None:
    with _key_cache_lock:
        entry = cache.get(cache_key)
    if (entry is None or entry.prefix != prefix
            or time.monotonic() - entry.loaded_at >= settings.ENGRAM_KEY_CACHE_SECONDS
            or entry.expires_at <= timezone.now() + timedelta(seconds=settings.ENGRAM_KEY_CACHE_SECONDS)):
        return None
    return entry


def _remember(cache: dict, cache_key, key: SubjectKey | WriterKey) -> _CachedKey:
    encoded = es_keys.encoded_api_key(key.es_key_id, crypto.decrypt(key.secret_encrypted))
    entry = _CachedKey(key_id=key.es_key_id, encoded=encoded, prefix=key.index_prefix, expires_at=key.expires_at,
                       loaded_at=time.monotonic(), es=api_key_client(encoded))
    with _key_cache_lock:
        cache[cache_key] = entry
    return entry


def _forget_subject_key(subject: Subject) -> None:
    with _key_cache_lock:
        _subject_keys.pop(subject.pk, None)


def clear_caches() -> None:
    """Drop cached capabilities and decrypted keys (settings changed, e.g. in tests)."""
    global _caps_cache
    with _caps_lock:
        _caps_cache = None
    with _key_cache_lock:
        _subject_keys.clear()
        _writer_keys.clear()


# ---------------------------------------------------------------- subjects and their keys

def subject_external_id_validate(*, tenant: Tenant, external_id: str) -> str:
    """``external_id`` as a write names its end-user: an existing end-user's id as it is, a new
    one's addressable in the API's URLs (``clean_external_id(new=True)``); checked when a write is
    accepted, so that one queued for an end-user who cannot be created is refused then, not at
    replay. Looks the end-user up only for an id a new one could not have."""
    external_id = clean_external_id(external_id)
    try:
        return clean_external_id(external_id, new=True)
    except ValidationFailed:
        if Subject.objects.filter(tenant=tenant, external_id=external_id).exists():
            return external_id
        raise


def subject_get_or_create(*, tenant: Tenant, external_id: str, display_name: str = "",
                          actor: Actor = "api") -> Subject:
    """The end-user ``external_id`` of ``tenant``, created (with its DLS key minted) if new.

    Creation and minting are one transaction: if the key cannot be minted the end-user is not
    created (ServiceUnavailable is raised). A new end-user's id must be addressable in the API's
    URLs (``clean_external_id(new=True)``: ValidationFailed otherwise).
    """
    external_id = clean_external_id(external_id)
    existing = subject_find(tenant=tenant, external_id=external_id)
    if existing:
        return existing
    clean_external_id(external_id, new=True)
    with transaction.atomic():
        subject, created = Subject.objects.select_related("tenant").get_or_create(
            tenant=tenant, external_id=external_id, defaults={"display_name": display_name})
        if created:
            audit_record(actor=actor, action="subject.created", subject=subject, target_id=str(subject.user_id))
            if _keys_supported():
                _mint_subject_key(subject=subject, actor=actor)
    return subject


def _keys_supported() -> bool:
    return require_dls().security


def _mint_subject_key(*, subject: Subject, actor: Actor, reason: str = "new") -> SubjectKey:
    # Callers hold the subject row (or just created it), so no other active key can appear meanwhile.
    prefix = index_prefix_for(tenant=subject.tenant)
    minted = es_keys.mint_subject_key(subject=subject, prefix=prefix,
                                      ttl=timedelta(days=settings.ENGRAM_SUBJECT_KEY_TTL_DAYS))
    key = SubjectKey.objects.create(subject=subject, es_key_id=minted.key_id, index_prefix=prefix,
                                    role_version=es_keys.ROLE_VERSION,
                                    secret_encrypted=crypto.encrypt(minted.secret), expires_at=minted.expires_at)
    audit_record(actor=actor, action="subject_key.minted", subject=subject, target_id=minted.key_id,
                 details={"expires_at": minted.expires_at.isoformat(), "reason": reason})
    return key


def _locked_subject(subject: Subject) -> Subject:
    return Subject.objects.select_for_update().select_related("tenant").get(pk=subject.pk)


def subject_es_client(*, subject: Subject) -> Elasticsearch:
    """A client acting as ``subject``'s own DLS API key: it can read nothing but that end-user's
    memories and their tenant's catalog.

    Mints a key when the subject has none usable (none, expiring, minted for another index
    prefix, e.g. before its tenant moved to dedicated indices, or under an older grant). Decrypted keys are cached in-process for ``ENGRAM_KEY_CACHE_SECONDS``. Raises
    ServiceUnavailable when DLS is unavailable (see ``require_dls``).
    """
    caps = require_dls()
    if (insecure := _insecure_client(caps)) is not None:
        return insecure
    prefix = index_prefix_for(tenant=subject.tenant)
    entry = _cached(_subject_keys, subject.pk, prefix=prefix)
    if entry is None:
        key = subject_key_ensure(subject=subject)
        entry = _remember(_subject_keys, subject.pk, key)
    return entry.client()


def _usable(key: SubjectKey | WriterKey | None, *, prefix: str) -> bool:
    margin = timedelta(seconds=settings.ENGRAM_KEY_CACHE_SECONDS)
    return (key is not None and key.index_prefix == prefix and key.role_version == es_keys.ROLE_VERSION
            and key.expires_at > timezone.now() + margin)


def subject_key_ensure(*, subject: Subject, actor: Actor = SYSTEM_KEY_MAINTENANCE) -> SubjectKey:
    """``subject``'s usable active key, minting one when it has none, or rotating one that is
    expiring, was minted for another index prefix or under an older grant (the old one keeps its
    grace period)."""
    prefix = index_prefix_for(tenant=subject.tenant)
    key = SubjectKey.objects.active().filter(subject=subject).first()
    if _usable(key, prefix=prefix):
        return key
    with transaction.atomic():
        locked = _locked_subject(subject)
        key = SubjectKey.objects.active().filter(subject=locked).first()
        if _usable(key, prefix=prefix):  # another process got here first
            return key
        if key is None:
            return _mint_subject_key(subject=locked, actor=actor, reason="missing")
        return _rotate(subject=locked, current=key, actor=actor,
                       grace=timedelta(seconds=settings.ENGRAM_KEY_ROTATION_GRACE_SECONDS), reason="unusable")


def subject_key_rotate(*, subject: Subject, actor: Actor, grace: timedelta | None = None) -> SubjectKey:
    """Mint a new key for ``subject``; the old one stays valid for ``grace`` and is then refused.

    ``grace`` defaults to ``ENGRAM_KEY_ROTATION_GRACE_SECONDS``; zero invalidates the old key
    at once. The end of the grace period is enforced by Elasticsearch (the old key's expiry is
    shortened); the maintenance task then invalidates it for good. Returns the new key.
    """
    grace = timedelta(seconds=settings.ENGRAM_KEY_ROTATION_GRACE_SECONDS) if grace is None else grace
    with transaction.atomic():
        locked = _locked_subject(subject)
        current = SubjectKey.objects.active().filter(subject=locked).first()
        if current is None:
            key = _mint_subject_key(subject=locked, actor=actor, reason="rotation without an active key")
        else:
            key = _rotate(subject=locked, current=current, actor=actor, grace=grace, reason="rotation")
    _forget_subject_key(subject)
    return key


def _rotate(*, subject: Subject, current: SubjectKey, actor: Actor, grace: timedelta, reason: str) -> SubjectKey:
    now = timezone.now()
    grace_seconds = max(int(grace.total_seconds()), 0)
    current.rotated_at = now
    current.grace_until = now + timedelta(seconds=grace_seconds)
    current.save(update_fields=["rotated_at", "grace_until"])
    # Mint before touching the old key in Elasticsearch: if minting fails the transaction rolls
    # back and the old key is still the working, active one.
    new = _mint_subject_key(subject=subject, actor=actor, reason=reason)
    if grace_seconds == 0:
        es_keys.invalidate_keys(key_ids=[current.es_key_id])
        current.revoked_at = now
    elif current.expires_at > current.grace_until:
        es_keys.expire_key_in(key_id=current.es_key_id, seconds=grace_seconds)
    current.superseded_by = new
    current.save(update_fields=["revoked_at", "superseded_by"])
    audit_record(actor=actor, action="subject_key.rotated", subject=subject, target_id=current.es_key_id,
                 details={"new_key_id": new.es_key_id, "grace_seconds": grace_seconds, "reason": reason})
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
    _forget_subject_key(subject)
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
    _forget_subject_key(subject)
    return len(keys)


# ---------------------------------------------------------------- writer credential

def writer_es_client(*, prefix: str | None = None) -> Elasticsearch:
    """A client acting as Engram's writer key for the memory aliases of ``prefix`` (default: the
    shared indices; a tenant's own prefix comes from ``writer_prefix``): the write actions and
    the reads they need, nothing else.

    Use it only for writes (and the get-then-update they need), after the caller proved the
    end-user can see what it changes through ``subject_es_client``. Minted on first use and
    before expiry; cached in-process.
    """
    caps = require_dls()
    if (insecure := _insecure_client(caps)) is not None:
        return insecure
    prefix = prefix or shared_prefix()
    entry = _cached(_writer_keys, prefix, prefix=prefix)
    if entry is None:
        entry = _remember(_writer_keys, prefix, writer_key_ensure(prefix=prefix))
    return entry.client()


def writer_prefix(*, tenant: Tenant) -> str:
    """The index prefix ``tenant``'s writes go to, read fresh from the database: a stale in-memory
    tenant must not write into the indices it just moved out of. Raises ServiceUnavailable
    (``tenant_moving``, retry hint) while its documents are being moved between isolation modes."""
    isolation, moving_to = Tenant.objects.filter(pk=tenant.pk).values_list("isolation", "isolation_moving_to").get()
    if moving_to:
        raise ServiceUnavailable("this tenant's memories are being moved between isolation modes; retry shortly",
                                 code="tenant_moving", details={"retry_after": 5})
    return index_prefix_for(tenant=tenant, isolation=isolation)


def writer_key_ensure(*, prefix: str | None = None) -> WriterKey:
    """The current writer key for ``prefix``; a new one is minted when none is valid beyond the
    renewal window, and older ones enter their rotation grace."""
    prefix = prefix or shared_prefix()
    renew_at = timezone.now() + timedelta(days=settings.ENGRAM_KEY_RENEW_BEFORE_DAYS)
    live = WriterKey.objects.filter(index_prefix=prefix, rotated_at__isnull=True, revoked_at__isnull=True)
    current = live.filter(expires_at__gt=renew_at, role_version=es_keys.ROLE_VERSION)
    key = current.order_by("-created_at").first()
    if key is not None:
        return key
    with transaction.atomic():
        key = current.select_for_update().order_by("-created_at").first()
        if key is not None:
            return key
        minted = es_keys.mint_writer_key(prefix=prefix, ttl=timedelta(days=settings.ENGRAM_WRITER_KEY_TTL_DAYS))
        now = timezone.now()
        # Two processes may race to mint: both keys are valid, the loser's is rotated out later.
        live.exclude(es_key_id=minted.key_id).update(
            rotated_at=now, grace_until=now + timedelta(seconds=settings.ENGRAM_KEY_ROTATION_GRACE_SECONDS))
        key = WriterKey.objects.create(es_key_id=minted.key_id, secret_encrypted=crypto.encrypt(minted.secret),
                                       index_prefix=prefix, expires_at=minted.expires_at,
                                       role_version=es_keys.ROLE_VERSION)
        audit_record(actor=SYSTEM_KEY_MAINTENANCE, action="writer_key.minted", target_id=minted.key_id,
                     details={"index_prefix": prefix, "expires_at": minted.expires_at.isoformat()})
    return key


# ---------------------------------------------------------------- periodic maintenance

@dataclass(frozen=True)
class KeyMaintenance:
    rotated: int
    invalidated: int
    writer_invalidated: int


def keys_maintain(*, now: datetime | None = None) -> KeyMaintenance:
    """Rotate subject keys near expiry, invalidate keys whose grace has ended, renew the writer.

    Idempotent; run periodically (``tenants.tasks.maintain_keys``).
    """
    now = now or timezone.now()
    invalidated = _invalidate_past_grace(now=now)
    writer_invalidated = _invalidate_writers_past_grace(now=now)
    renew_at = now + timedelta(days=settings.ENGRAM_KEY_RENEW_BEFORE_DAYS)
    rotated = 0
    for subject in Subject.objects.filter(keys__in=SubjectKey.objects.active().filter(expires_at__lte=renew_at)
                                          ).select_related("tenant").distinct().iterator():
        subject_key_rotate(subject=subject, actor=SYSTEM_KEY_MAINTENANCE)
        rotated += 1
    if _keys_supported():
        writer_key_ensure()
    return KeyMaintenance(rotated=rotated, invalidated=invalidated, writer_invalidated=writer_invalidated)


def keys_upgrade(*, actor: Actor = SYSTEM_KEY_MAINTENANCE) -> dict[str, int]:
    """Rotate every live key minted under an older ``es_keys.ROLE_VERSION`` (its grant was wider
    than today's). Subject keys keep the usual rotation grace; stale writer keys are replaced
    and enter their grace. Idempotent; run by ``es_setup`` on every deploy."""
    stale = SubjectKey.objects.active().exclude(role_version=es_keys.ROLE_VERSION)
    subjects = 0
    for subject in Subject.objects.filter(keys__in=stale).select_related("tenant").distinct().iterator():
        subject_key_rotate(subject=subject, actor=actor)
        subjects += 1
    prefixes = sorted(set(WriterKey.objects.filter(rotated_at__isnull=True, revoked_at__isnull=True)
                          .exclude(role_version=es_keys.ROLE_VERSION).values_list("index_prefix", flat=True)))
    for prefix in prefixes:
        writer_key_ensure(prefix=prefix)  # mints a current key; the stale ones enter their grace
    with _key_cache_lock:
        _writer_keys.clear()
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


# ---------------------------------------------------------------- encryption key rotation

def encryption_key_rotate(*, actor: Actor) -> int:
    """Re-encrypt every stored secret under the primary ``ENGRAM_ENCRYPTION_KEYS`` key.

    Afterwards older keys can be removed from the setting. Returns how many secrets were rewritten.
    """
    count = 0
    with transaction.atomic():
        for model in (SubjectKey, WriterKey):
            for key in model.objects.select_for_update().only("pk", "secret_encrypted").iterator():
                key.secret_encrypted = crypto.reencrypt(key.secret_encrypted)
                key.save(update_fields=["secret_encrypted"])
                count += 1
        audit_record(actor=actor, action="encryption_key.rotated", details={"secrets": count})
    clear_caches()
    return count


# ---------------------------------------------------------------- agent tokens

_TOKEN_RE = re.compile(r"^eng_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_TOUCH_EVERY = timedelta(seconds=60)


def _token_hash(raw: str) -> str:
    # The token carries 256 random bits: a fast hash is enough, a slow KDF would only cost latency.
    return hashlib.sha256(raw.encode()).hexdigest()


def agent_token_create(*, tenant: Tenant, name: str, scopes: Iterable[str], actor: Actor) -> tuple[AgentToken, str]:
    """Create an agent token for ``tenant``. Returns it and its plaintext, which is not stored:
    show it once. Raises ValidationFailed on an empty or over-long name or unknown/empty scopes."""
    name = name.strip()
    scopes = sorted(set(scopes))
    unknown = sorted(set(scopes) - set(AgentToken.Scope.values))
    if not name:
        raise ValidationFailed("a token needs a name", details={"field": "name"})
    limit = AgentToken._meta.get_field("name").max_length
    if len(name) > limit:  # the column's own limit, which PostgreSQL would enforce with a 500
        raise ValidationFailed(f"a token's name is at most {limit} characters", details={"field": "name"})
    if unknown or not scopes:
        raise ValidationFailed("scopes must be a non-empty subset of " + ", ".join(AgentToken.Scope.values),
                               details={"field": "scopes", "unknown": unknown})
    prefix = secrets.token_hex(6)
    raw = f"eng_{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        token = AgentToken.objects.create(tenant=tenant, name=name, prefix=prefix, secret_hash=_token_hash(raw),
                                          scopes=scopes)
        audit_record(actor=actor, action="agent_token.created", tenant=tenant, target_id=prefix,
                     details={"name": name, "scopes": scopes})
    return token, raw


def agent_token_authenticate(*, raw: str) -> AgentToken:
    """The live token whose plaintext is ``raw`` (its tenant loaded); records its use.

    Raises AuthenticationFailed, with one message for malformed, unknown and revoked tokens.
    """
    failed = AuthenticationFailed("invalid or revoked agent token")
    match = _TOKEN_RE.match(raw.strip())
    if not match:
        raise failed
    token = AgentToken.objects.select_related("tenant").filter(prefix=match.group(1)).first()
    if token is None or not hmac.compare_digest(token.secret_hash, _token_hash(raw.strip())) or token.revoked_at:
        raise failed
    now = timezone.now()
    # Touch at most once a minute per token, whatever the number of processes (the update only
    # matches a stale row): a write per request would be the hottest row in the database.
    if token.last_used_at is None or now - token.last_used_at >= _TOUCH_EVERY:
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - _TOUCH_EVERY)
        try:
            with transaction.atomic():  # a savepoint inside a caller's transaction: a failure leaves it usable
                AgentToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)
        except OperationalError as exc:
            if database_busy(exc) is None:
                raise
            # Bookkeeping only: a busy database must not fail a request that needs no other write.
            log.warning("agent token %s: last_used_at not recorded, database busy", token.prefix)
        else:
            token.last_used_at = now
    return token


def agent_token_revoke(*, token: AgentToken, actor: Actor) -> AgentToken:
    """Revoke ``token`` (idempotent: revoking twice records one event)."""
    with transaction.atomic():
        updated = AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        if updated:
            audit_record(actor=actor, action="agent_token.revoked", tenant=token.tenant, target_id=token.prefix,
                         details={"name": token.name})
    token.refresh_from_db(fields=["revoked_at"])
    return token
