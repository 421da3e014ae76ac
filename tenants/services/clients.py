"""Elasticsearch clients per credential: reads act as the end-user's own DLS key
(``subject_es_client``), writes as a key that can touch nothing but the memory aliases
(``writer_es_client``)."""

from __future__ import annotations

import logging

from elasticsearch import Elasticsearch

from engram_core.errors import ServiceUnavailable
from engram_core.es.capabilities import Capabilities
from engram_core.es.client import base_client
from engram_core.es.schema import shared_prefix
from tenants.models import Subject, Tenant
from tenants.selectors import SubjectGone, index_prefix_for
from tenants.services.guard import capabilities_forget, require_dls
from tenants.services.key_cache import (
    key_cache_clear,
    subject_key_cached,
    subject_key_remember,
    writer_key_cached,
    writer_key_remember,
)
from tenants.services.keys import KeyLifetimes, subject_key_ensure, writer_key_ensure

log = logging.getLogger(__name__)


def _insecure_client(caps: Capabilities) -> Elasticsearch | None:
    # Only reachable through the development escape hatch: a cluster without security has
    # no API keys at all, so every read and write goes out unauthenticated.
    if caps.security:
        return None
    log.error("INSECURE: Elasticsearch security is off; using an unauthenticated client")
    return base_client()


def clear_caches() -> None:
    """Drop cached capabilities and decrypted keys (settings changed, e.g. in tests)."""
    capabilities_forget()
    key_cache_clear()


def subject_es_client(*, subject: Subject) -> Elasticsearch:
    """A client acting as ``subject``'s own DLS API key: it can read nothing but that end-user's
    memories and their tenant's catalog.

    Mints a key when the subject has none usable (none, expiring, minted for another index
    prefix, e.g. before its tenant moved to dedicated indices, or under an older grant).
    Decrypted keys are cached in-process for ``ENGRAM_KEY_CACHE_SECONDS``. Raises
    ServiceUnavailable when DLS is unavailable (see ``require_dls``).
    """
    caps = require_dls()
    if (insecure := _insecure_client(caps)) is not None:
        return insecure
    prefix = index_prefix_for(tenant=subject.tenant)
    # The key machinery's entry on every read and write: its lifetimes are read here.
    lifetimes = KeyLifetimes.from_settings()
    entry = subject_key_cached(subject=subject, prefix=prefix, cache_seconds=lifetimes.cache_seconds)
    if entry is None:
        entry = subject_key_remember(subject=subject, key=subject_key_ensure(subject=subject, lifetimes=lifetimes))
    return entry.client()


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
    lifetimes = KeyLifetimes.from_settings()  # as in subject_es_client
    entry = writer_key_cached(prefix=prefix, cache_seconds=lifetimes.cache_seconds)
    if entry is None:
        entry = writer_key_remember(prefix=prefix, key=writer_key_ensure(prefix=prefix, lifetimes=lifetimes))
    return entry.client()


def subject_writer_prefix(*, subject: Subject) -> str:
    """``writer_prefix`` for a write of ``subject``'s memories, read fresh with the end-user's own
    state in one query. Raises SubjectGone once its erase has begun (a request or a consolidation
    run that read the end-user before must not write for them), ServiceUnavailable
    (``tenant_moving``) while its tenant moves."""
    erased_at, isolation, moving_to = (Subject.objects.filter(pk=subject.pk).values_list(
        "erased_at", "tenant__isolation", "tenant__isolation_moving_to").get())
    if erased_at is not None:
        raise SubjectGone.of(subject)
    if moving_to:
        raise _moving()
    return index_prefix_for(tenant=subject.tenant, isolation=isolation)


def _moving() -> ServiceUnavailable:
    return ServiceUnavailable("this tenant's memories are being moved between isolation modes; retry shortly",
                              code="tenant_moving", details={"retry_after": 5})


def writer_prefix(*, tenant: Tenant) -> str:
    """The index prefix ``tenant``'s writes go to, read fresh from the database: a stale in-memory
    tenant must not write into the indices it just moved out of. Raises ServiceUnavailable
    (``tenant_moving``, retry hint) while its documents are being moved between isolation modes."""
    isolation, moving_to = Tenant.objects.filter(pk=tenant.pk).values_list("isolation", "isolation_moving_to").get()
    if moving_to:
        raise _moving()
    return index_prefix_for(tenant=tenant, isolation=isolation)
