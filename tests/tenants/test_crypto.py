"""Secrets at rest and rotation of the encryption key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from tenants import crypto
from tenants.models import AuditEvent, SubjectKey
from tenants.services.clients import subject_es_client
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes


def test_round_trip_and_older_keys_still_decrypt(settings):
    old = Fernet.generate_key().decode()
    settings.ENGRAM_ENCRYPTION_KEYS = [old]
    token = crypto.encrypt("s3cret")
    settings.ENGRAM_ENCRYPTION_KEYS = [Fernet.generate_key().decode(), old]

    assert token != "s3cret" and crypto.decrypt(token) == "s3cret"


def test_unpadded_keys_are_accepted(settings):
    key = Fernet.generate_key().decode()
    settings.ENGRAM_ENCRYPTION_KEYS = [key.rstrip("=")]
    assert Fernet(key.encode()).decrypt(crypto.encrypt("x").encode()) == b"x"


@pytest.mark.parametrize("keys", [[], ["not-a-key"]])
def test_missing_or_malformed_keys_are_a_configuration_error(settings, keys):
    settings.ENGRAM_ENCRYPTION_KEYS = keys
    with pytest.raises(ImproperlyConfigured):
        crypto.encrypt("x")


def test_rotate_encryption_key_rewrites_every_secret_under_the_new_key(tenant, es_prefix, settings, capsys):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    old_key = settings.ENGRAM_ENCRYPTION_KEYS[0]
    before = SubjectKey.objects.get(subject=subject).secret_encrypted
    new_key = Fernet.generate_key().decode()
    settings.ENGRAM_ENCRYPTION_KEYS = [new_key, old_key]

    call_command("rotate_encryption_key")

    assert "re-encrypted 1 secret(s)" in capsys.readouterr().out
    after = SubjectKey.objects.get(subject=subject).secret_encrypted
    assert after != before
    assert Fernet(new_key.encode()).decrypt(after.encode()) == Fernet(old_key.encode()).decrypt(before.encode())
    settings.ENGRAM_ENCRYPTION_KEYS = [new_key]  # the old key can now be dropped
    subject_es_client(subject=subject).search(index=f"{es_prefix}-semantic")
    assert AuditEvent.objects.filter(action="encryption_key.rotated", details__secrets=1).exists()


def test_a_dropped_key_is_reported_not_silently_ignored(tenant, es_prefix, settings):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    settings.ENGRAM_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(ImproperlyConfigured, match="cannot be decrypted"):
        subject_es_client(subject=subject)
