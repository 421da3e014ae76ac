"""Reads about tenants, end-users and staff roles. Plain functions, keyword-only."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from engram_core.errors import NotFound
from engram_core.es.schema import shared_prefix

from . import audit_chain
from .models import AuditEvent, Membership, Subject, Tenant


class SubjectGone(NotFound):
    """The end-user is being erased, or was: the same answer as an unknown one (``subject_get``),
    raised to whoever still held them (a request, a consolidation run) and would write or mint."""

    @classmethod
    def of(cls, subject: Subject) -> SubjectGone:
        return cls("unknown end-user", details={"external_id": subject.external_id})


def subject_get(*, tenant: Tenant, external_id: str) -> Subject:
    """The end-user ``external_id`` of ``tenant``.

    Raises NotFound, with the same code and message whether the end-user does not exist or
    belongs to another tenant, so a caller cannot probe other tenants' end-users.
    """
    subject = subject_find(tenant=tenant, external_id=external_id)
    if subject is None:
        raise NotFound("unknown end-user", details={"external_id": external_id})
    return subject


def subject_find(*, tenant: Tenant, external_id: str) -> Subject | None:
    """The end-user ``external_id`` of ``tenant``, or None. Read without a join: the subject's
    ``tenant`` is the one given (every caller's is read just before: a request's with its token,
    an outbox entry's with the entry)."""
    subject = next(iter(Subject.objects.filter(tenant=tenant, external_id=external_id)[:1]), None)
    if subject is not None:
        subject.tenant = tenant
    return subject


def index_prefix_for(*, tenant: Tenant, isolation: str | None = None) -> str:
    """The index prefix holding ``tenant``'s memories: the shared one, or for a dedicated tenant
    its own, derived from the shared prefix and the tenant id (``<prefix>-t-<slug>``).
    ``isolation`` overrides the tenant's current mode (a move computes both ends)."""
    mode = isolation or tenant.isolation
    if mode == Tenant.Isolation.DEDICATED:
        return f"{shared_prefix()}-t-{tenant.slug.lower()}"
    return shared_prefix()


def memory_scope(*, subject: Subject) -> dict[str, str]:
    """The ``tenant_id``/``user_id`` every memory of ``subject`` carries.

    Derived from the subject alone: write paths stamp these over whatever a request body
    says, so a body cannot place a memory in another tenant or under another end-user.
    """
    return {"tenant_id": subject.tenant.slug, "user_id": str(subject.user_id)}


def memory_scope_filter(*, subject: Subject, include_shared: bool = True) -> dict:
    """An Elasticsearch query admitting exactly what ``subject`` may read.

    ``tenant_id == T AND (user_id == U OR user_id missing)``; with ``include_shared=False``
    only the subject's own documents (no tenant-wide catalog). This is the DLS query of the
    subject's API key and the code-level second guard of every read.
    """
    scope = memory_scope(subject=subject)
    own = {"term": {"user_id": scope["user_id"]}}
    if not include_shared:
        return {"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}}, own]}}
    return {
        "bool": {
            "filter": [{"term": {"tenant_id": scope["tenant_id"]}}],
            "should": [own, {"bool": {"must_not": {"exists": {"field": "user_id"}}}}],
            "minimum_should_match": 1,
        }
    }


def staff_tenant_ids(*, user: AbstractBaseUser | AnonymousUser,
                     roles: Iterable[str] | None = None) -> set[int]:
    """Ids of the tenants where ``user`` holds one of ``roles`` (any role when None).

    Superusers are not special-cased here: callers decide what "all tenants" means for them.
    """
    if not user.is_authenticated or not user.is_active or not user.is_staff:
        return set()
    memberships = Membership.objects.filter(user=user)
    if roles is not None:
        memberships = memberships.filter(role__in=list(roles))
    return set(memberships.values_list("tenant_id", flat=True))


# ---------------------------------------------------------------- audit log

def audit_events(*, tenant_slugs: Iterable[str], actor: str = "", action: str = "", subject_ref: str = "",
                 since: datetime | None = None, until: datetime | None = None) -> QuerySet[AuditEvent]:
    """Audit events of the given tenants, newest first, filtered (actor and action: prefix
    match, ``subject_ref`` exact, date range inclusive)."""
    events = AuditEvent.objects.filter(tenant_slug__in=list(tenant_slugs))
    if actor:
        events = events.filter(actor__startswith=actor)
    if action:
        events = events.filter(action__startswith=action)
    if subject_ref:
        events = events.filter(subject_ref=subject_ref)
    if since:
        events = events.filter(created_at__gte=since)
    if until:
        events = events.filter(created_at__lte=until)
    return events.order_by("-created_at", "-id")


def audit_export_record(event: AuditEvent) -> dict:
    """One event as exported: the hashed fields plus the links, enough to verify it offline."""
    return {"id": event.pk, **event.chain_fields(), "prev_hash": event.prev_hash, "hash": event.hash}


def audit_chain_verify(*, chain: str) -> audit_chain.ChainReport:
    """Recompute the tenant's audit chain (``chain`` = tenant slug) from its first event and
    report the first broken link: a changed, removed or re-ordered event."""
    records = (audit_export_record(e) for e in AuditEvent.objects.filter(chain=chain).order_by("seq").iterator())
    return audit_chain.chain_verify_records(records, chain=chain)
