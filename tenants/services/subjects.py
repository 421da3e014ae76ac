"""End-users of a tenant: a new one is created with its DLS key minted, in one transaction."""

from __future__ import annotations

from django.db import transaction

from engram_core.errors import ValidationFailed
from engram_core.validation import clean_external_id
from tenants.models import Subject, Tenant
from tenants.selectors import subject_find
from tenants.services.audit import Actor, audit_record
from tenants.services.guard import keys_supported
from tenants.services.keys import subject_key_mint


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
            if keys_supported():
                subject_key_mint(subject=subject, actor=actor)
    return subject
