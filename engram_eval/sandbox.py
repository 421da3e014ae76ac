"""Scratch worlds for measurement runs.

A run writes through the real services under a run-unique index prefix, which those services
resolve as their shared prefix for the run (``engram_core.es.prefixes.scratch_prefix``): nothing it
writes reaches, or is counted in, the indices that serve real memory. Its database rows and audit
events stay as the record that it ran; no transaction spans it and no row is deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
from django.utils import timezone

from engram_core.es.client import admin_client
from engram_core.es.prefixes import scratch_prefix, shared_prefix
from engram_core.es.schema import drop_indices, ensure_indices
from memory_app.usage import usage_flush
from tenants.es_keys import invalidate_keys
from tenants.services.isolation_move import tenant_indices_ensure, tenant_isolation_set
from tenants.models import Subject, Tenant, WriterKey
from memory_app.services.imports import episodes_import
from tenants.services.audit import audit_record
from tenants.services.clients import clear_caches
from tenants.services.keys import subject_keys_revoke_all

ACTOR = "eval"


@dataclass
class Sandbox:
    """One run's scratch world: its index prefix and the tenants created in it."""

    prefix: str
    run: str
    tenants: list[Tenant] = field(default_factory=list)

    def tenant(self, *, slug: str, name: str, dedicated: bool = False) -> Tenant:
        """A tenant of this run (slug ``eval-<run>-<slug>``, so it never meets a real one), in the
        run's shared indices or in dedicated ones of its own."""
        isolation = Tenant.Isolation.DEDICATED if dedicated else Tenant.Isolation.SHARED
        tenant = Tenant.objects.create(slug=f"eval-{self.run}-{slug}"[:64], name=name, isolation=isolation)
        self.tenants.append(tenant)
        tenant_indices_ensure(tenant=tenant)
        return tenant


@contextmanager
def sandbox(*, label: str = "eval", actor: str = ACTOR) -> Iterator[Sandbox]:
    """A scratch world under ``<shared prefix>-<label>-<run>``, for the block only.

    On the way out (errors inside propagate unchanged) the run's keys are revoked, its
    dedicated tenants set back to shared and every index of its prefix dropped.
    """
    run = uuid.uuid4().hex[:8]
    box = Sandbox(prefix=f"{shared_prefix()}-{label}-{run}", run=run)
    es = admin_client()
    with scratch_prefix(box.prefix):
        try:
            ensure_indices(es=es, prefix=box.prefix)
            yield box
        finally:
            try:
                usage_flush()
                scratch_keys_revoke(tenants=box.tenants, prefix=box.prefix, actor=actor)
                scratch_tenants_retire(tenants=box.tenants, actor=actor)
            finally:
                drop_indices(es=es, prefix=box.prefix)
                clear_caches()


def scratch_keys_revoke(*, tenants: Iterable[Tenant], prefix: str, actor: str) -> None:
    """Revoke every key of the run's end-users (its tenants' and any holding a key for its prefix)
    and every writer key minted for its prefix, in Elasticsearch and in the database, so key
    maintenance never renews one."""
    subjects = Subject.objects.filter(Q(tenant__in=list(tenants)) | Q(keys__index_prefix__startswith=prefix),
                                      keys__revoked_at__isnull=True)
    for subject in subjects.select_related("tenant").distinct():
        subject_keys_revoke_all(subject=subject, actor=actor)
    writers = list(WriterKey.objects.filter(index_prefix__startswith=prefix, revoked_at__isnull=True))
    if writers:
        invalidate_keys(key_ids=[k.es_key_id for k in writers])
        WriterKey.objects.filter(pk__in=[k.pk for k in writers]).update(revoked_at=timezone.now())
        audit_record(actor=actor, action="writer_keys.revoked", details={
            "key_ids": [k.es_key_id for k in writers], "index_prefix": prefix, "reason": "scratch run over"})


def scratch_tenants_retire(*, tenants: Iterable[Tenant], actor: str) -> None:
    """Move the run's dedicated tenants back to shared before their indices are dropped: a tenant
    row naming dedicated indices that are gone would have them created again by ``es_setup`` and
    searched by the consolidation schedule. Call it inside the run's ``scratch_prefix``."""
    for tenant in Tenant.objects.filter(pk__in=[t.pk for t in tenants], isolation=Tenant.Isolation.DEDICATED):
        tenant_indices_ensure(tenant=tenant)  # the move copies from them (a run may fail before they exist)
        tenant_isolation_set(tenant=tenant, isolation=Tenant.Isolation.SHARED, actor=actor)


def import_by_client_id(*, subject: Subject, episodes: list[dict[str, Any]]) -> dict[str, str]:
    """Import ``episodes`` (each with its dataset's ``id``) in one call; {stored id: dataset id}.
    An imported episode is stored under its id namespaced to the end-user, while a dataset's gold
    names its own ids: scores compare through this map."""
    stored = episodes_import(subject=subject, episodes=episodes)
    return {memory_id: e["id"] for e, memory_id in zip(episodes, stored, strict=True)}
