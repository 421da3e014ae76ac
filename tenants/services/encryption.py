"""Rotation of the Fernet key that encrypts stored API-key secrets."""

from __future__ import annotations

from django.db import transaction

from tenants import crypto
from tenants.models import SubjectKey, WriterKey
from tenants.services.audit import Actor, audit_record
from tenants.services.clients import clear_caches


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
