"""End-users of a tenant: a new one is created with its DLS key minted, in one transaction."""

from __future__ import annotations

from django.db import transaction

from engram_core.validation import new_external_id_check
from tenants.models import Subject, Tenant
from tenants.selectors import subject_find
from tenants.services.audit import Actor, audit_record
from tenants.services.guard import keys_supported
from tenants.services.keys import KeyLifetimes, subject_key_mint


def subject_get_or_create(*, tenant: Tenant, external_id: str, display_name: str = "",
                          actor: Actor = "api", lifetimes: KeyLifetimes) -> Subject:
    """The end-user ``external_id`` of ``tenant``, created (with its DLS key minted) if new.

    ``external_id`` is cleaned at the edge (``clean_external_id``). Creation and minting are one
    transaction: if the key cannot be minted the end-user is not created (ServiceUnavailable is
    raised). A new end-user's id must be addressable in the API's URLs (``new_external_id_check``:
    ValidationFailed otherwise). ``lifetimes``: the new key's, read by the caller at its entry (a
    write's acceptance, a replay, a command).
    """
    existing = subject_find(tenant=tenant, external_id=external_id)
    if existing:
        return existing
    new_external_id_check(external_id)
    with transaction.atomic():
        subject, created = Subject.objects.select_related("tenant").get_or_create(
            tenant=tenant, external_id=external_id, defaults={"display_name": display_name})
        if created:
            audit_record(actor=actor, action="subject.created", subject=subject, target_id=str(subject.user_id))
            if keys_supported():
                subject_key_mint(subject=subject, actor=actor, lifetimes=lifetimes)
    return subject
