"""Keys from the environment: Fernet tokens for secrets at rest under ``ENGRAM_ENCRYPTION_KEYS``,
the audit log's HMAC link keys (``ENGRAM_AUDIT_KEYS``) and its Ed25519 signing keys
(``ENGRAM_AUDIT_SIGNING_KEYS``, with the public keys of retired ones in ``ENGRAM_AUDIT_PUBLIC_KEYS``).

The first encryption key encrypts; every listed key decrypts, so a new key can be put first, stored
secrets re-encrypted (``manage.py rotate_encryption_key``) and the old key dropped afterwards.
"""

from __future__ import annotations

import base64
import binascii
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tenants.audit_chain import Keyring, KeyringError, PublicKeys, SigningKeys


def _fernet_key(raw: str) -> bytes:
    # Accept the key with or without base64 padding: `secrets.token_urlsafe(32)` (what
    # scripts/stack.py generates) is a Fernet key minus its trailing "=".
    raw = raw.strip()
    padded = raw + "=" * (-len(raw) % 4)
    try:
        if len(base64.urlsafe_b64decode(padded)) != 32:
            raise ValueError
    except (ValueError, binascii.Error):
        raise ImproperlyConfigured(
            "ENGRAM_ENCRYPTION_KEYS holds a key that is not 32 url-safe base64-encoded bytes (generate one "
            "with `python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)"
        ) from None
    return padded.encode()


@functools.cache
def _multi_fernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise ImproperlyConfigured("ENGRAM_ENCRYPTION_KEYS is empty: Engram cannot store API key secrets")
    return MultiFernet([Fernet(_fernet_key(k)) for k in keys])


def _configured() -> MultiFernet:
    return _multi_fernet(tuple(k for k in settings.ENGRAM_ENCRYPTION_KEYS if k.strip()))


def encrypt(plaintext: str) -> str:
    return _configured().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """Raises ImproperlyConfigured when no configured key can decrypt (a key was dropped too early)."""
    try:
        return _configured().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "a stored secret cannot be decrypted with any key in ENGRAM_ENCRYPTION_KEYS "
            "(was a key removed before `rotate_encryption_key` ran?)"
        ) from None


def reencrypt(token: str) -> str:
    """The same secret, encrypted under the primary (first) key."""
    try:
        return _configured().rotate(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "a stored secret cannot be decrypted with any key in ENGRAM_ENCRYPTION_KEYS"
        ) from None


def audit_keyring() -> Keyring:
    """``ENGRAM_AUDIT_KEYS`` as a keyring (the key valid at an event's time signs it; each verifies
    inside its window). Raises ImproperlyConfigured when there is none, one is too short or the
    windows are wrong: an unsigned event is no evidence."""
    return _configured_keys(Keyring.from_secrets, tuple(settings.ENGRAM_AUDIT_KEYS))


def audit_signing_keys() -> SigningKeys:
    """``ENGRAM_AUDIT_SIGNING_KEYS``: the Ed25519 keys that sign checkpoints and exports. Raises
    ImproperlyConfigured when there is none or one is malformed."""
    return _configured_keys(SigningKeys.from_entries, tuple(settings.ENGRAM_AUDIT_SIGNING_KEYS))


def audit_public_keys() -> PublicKeys:
    """Every public key a checkpoint or export may be signed with: the signing keys' and the retired
    ones of ``ENGRAM_AUDIT_PUBLIC_KEYS``, each with its window (what auditors are given)."""
    retired = _configured_keys(PublicKeys.from_entries, tuple(settings.ENGRAM_AUDIT_PUBLIC_KEYS))
    return audit_signing_keys().public().merged(retired, source="ENGRAM_AUDIT_SIGNING_KEYS or ENGRAM_AUDIT_PUBLIC_KEYS")


@functools.cache
def _configured_keys(parse, entries: tuple[str, ...]):
    try:
        return parse(entries)
    except KeyringError as exc:
        raise ImproperlyConfigured(str(exc)) from None
