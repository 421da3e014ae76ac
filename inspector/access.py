"""Who may do what in the inspector: the role matrix, enforced on the server.

Answers, for every view: the tenant or end-user is not among the staff user's tenants -> 404
(the same as missing, so other tenants cannot be probed); it is, but no role of theirs there
allows the permission -> 403. Superusers hold every permission in every tenant.
"""

from __future__ import annotations

import uuid

from django.core.exceptions import PermissionDenied
from django.http import Http404

from tenants.models import Membership, Subject, Tenant
from tenants.selectors import staff_tenant_ids

R = Membership.Role
ALL_ROLES = frozenset({R.SUPPORT, R.TENANT_ADMIN, R.COMPLIANCE})

# permission -> roles holding it (superusers hold all). The README's role matrix is this table.
MATRIX: dict[str, frozenset[str]] = {
    "home": ALL_ROLES,
    "subject.view": ALL_ROLES,  # memories, chains, playbooks, catalog
    "subject.recall": ALL_ROLES,  # the "what would the agent recall?" sandbox
    "memory.forget": frozenset({R.SUPPORT, R.TENANT_ADMIN}),
    # The consolidation panel itself is "subject.view" (compliance reads it); a dry run writes
    # nothing but shows proposed facts, a run writes memory.
    "consolidation.dry_run": frozenset({R.SUPPORT, R.TENANT_ADMIN}),
    "consolidation.run": frozenset({R.TENANT_ADMIN}),
    "subject.export": frozenset({R.TENANT_ADMIN, R.COMPLIANCE}),
    "subject.erase": frozenset({R.TENANT_ADMIN}),
    "keys.view": frozenset({R.TENANT_ADMIN}),
    "keys.manage": frozenset({R.TENANT_ADMIN}),
    "usage.view": frozenset({R.TENANT_ADMIN}),  # requests, memories stored, runs, LLM tokens per day  # rotate/revoke keys, create/revoke agent tokens
    "audit.view": frozenset({R.COMPLIANCE}),  # audit log, staff access log, chain verification
    "audit.export": frozenset({R.COMPLIANCE}),
    "audit.checkpoint": frozenset({R.COMPLIANCE}),  # sign a checkpoint of the tenant's chain now
}


def tenants_for(user, permission: str) -> list[Tenant]:
    """The tenants where ``user`` holds ``permission``, by name."""
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_superuser:
        return list(Tenant.objects.order_by("name"))
    return list(Tenant.objects.filter(pk__in=staff_tenant_ids(user=user, roles=MATRIX[permission])).order_by("name"))


def allowed(user, tenant: Tenant, permission: str) -> bool:
    if user.is_superuser:
        return user.is_active
    return tenant.pk in staff_tenant_ids(user=user, roles=MATRIX[permission])


def permissions_in(user, tenant: Tenant) -> set[str]:
    """Every permission ``user`` holds in ``tenant`` (templates show only what is allowed)."""
    if user.is_superuser:
        return set(MATRIX)
    roles = set(Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True))
    return {p for p, holders in MATRIX.items() if roles & holders}


def _check(user, tenant: Tenant, permission: str) -> None:
    if user.is_superuser and user.is_active:
        return
    if tenant.pk not in staff_tenant_ids(user=user):
        raise Http404("no such tenant")
    if not allowed(user, tenant, permission):
        raise PermissionDenied(f"your role in {tenant.name} does not allow this")


def tenant_for(user, slug: str, permission: str) -> Tenant:
    """The tenant ``slug`` if ``user`` holds ``permission`` there; 404 when it is not one of
    theirs (or does not exist), 403 when it is but the role does not allow it."""
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise Http404("no such tenant")
    _check(user, tenant, permission)
    return tenant


def subject_for(user, user_id: uuid.UUID, permission: str) -> Subject:
    """The end-user ``user_id`` if ``user`` holds ``permission`` in its tenant; 404/403 as above."""
    subject = Subject.objects.select_related("tenant").filter(user_id=user_id).first()
    if subject is None:
        raise Http404("no such end-user")
    _check(user, subject.tenant, permission)
    return subject
