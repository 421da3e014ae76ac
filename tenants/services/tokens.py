"""Agent tokens: tenant-scoped, shown once, stored hashed, with scopes."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from engram_core.errors import AuthenticationFailed, ValidationFailed, database_busy
from tenants.models import AgentToken, Tenant
from tenants.services.audit import Actor, actor_label, audit_record

log = logging.getLogger(__name__)

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
        staff = actor if isinstance(actor, AbstractBaseUser) else None
        minter = f"staff:{staff.get_username()}" if staff else actor_label(actor)[1]
        token = AgentToken.objects.create(tenant=tenant, name=name, prefix=prefix, secret_hash=_token_hash(raw),
                                          scopes=scopes, created_by=staff, created_by_name=minter[:200])
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
