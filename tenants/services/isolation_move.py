"""A tenant's isolation mode (shared indices, or dedicated ones under ``<prefix>-t-<slug>``) and
the move between them: copy every document, verify the counts, switch, then remove the old
copies; a failure before the switch leaves the tenant where it was with every document. Admin
credential only: a command, never a request path."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db import transaction
from elasticsearch import Elasticsearch, helpers

from engram_core.errors import Conflict, EngramError, ValidationFailed
from engram_core.es.client import admin_client
from engram_core.es.schema import SOURCE_WITH_VECTORS, MemoryType, alias_name, ensure_indices
from tenants.models import Tenant
from tenants.selectors import index_prefix_for
from tenants.services.audit import Actor, audit_record
from tenants.services.clients import clear_caches

log = logging.getLogger(__name__)


class MoveFailed(EngramError):
    code, status = "isolation_move_failed", 500


@dataclass
class MoveResult:
    tenant: str
    source: str  # mode moved from
    target: str  # mode moved to (the tenant's mode afterwards)
    copied: dict[str, int] = field(default_factory=dict)  # memory type -> documents copied
    removed: int = 0  # old copies removed


def tenant_indices_ensure(*, tenant: Tenant, es: Elasticsearch | None = None) -> None:
    """Create or migrate a dedicated tenant's own indices (nothing to do for a shared tenant)."""
    if tenant.isolation == Tenant.Isolation.DEDICATED:
        ensure_indices(es=es or admin_client(), prefix=index_prefix_for(tenant=tenant))


def dedicated_indices_ensure(*, es: Elasticsearch | None = None) -> list[str]:
    """``tenant_indices_ensure`` for every dedicated tenant (``es_setup`` runs it on every deploy).
    Returns their index prefixes."""
    prefixes = []
    for tenant in Tenant.objects.filter(isolation=Tenant.Isolation.DEDICATED).order_by("pk"):
        tenant_indices_ensure(tenant=tenant, es=es)
        prefixes.append(index_prefix_for(tenant=tenant))
    return prefixes


def tenant_isolation_set(*, tenant: Tenant, isolation: str, actor: Actor, batch_size: int = 500,
                         take_over: bool = False) -> MoveResult:
    """Put ``tenant``'s memories in ``isolation`` mode, moving them if needed (see the module doc).

    Calling it for the mode the tenant is already in removes any copies a failed earlier move
    left behind. One move of a tenant at a time: while one runs, another (or a clean-up) is
    refused with Conflict ``isolation_move_running``; ``take_over`` runs anyway, for a move whose
    process died. Raises ValidationFailed for an unknown mode, MoveFailed when the copy does not
    verify (nothing changed then), and lets Elasticsearch errors through (ditto before the switch).
    """
    if isolation not in Tenant.Isolation.values:
        raise ValidationFailed(f"isolation must be one of {', '.join(Tenant.Isolation.values)}",
                               details={"field": "isolation"}, code="invalid_isolation")
    es = admin_client()
    tenant = Tenant.objects.get(pk=tenant.pk)
    other = next(m for m in Tenant.Isolation.values if m != isolation)
    # Claimed in one statement: of two moves started at once, one runs. Writes wait from now on.
    running = Tenant.objects.filter(pk=tenant.pk) if take_over else Tenant.objects.filter(pk=tenant.pk,
                                                                                           isolation_moving_to="")
    if not running.update(isolation_moving_to=isolation if tenant.isolation != isolation else tenant.isolation):
        raise Conflict(f"a move of {tenant.slug} to {tenant.isolation_moving_to} indices is running; if its process "
                       "died, take it over", code="isolation_move_running",
                       details={"moving_to": Tenant.objects.get(pk=tenant.pk).isolation_moving_to})
    if tenant.isolation == isolation:
        try:
            tenant_indices_ensure(tenant=tenant, es=es)
            removed = _remove_copies(es, tenant=tenant, prefix=index_prefix_for(tenant=tenant, isolation=other))
        finally:
            Tenant.objects.filter(pk=tenant.pk).update(isolation_moving_to="")
        return MoveResult(tenant=tenant.slug, source=isolation, target=isolation, removed=removed)

    source, target = index_prefix_for(tenant=tenant), index_prefix_for(tenant=tenant, isolation=isolation)
    result = MoveResult(tenant=tenant.slug, source=tenant.isolation, target=isolation)
    try:
        _remove_copies(es, tenant=tenant, prefix=target)  # a failed earlier move's partial copy
        if isolation == Tenant.Isolation.DEDICATED:
            ensure_indices(es=es, prefix=target)
        for memory_type in MemoryType:
            result.copied[memory_type.value] = _copy(es, tenant=tenant, memory_type=memory_type, source=source,
                                                     target=target, batch_size=batch_size)
    except BaseException:
        try:
            _remove_copies(es, tenant=tenant, prefix=target)
        finally:
            Tenant.objects.filter(pk=tenant.pk).update(isolation_moving_to="")
        raise
    with transaction.atomic():
        Tenant.objects.filter(pk=tenant.pk).update(isolation=isolation, isolation_moving_to="")
        audit_record(actor=actor, action="tenant.isolation_changed", tenant=tenant,
                     details={"from": result.source, "to": isolation, "copied": result.copied})
    # Keys and cached clients name the old indices: drop the cache; keys rotate on next use
    # (their index prefix no longer matches the tenant's).
    clear_caches()
    tenant.isolation = isolation
    result.removed = _remove_copies(es, tenant=tenant, prefix=source)
    return result


def _tenant_query(tenant: Tenant) -> dict:
    return {"term": {"tenant_id": tenant.slug}}


def _count(es: Elasticsearch, index: str, tenant: Tenant) -> int:
    return es.count(index=index, query=_tenant_query(tenant))["count"]


def _copy(es: Elasticsearch, *, tenant: Tenant, memory_type: MemoryType, source: str, target: str,
          batch_size: int) -> int:
    """Copy one memory type's documents of ``tenant`` and verify that every one read is there; returns
    how many. (Not against a count of the source: a write still landing there, which started
    before the move, would fail the move; that write puts itself into the outbox, to be applied
    again after the switch, ``memory_app.services.store.subject_write_confirm``.)"""
    src, dst = alias_name(memory_type, prefix=source), alias_name(memory_type, prefix=target)
    es.indices.refresh(index=src)
    expected = 0
    for batch in _batches(es, src=src, dst=dst, tenant=tenant, size=batch_size):
        expected += len(batch)
        _index_batch(es, batch)
    es.indices.refresh(index=dst)
    actual = _count(es, dst, tenant)
    if actual != expected:
        raise MoveFailed(f"copied {actual} of {expected} {memory_type.value} documents; tenant not moved",
                         details={"memory_type": memory_type.value, "expected": expected, "copied": actual})
    return actual


def _batches(es: Elasticsearch, *, src: str, dst: str, tenant: Tenant, size: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for hit in helpers.scan(es, index=src, size=size,
                            query={"query": _tenant_query(tenant), "sort": ["_doc"], "_source": SOURCE_WITH_VECTORS}):
        batch.append({"_op_type": "index", "_index": dst, "_id": hit["_id"], "_source": hit["_source"]})
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _index_batch(es: Elasticsearch, actions: list[dict]) -> int:
    ok, errors = helpers.bulk(es, actions, raise_on_error=False)
    if errors:
        raise MoveFailed(f"{len(errors)} document(s) could not be copied; tenant not moved",
                         details={"first_error": str(errors[0])[:300]})
    return ok


def _remove_copies(es: Elasticsearch, *, tenant: Tenant, prefix: str) -> int:
    """Remove ``tenant``'s documents under ``prefix``: its own indices are dropped whole, in the
    shared ones its documents are deleted (scan + bulk; the CI node has no _delete_by_query)."""
    if prefix == index_prefix_for(tenant=tenant, isolation=Tenant.Isolation.DEDICATED):
        aliases = [alias_name(t, prefix=prefix) for t in MemoryType]
        found = es.options(ignore_status=404).indices.get_alias(name=",".join(aliases)).body
        indices = [index for index, info in found.items() if isinstance(info, dict) and info.get("aliases")]
        if not indices:
            return 0
        es.indices.refresh(index=",".join(indices))
        removed = _count(es, ",".join(indices), tenant)
        # Dropped whole only when they hold this tenant's documents alone (a tenant created before
        # slugs were unique whatever their case could share them): otherwise its documents only.
        if es.count(index=",".join(indices), query={"bool": {"must_not": [_tenant_query(tenant)]}})["count"] == 0:
            es.indices.delete(index=",".join(indices))
            return removed
    removed = 0
    for memory_type in MemoryType:
        alias = alias_name(memory_type, prefix=prefix)
        if not es.options(ignore_status=404).indices.exists_alias(name=alias):
            continue
        es.indices.refresh(index=alias)
        while ids := [h["_id"] for h in helpers.scan(es, index=alias, size=1000,
                                                     query={"query": _tenant_query(tenant), "_source": False})]:
            ok, errors = helpers.bulk(es, ({"_op_type": "delete", "_index": alias, "_id": i} for i in ids),
                                      raise_on_error=False, refresh=True)
            if not ok:
                raise MoveFailed("old copies could not be removed; run the move again",
                                 details={"first_error": str(errors[:1])[:300]})
            removed += ok
    return removed
