"""Tamper evidence for the audit log: keyed hash chains, public-key-signed checkpoints and exports.

Plain Python on plain dicts (and the ``cryptography`` package), so that an export verifies offline
with this module and the public keys alone:
``python -m tenants.audit_chain --public-key audit-public-keys.json export.jsonl``.

- Each event's ``hash`` is HMAC-SHA256 under an audit key (``ENGRAM_AUDIT_KEYS``) over the
  previous event's hash and the event's fields: only Engram, which holds the keys, can make or
  recompute one.
- Each checkpoint pins a chain's length and head hash and the SHA-256 of every event since the
  checkpoint before it, and is signed with Ed25519 (``ENGRAM_AUDIT_SIGNING_KEYS``): anyone with
  the public key checks it, nobody without the private key makes one.
- An export is signed with Ed25519 over every line.
- Every key has a validity window (``from=``, and ``retired=`` once rotated out): a key proves
  only what was made inside its window.

The verifier refuses what it cannot prove: an export without its header or signed end line, an
unkeyed event after the chain was keyed, a keyed chain whose keying event no checkpoint pinned at
once, a signature by a key outside its window. What each check detects and how keys rotate:
docs/compliance.md.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import io
import hmac
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM = ("event hash = HMAC-SHA256(audit key, prev_hash + '\\n' + canonical_json(fields)); checkpoint and "
             "export signatures = Ed25519; checkpoint events_sha256 = SHA-256 over each event since the previous "
             "checkpoint: canonical_json(fields) + '\\n' + prev_hash + '\\n' + hash + '\\n'")
GENESIS = "0" * 64
# A secret shorter than this is refused: the keys are what an attacker holding the database lacks.
MIN_KEY_CHARS = 32
# The keying event (a chain's first keyed event) is pinned by a checkpoint written when it is
# committed; a first checkpoint written later than this leaves the chain before it unproven.
KEYING_PIN_SECONDS = 60
# The fields an event's hash covers, in the export under these names; keyed events add their key id.
LEGACY_FIELDS = ("chain", "seq", "created_at", "actor_type", "actor", "action", "tenant_slug", "subject_ref",
                 "target_id", "details")
KEYED_FIELDS = (*LEGACY_FIELDS, "key_id")
CHECKPOINT_FIELDS = ("chain", "seq", "head_hash", "created_at", "previous_seq", "previous_signature", "key_id",
                     "keyed_at", "events_sha256")
# The JSON type of each field a verifier reads: a value of another type is a forgery it reports,
# never one it trips over (whoever holds the database or the file may write anything).
EVENT_TYPES: dict[str, type | tuple[type, ...]] = {
    "chain": str, "seq": int, "created_at": str, "prev_hash": str, "hash": str, "key_id": (str, type(None))}
CHECKPOINT_TYPES: dict[str, type | tuple[type, ...]] = {
    "chain": str, "seq": int, "head_hash": str, "created_at": str, "previous_seq": int, "previous_signature": str,
    "key_id": str, "keyed_at": int, "events_sha256": str, "signature": str}
EXPORT_VERSION = 3
# Each kind of signature names its purpose, so one can never stand for another.
_CHECKPOINT_LABEL = "engram audit checkpoint v2\n"
_EXPORT_LABEL = "engram audit export v3\n"


class KeyringError(ValueError):
    """The configured audit keys cannot be used (none, one too short, a bad window)."""


def _utf8(text: str) -> bytes:
    """``text``'s UTF-8 bytes, a lone surrogate included (a JSON "\\ud800" escape in a hostile
    export or row reads as one): what is signed or hashed never holds one, so such a field fails
    its check with a report instead of raising UnicodeEncodeError."""
    return text.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------- keys and their windows


def moment(value: Any) -> datetime | None:
    """An ISO 8601 time as an aware datetime (UTC when it names no offset); None when unreadable."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Window:
    """When a key may have signed: from ``valid_from`` (inclusive) until ``retired_at`` (exclusive);
    None is open."""

    valid_from: datetime | None = None
    retired_at: datetime | None = None

    def holds(self, at: datetime | None) -> bool:
        if at is None:
            return False
        return (self.valid_from is None or at >= self.valid_from) and (self.retired_at is None or at < self.retired_at)

    def describe(self) -> str:
        start = self.valid_from.isoformat() if self.valid_from else "the start"
        return f"{start} to {self.retired_at.isoformat() if self.retired_at else 'now'}"

    def as_dict(self) -> dict[str, str | None]:
        return {"valid_from": self.valid_from.isoformat() if self.valid_from else None,
                "retired_at": self.retired_at.isoformat() if self.retired_at else None}


def parse_key_entries(entries: Iterable[str], *, setting: str) -> list[tuple[str, Window]]:
    """``value [from=<ISO time>] [retired=<ISO time>]`` entries (one per key, as the settings hold
    them): the values and their windows. Raises KeyringError on an unknown attribute or bad time."""
    parsed = []
    for entry in entries:
        words = entry.split()
        if not words:
            continue
        value, bounds = words[0], {}
        for word in words[1:]:
            name, _, text = word.partition("=")
            if name not in ("from", "retired") or name in bounds:
                raise KeyringError(f"{setting}: a key's attributes are from=<time> and retired=<time>, not {word!r}")
            if (bounds.setdefault(name, moment(text))) is None:
                raise KeyringError(f"{setting}: {word!r} is not an ISO 8601 time")
        window = Window(bounds.get("from"), bounds.get("retired"))
        if window.valid_from and window.retired_at and window.retired_at <= window.valid_from:
            raise KeyringError(f"{setting}: a key is retired before it is valid ({word!r})")
        parsed.append((value, window))
    if sum(w.retired_at is None for _, w in parsed) > 1:
        raise KeyringError(f"{setting}: more than one key without retired=<time>: a key rotated out must say when, "
                           "or it still proves whatever it signs")
    return parsed


def _signer_at(windows: Mapping[str, Window], order: tuple[str, ...], at: datetime, setting: str) -> str:
    """The key that signs at ``at``: of those whose window holds it, the latest to become valid."""
    valid = [kid for kid in order if windows[kid].holds(at)]
    if not valid:
        raise KeyringError(f"{setting}: no key is valid at {at.isoformat()}")
    earliest = datetime.min.replace(tzinfo=UTC)
    return max(valid, key=lambda kid: (windows[kid].valid_from or earliest, -order.index(kid)))


def _window_problem(what: str, kid: str, windows: Mapping[str, Window], at: Any, setting: str) -> str:
    if kid not in windows:
        return f"{what} is signed with key id {kid!r}, which is not in {setting}: forged, or its key was dropped"
    when = moment(at)
    if not windows[kid].holds(when):
        return (f"{what} is signed with key id {kid!r} at {at}, outside that key's window ({windows[kid].describe()}): "
                "a retired or not yet valid key signed it")
    return ""


def key_id(secret: str) -> str:
    """The public name of an audit link key: derived from it, so a key list needs no names of its own."""
    return hmac.new(secret.encode(), b"engram audit key id", hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True)
class Keyring:
    """The link keys (HMAC, secret): the key valid at an event's time signs it; a key verifies only
    events made inside its window."""

    keys: Mapping[str, bytes]
    windows: Mapping[str, Window]
    order: tuple[str, ...]

    SETTING = "ENGRAM_AUDIT_KEYS"

    @classmethod
    def from_secrets(cls, entries: Iterable[str]) -> Keyring:
        parsed = parse_key_entries(entries, setting=cls.SETTING)
        if not parsed:
            raise KeyringError("ENGRAM_AUDIT_KEYS is empty: the audit log cannot be signed or verified")
        if any(len(secret) < MIN_KEY_CHARS for secret, _ in parsed):
            raise KeyringError(f"ENGRAM_AUDIT_KEYS holds a key shorter than {MIN_KEY_CHARS} characters")
        kids = tuple(key_id(secret) for secret, _ in parsed)
        return cls(keys={key_id(s): s.encode() for s, _ in parsed}, windows=dict(zip(kids, (w for _, w in parsed))),
                   order=kids)

    def signer(self, at: datetime) -> str:
        return _signer_at(self.windows, self.order, at, self.SETTING)

    @property
    def primary(self) -> str:
        """The key signing now."""
        return self.signer(datetime.now(UTC))

    def sign(self, message: str, *, kid: str) -> str:
        """HMAC-SHA256 of ``message`` under key ``kid``; KeyError if absent."""
        return hmac.new(self.keys[kid], _utf8(message), hashlib.sha256).hexdigest()

    def problem(self, what: str, kid: str, at: Any) -> str:
        return _window_problem(what, kid, self.windows, at, self.SETTING)


def public_key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(b"engram audit signing key\n" + raw).hexdigest()[:16]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str, *, setting: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != 32:
        raise KeyringError(f"{setting} holds a key that is not 32 url-safe base64-encoded bytes")
    return raw


@dataclass(frozen=True)
class PublicKeys:
    """Ed25519 public keys with their windows: what an auditor needs, and all he needs."""

    keys: Mapping[str, Ed25519PublicKey]
    windows: Mapping[str, Window]
    source: str = "the public keys given"  # named in a problem: where the keys came from

    @classmethod
    def from_entries(cls, entries: Iterable[str], *, setting: str = "ENGRAM_AUDIT_PUBLIC_KEYS") -> PublicKeys:
        keys, windows = {}, {}
        for value, window in parse_key_entries(entries, setting=setting):
            public = Ed25519PublicKey.from_public_bytes(_unb64(value, setting=setting))
            keys[public_key_id(public)], windows[public_key_id(public)] = public, window
        return cls(keys, windows, setting)

    @classmethod
    def from_file(cls, path: str | Path) -> PublicKeys:
        """A key file as ``manage.py audit_public_keys`` writes it (JSON), or one PEM public key
        (valid at any time: the JSON form carries the windows)."""
        text = Path(path).read_text(encoding="utf-8")
        if text.lstrip().startswith("-----BEGIN"):
            public = serialization.load_pem_public_key(text.encode())
            if not isinstance(public, Ed25519PublicKey):
                raise KeyringError(f"{path} does not hold an Ed25519 public key")
            return cls({public_key_id(public): public}, {public_key_id(public): Window()}, "the public keys given")
        try:
            listed = json.loads(text)["keys"]
        except (ValueError, KeyError, TypeError):
            raise KeyringError(f"{path} is neither a PEM public key nor an Engram public key file") from None
        entries = []
        for k in listed:
            words = [k["public_key"]]
            words += [f"from={k['valid_from']}"] if k.get("valid_from") else []
            words += [f"retired={k['retired_at']}"] if k.get("retired_at") else []
            entries.append(" ".join(words))
        read = cls.from_entries(entries, setting=str(path))
        keys = cls(read.keys, read.windows, "the public keys given")
        if stated := [k["key_id"] for k in listed if k.get("key_id") and k["key_id"] not in keys.keys]:
            raise KeyringError(f"{path}: key ids {stated} do not match their public keys")
        return keys

    def merged(self, other: PublicKeys, *, source: str | None = None) -> PublicKeys:
        return PublicKeys({**other.keys, **self.keys}, {**other.windows, **self.windows}, source or self.source)

    def as_json(self) -> dict[str, Any]:
        return {"algorithm": "Ed25519", "keys": [
            {"key_id": kid, "public_key": _b64(pub.public_bytes(serialization.Encoding.Raw,
                                                                serialization.PublicFormat.Raw)),
             **self.windows[kid].as_dict()} for kid, pub in sorted(self.keys.items())]}

    def problem(self, what: str, kid: str, at: Any, message: bytes, signature: Any) -> str:
        """'' when ``signature`` (hex) is ``kid``'s over ``message`` and ``at`` is inside its window."""
        if why := _window_problem(what, kid, self.windows, at, self.source):
            return why
        try:
            raw = bytes.fromhex(str(signature))
            # Only the text Engram writes (lower-case hex): fromhex also reads upper case and white
            # space, so an edited signature would otherwise verify.
            if raw.hex() != signature:
                raise ValueError(signature)
            self.keys[kid].verify(raw, message)
        except (InvalidSignature, ValueError):
            return f"{what} is not signed by its key (key id {kid}): forged or changed"
        return ""


@dataclass(frozen=True)
class SigningKeys:
    """Ed25519 private keys with their windows (``ENGRAM_AUDIT_SIGNING_KEYS``): the key valid at
    the moment signs. A retired key's private part is destroyed; its public part stays in
    ``ENGRAM_AUDIT_PUBLIC_KEYS`` so what it signed still verifies."""

    keys: Mapping[str, Ed25519PrivateKey]
    windows: Mapping[str, Window]
    order: tuple[str, ...]

    SETTING = "ENGRAM_AUDIT_SIGNING_KEYS"

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> SigningKeys:
        parsed = parse_key_entries(entries, setting=cls.SETTING)
        if not parsed:
            raise KeyringError("ENGRAM_AUDIT_SIGNING_KEYS is empty: checkpoints and exports cannot be signed")
        privates = [Ed25519PrivateKey.from_private_bytes(_unb64(v, setting=cls.SETTING)) for v, _ in parsed]
        kids = tuple(public_key_id(p.public_key()) for p in privates)
        return cls(dict(zip(kids, privates)), dict(zip(kids, (w for _, w in parsed))), kids)

    def signer(self, at: datetime) -> str:
        return _signer_at(self.windows, self.order, at, self.SETTING)

    def sign(self, message: bytes, *, at: datetime) -> tuple[str, str]:
        """(key id, hex signature) of ``message`` by the key valid at ``at``."""
        kid = self.signer(at)
        return kid, self.keys[kid].sign(message).hex()

    def public(self) -> PublicKeys:
        return PublicKeys({kid: k.public_key() for kid, k in self.keys.items()}, dict(self.windows), self.SETTING)


def generate_signing_key() -> str:
    """A new Ed25519 private key, as ``ENGRAM_AUDIT_SIGNING_KEYS`` takes it (32 bytes, base64url)."""
    return _b64(Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.Raw,
                                                           serialization.PrivateFormat.Raw,
                                                           serialization.NoEncryption()))


# ---------------------------------------------------------------- events and checkpoints


def canonical(fields: Mapping[str, Any], names: tuple[str, ...] = LEGACY_FIELDS) -> str:
    return json.dumps({k: fields.get(k) for k in names}, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def link_hash(*, prev_hash: str, fields: Mapping[str, Any], keyring: Keyring | None = None) -> str:
    """The hash an event must carry: keyed under ``fields["key_id"]``, or the unkeyed form of the
    events written before the chain was keyed. KeyError when the key is not in ``keyring``."""
    kid = fields.get("key_id") or ""
    if not kid:
        return hashlib.sha256(_utf8(f"{prev_hash}\n{canonical(fields)}")).hexdigest()
    if keyring is None:
        raise KeyError(kid)
    return keyring.sign(f"{prev_hash}\n{canonical(fields, KEYED_FIELDS)}", kid=kid)


def digest_line(record: Mapping[str, Any]) -> bytes:
    """What a checkpoint's ``events_sha256`` covers of one event: all of it, recomputable without a key."""
    return _utf8(f"{canonical(record, KEYED_FIELDS)}\n{record.get('prev_hash')}\n{record.get('hash')}\n")


def events_sha256(records: Iterable[Mapping[str, Any]]) -> str:
    digest = hashlib.sha256()
    for record in records:
        digest.update(digest_line(record))
    return digest.hexdigest()


def _checkpoint_message(checkpoint: Mapping[str, Any]) -> bytes:
    return _utf8(_CHECKPOINT_LABEL + canonical(checkpoint, CHECKPOINT_FIELDS))


def checkpoint_sign(*, chain: str, seq: int, head_hash: str, created_at: str, previous: Mapping[str, Any] | None,
                    keyed_at: int, events_digest: str, signing: SigningKeys) -> dict[str, Any]:
    """A checkpoint of ``chain`` at ``seq``: its head, the time, the chain's keying event, the
    SHA-256 of the events since the checkpoint before it and that checkpoint (so checkpoints form a
    chain of their own), signed by the Ed25519 key valid at ``created_at``."""
    fields = {"chain": chain, "seq": seq, "head_hash": head_hash, "created_at": created_at,
              "previous_seq": previous["seq"] if previous else 0,
              "previous_signature": previous["signature"] if previous else "",
              "key_id": signing.signer(moment(created_at)), "keyed_at": keyed_at, "events_sha256": events_digest}
    kid, signature = signing.sign(_checkpoint_message(fields), at=moment(created_at))
    return {**fields, "key_id": kid, "signature": signature}


def checkpoint_problem(checkpoint: Mapping[str, Any], public: PublicKeys | None) -> str:
    """'' when the checkpoint's signature holds and its key was valid when it was made, else why not."""
    what = "the checkpoint"
    if public is None:
        return f"{what} cannot be checked: no public key was given"
    if any(name not in checkpoint for name in CHECKPOINT_FIELDS):
        return f"{what} lacks fields of a signed checkpoint: forged, or made by an earlier release"
    if name := _mistyped(checkpoint, CHECKPOINT_TYPES):
        return f"{what}'s {name} is not a value Engram writes there: forged"
    return public.problem(what, str(checkpoint.get("key_id", "")), checkpoint.get("created_at"),
                          _checkpoint_message(checkpoint), checkpoint.get("signature", ""))


# ---------------------------------------------------------------- verification


@dataclass(frozen=True)
class ChainReport:
    """One chain's verification: ``ok``, or the first problem (``reason``, at ``broken_seq``)."""

    chain: str
    checked: int  # events whose links verified, from the first
    ok: bool
    broken_seq: int | None = None
    broken_id: Any = None
    reason: str = ""
    events: int = 0  # events held
    legacy: int = 0  # unkeyed events, from before the chain was keyed
    checkpoints: int = 0  # checkpoints whose signature and link verified
    latest: dict[str, Any] | None = None  # the latest checkpoint
    uncovered: int = 0  # events after the latest checkpoint, not yet pinned by one
    problems: tuple[str, ...] = ()  # every problem found, the first being ``reason``
    filtered: bool = False
    recomputed: bool = True  # each event's HMAC was recomputed (the audit keys were at hand)
    keyed_at: int = 0  # the chain's keying event (0: none seen)

    @property
    def label(self) -> str:
        return self.chain or "(no tenant)"

    def summary(self) -> str:
        """One line, as the command and the offline verifier print it."""
        if not self.ok:
            where = f"seq {self.broken_seq}" + (f" (event id {self.broken_id})" if self.broken_id else "")
            return f"{self.label}: BROKEN after {self.checked} good events; first broken link: {where}: {self.reason}"
        held = f"{self.checked} events" + (f" ({self.legacy} from before the chain was keyed)" if self.legacy else "")
        if self.filtered:
            how = ("each event's HMAC recomputed" if self.recomputed else
                   "each event as Engram signed it (no audit key given to recompute its HMAC)")
            return f"{self.label}: OK, {held} of a filtered export, {how}, {self.checkpoints} checkpoints verified"
        if self.latest is None:
            return f"{self.label}: OK, {held}; no checkpoint"
        pinned = (f"the latest checkpoint ({self.latest['created_at']}) pins seq {self.latest['seq']} and its hash"
                  + (f"; {self.uncovered} events after it await the next one" if self.uncovered else ""))
        checkpoints = f"{self.checkpoints} checkpoint" + ("s" if self.checkpoints != 1 else "")
        return f"{self.label}: OK, {held}, {checkpoints} read; {pinned}"


def _ordered_checkpoints(checkpoints: Iterable[Mapping[str, Any]], public: PublicKeys | None, *, chain: str,
                         every: bool) -> tuple[list[Mapping[str, Any]], list[tuple[int, str]]]:
    """The checkpoints whose signature holds, in order, and (seq, problem) for each one that is
    forged, of another chain, goes back in time, or does not follow the one before it. ``every``:
    these are all of the chain's checkpoints (an export), so each must name the one before it;
    otherwise (the first and the newest few) a gap between two is allowed, a fork is not."""
    valid: list[Mapping[str, Any]] = []
    problems: list[tuple[int, str]] = []
    for cp in sorted(checkpoints, key=lambda c: (_int(c.get("seq")), str(c.get("created_at")))):
        seq, name = _int(cp.get("seq")), f"the checkpoint of {cp.get('created_at')} at seq {cp.get('seq')}"
        if why := checkpoint_problem(cp, public):
            problems.append((seq, why.replace("the checkpoint", name, 1)))
            continue
        before = valid[-1] if valid else None
        if cp["chain"] != chain:
            why = f"{name} belongs to chain {cp['chain']!r}"
        elif not isinstance(cp["seq"], int) or not isinstance(cp["previous_seq"], int) or cp["seq"] <= cp["previous_seq"]:
            why = f"{name} does not pin events after the one before it"
        elif before is None and every and cp["previous_seq"] != 0:
            why = f"{name} names a checkpoint before it that is missing"
        elif before is not None and cp["keyed_at"] != before["keyed_at"]:
            why = f"{name} names another keying event than the checkpoint before it"
        elif before is not None and not _not_before(cp["created_at"], before["created_at"]):
            why = f"{name} was made before the checkpoint before it: time goes back"
        elif before is not None and (every or cp["previous_seq"] <= before["seq"]) and \
                (cp["previous_seq"], cp["previous_signature"]) != (before["seq"], before["signature"]):
            why = f"{name} does not follow the one before it: a checkpoint is missing or two fork"
        else:
            valid.append(cp)
            continue
        problems.append((seq, why))
    return valid, problems


def _mistyped(record: Mapping[str, Any], types: Mapping[str, type | tuple[type, ...]]) -> str:
    """The first field whose value is not of its JSON type ('' when none; a bool is not an int)."""
    for name, kind in types.items():
        value = record.get(name)
        if name in record and (not isinstance(value, kind) or (isinstance(value, bool) and kind is int)):
            return name
    return ""


def _same(a: str, b: str) -> bool:
    """Constant-time equality of two texts, whatever characters they hold."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _not_before(later: Any, earlier: Any) -> bool:
    a, b = moment(later), moment(earlier)
    return a is not None and b is not None and a >= b


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


class _Walk:
    """Checks events one by one, in order, up to the first problem: seq, link, time, key (and its
    window), HMAC, and each checkpoint's head and events digest as its events go by."""

    def __init__(self, *, chain: str, keyring: Keyring | None, complete: bool, origin: Mapping[str, Any] | None,
                 checkpoints: list[Mapping[str, Any]], keyed_at: int):
        self.chain, self.keyring, self.complete, self.origin = chain, keyring, complete, origin
        self.checked, self.legacy, self.keyed_at, self.keying_created = 0, 0, keyed_at, None
        self.problem: tuple[int, Any, str] | None = None
        self.prev: Mapping[str, Any] | None = None
        self.expected = origin["seq"] if origin else 1
        self.first_seq: int | None = None
        self.pinned: dict[int, Mapping[str, Any]] = {cp["seq"]: cp for cp in checkpoints}
        self.heads: dict[int, str] = {}  # the hashes of pinned seqs
        # Each checkpoint's events, (previous_seq, seq], hashed as they go by.
        self.segments = sorted(checkpoints, key=lambda c: (c["previous_seq"], c["seq"]))
        self.next_segment = 0
        self.open: list[tuple[Mapping[str, Any], Any]] = []

    def feed(self, record: Mapping[str, Any]) -> bool:
        """Check one more event; False once a problem is found (``self.problem``)."""
        if self.problem is not None:
            return False
        seq = record.get("seq")
        problem = self._problem(record)
        if problem:
            at = self.expected if self.complete and isinstance(seq, int) and seq > self.expected else seq
            self.problem = (at if isinstance(at, int) else self.expected,
                            record.get("id") if at == seq else None, problem)
            return False
        kid = record.get("key_id") or ""
        if kid and not self.keyed_at:
            self.keyed_at = seq
        if kid and seq == self.keyed_at:
            self.keying_created = record.get("created_at")
        self.legacy += not kid
        if self.first_seq is None:
            self.first_seq = seq
        if seq in self.pinned:
            self.heads[seq] = record["hash"]
            if not _not_before(self.pinned[seq]["created_at"], record["created_at"]):
                self.problem = (seq, None, f"the checkpoint of {self.pinned[seq]['created_at']} pins event {seq}, "
                                           f"made later ({record['created_at']}): back-dated")
                return False
        if self.complete and (why := self._digest(record)):
            self.problem = (seq, None, why)
            return False
        self.checked, self.prev, self.expected = self.checked + 1, record, seq + 1
        return True

    def _problem(self, record: Mapping[str, Any]) -> str:
        seq, kid, prev = record.get("seq"), record.get("key_id") or "", self.prev
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            return f"the event's seq {seq!r} is not a position in a chain"
        if any(not isinstance(record.get(k), str) for k in ("prev_hash", "hash", "created_at")):
            return "the event lacks its links or its time"
        if name := _mistyped(record, EVENT_TYPES):
            return f"the event's {name} is not a value Engram writes there: forged"
        if record.get("chain") != self.chain:
            return f"the event belongs to chain {record.get('chain')!r}, not {self.chain!r}"
        if self.complete and seq > self.expected:
            return (f"event {self.expected} is missing (the sequence jumps from {self.expected - 1} to {seq})"
                    if prev or self.origin else f"the chain starts at seq {seq}: events {self.expected} to {seq - 1} "
                    "are missing")
        if self.complete and seq < self.expected:
            return f"the sequence goes back from {self.expected - 1} to {seq}: events duplicated or re-ordered"
        if not self.complete and prev is not None and seq <= prev["seq"]:
            return f"the sequence goes back from {prev['seq']} to {seq}: events duplicated or re-ordered"
        if self.origin and prev is None and not _same(record["hash"], str(self.origin["head_hash"])):
            return f"event {seq} is not the one the checkpoint of {self.origin['created_at']} signed: rewritten"
        if self.complete and not self.origin and prev is None and record["prev_hash"] != GENESIS:
            return "the first event does not start from the genesis hash"
        if prev is not None and (self.complete or seq == prev["seq"] + 1) and record["prev_hash"] != prev["hash"]:
            return "prev_hash is not the previous event's hash: an event was removed, re-ordered or rewritten"
        when = moment(record["created_at"])
        if when is None:
            return f"the event's time {record['created_at']!r} is not a time"
        if prev is not None and when < (moment(prev["created_at"]) or when):
            return (f"the event was made at {record['created_at']}, before the event before it ({prev['created_at']}): "
                    "time goes back, so it was inserted or back-dated")
        if not kid and self.keyed_at and seq >= self.keyed_at:
            return (f"the event is not signed by a key, after the chain was keyed at seq {self.keyed_at} "
                    "(rewritten by someone without the key)")
        if kid and self.keyring is None:
            return ""  # a keyed link needs the secret: the checkpoints' digests and the export's signature vouch
        if kid and (why := self.keyring.problem("the event", kid, record["created_at"])):
            return why
        if not _same(link_hash(prev_hash=record["prev_hash"], fields=record, keyring=self.keyring), record["hash"]):
            return (f"the event's hash is not signed by its key (key id {kid}): the event was changed" if kid else
                    "the event's hash does not match its fields: the event was changed")
        return ""

    def _digest(self, record: Mapping[str, Any]) -> str:
        seq = record["seq"]
        while self.next_segment < len(self.segments) and self.segments[self.next_segment]["previous_seq"] < seq:
            cp = self.segments[self.next_segment]
            self.next_segment += 1
            # Only a checkpoint whose every event is walked here can be checked (not the origin's own).
            if cp["previous_seq"] + 1 >= (self.first_seq or seq):
                self.open.append((cp, hashlib.sha256()))
        line = digest_line(record)
        for _cp, digest in self.open:
            digest.update(line)
        for cp, digest in [item for item in self.open if item[0]["seq"] == seq]:
            if not _same(digest.hexdigest(), str(cp["events_sha256"])):
                return (f"events {cp['previous_seq'] + 1} to {seq} are not those the checkpoint of {cp['created_at']} "
                        "signed (their SHA-256 differs): rewritten")
        self.open = [item for item in self.open if item[0]["seq"] > seq]
        return ""


class ChainCheck:
    """One chain's verification, fed its events in ``seq`` order (so an export is checked as it is
    streamed); ``report()`` at the end. See ``verify_chain`` for the parameters."""

    def __init__(self, checkpoints: Iterable[Mapping[str, Any]] = (), *, chain: str, keyring: Keyring | None,
                 public: PublicKeys | None, complete: bool = True, origin: Mapping[str, Any] | None = None,
                 every_checkpoint: bool = False, keying_pinned: bool = True):
        self.chain, self.complete, self.origin, self.keying_pinned = chain, complete, origin, keying_pinned
        self.recomputed = keyring is not None
        self.ordered, self.cp_problems = _ordered_checkpoints(checkpoints, public, chain=chain, every=every_checkpoint)
        stated = self.ordered[0]["keyed_at"] if self.ordered else 0
        self.walk = _Walk(chain=chain, keyring=keyring, complete=complete, origin=origin, checkpoints=self.ordered,
                          keyed_at=stated if not complete or origin else 0)
        self.held = 0

    def feed(self, record: Mapping[str, Any]) -> None:
        self.held += 1
        self.walk.feed(record)

    def report(self) -> ChainReport:
        walk, ordered = self.walk, self.ordered
        problems: list[tuple[int, Any, str]] = [walk.problem] if walk.problem else []
        problems += [(seq, None, p) for seq, p in self.cp_problems]
        last = walk.prev["seq"] if walk.prev else 0
        if not problems and self.complete:
            problems += _complete_problems(walk, ordered, held=self.held, last=last,
                                           keying=self.origin is None and self.keying_pinned)
        if not problems and not self.complete:
            for cp in ordered:
                if cp["seq"] in walk.heads and not _same(walk.heads[cp["seq"]], str(cp["head_hash"])):
                    problems.append((cp["seq"], None, f"event {cp['seq']} is not the one the checkpoint of "
                                                      f"{cp['created_at']} signed: rewritten"))
                    break
        latest = dict(ordered[-1]) if ordered else None
        first = problems[0] if problems else None
        return ChainReport(
            chain=self.chain, checked=walk.checked, ok=first is None, broken_seq=first[0] if first else None,
            broken_id=first[1] if first else None, reason=first[2] if first else "", events=self.held,
            legacy=walk.legacy, checkpoints=len(ordered), latest=latest,
            uncovered=max(0, last - latest["seq"]) if latest and self.complete else 0,
            problems=tuple(p for _, _, p in problems), filtered=not self.complete, recomputed=self.recomputed,
            keyed_at=walk.keyed_at)


def verify_chain(records: Iterable[Mapping[str, Any]], checkpoints: Iterable[Mapping[str, Any]] = (), *,
                 chain: str, keyring: Keyring | None, public: PublicKeys | None, complete: bool = True,
                 origin: Mapping[str, Any] | None = None, every_checkpoint: bool = False,
                 keying_pinned: bool = True) -> ChainReport:
    """Verify ONE chain's events (in ``seq`` order; each with the hashed fields, ``prev_hash``,
    ``hash`` and optionally ``id``) against its checkpoints.

    ``complete``: the events are the whole chain (the database, an unfiltered export), so a gap,
    fewer events than a checkpoint pins, or events other than those a checkpoint's digest covers
    are a deletion or a rewrite, and the chain's keying event must be pinned by its first
    checkpoint, written at the moment of keying (``keying_pinned`` False: the writer about to pin
    it). Otherwise (a filtered export) each event's own link, the links between adjacent events and
    every checkpoint's signature are checked, and a checkpoint's head wherever its event is present.
    ``origin``: a checkpoint already verified; the events start at the one it pins. ``keyring``
    None: the HMACs are not recomputed (an auditor with the public key only); the checkpoints'
    digests are what proves the events. ``every_checkpoint``: the checkpoints are all of the
    chain's (an export), not a selection."""
    check = ChainCheck(checkpoints, chain=chain, keyring=keyring, public=public, complete=complete, origin=origin,
                       every_checkpoint=every_checkpoint, keying_pinned=keying_pinned)
    for record in records:
        check.feed(record)
    return check.report()


def _complete_problems(walk: _Walk, ordered: list[Mapping[str, Any]], *, held: int, last: int,
                       keying: bool) -> list[tuple[int, Any, str]]:
    """A whole chain against its checkpoints: truncation, deletion, rewritten heads, the keying pin."""
    for cp in ordered:
        if not held:
            return [(1, None, f"the chain was deleted: the checkpoint of {cp['created_at']} pins {cp['seq']} events "
                              "and the log holds none")]
        if cp["seq"] > last:
            return [(last + 1, None, f"the chain was truncated: the checkpoint of {cp['created_at']} pins {cp['seq']} "
                                     f"events, the log holds {last} (events {last + 1} to {cp['seq']} deleted)")]
        if cp["seq"] in walk.heads and not _same(walk.heads[cp["seq"]], str(cp["head_hash"])):
            return [(cp["seq"], None, f"event {cp['seq']} is not the one the checkpoint of {cp['created_at']} signed: "
                                      "rewritten")]
    if not keying or not held:
        return []
    if not walk.keyed_at:
        return [(1, None, "no event of the chain is keyed: its events rest on the database alone")]
    first = ordered[0] if ordered and ordered[0]["previous_seq"] == 0 else None
    if first is None:
        return [(walk.keyed_at, None, f"the keying event (seq {walk.keyed_at}) is not pinned by a checkpoint: a "
                                      "rewrite of the chain up to it could not be seen")]
    if first["keyed_at"] != walk.keyed_at or first["seq"] != walk.keyed_at:
        return [(walk.keyed_at, None, f"the first checkpoint pins seq {first['seq']} (keying event {first['keyed_at']}), "
                                      f"but the chain was keyed at seq {walk.keyed_at}: the chain up to it was "
                                      "rewritten")]
    made, keyed = moment(first["created_at"]), moment(walk.keying_created)
    if made is None or keyed is None or made - keyed > timedelta(seconds=KEYING_PIN_SECONDS):
        return [(walk.keyed_at, None, f"the keying event (seq {walk.keyed_at}, {walk.keying_created}) was pinned only "
                                      f"at {first['created_at']}, not when it was written: the chain up to it rests "
                                      "on the database alone for that time")]
    return []


# ---------------------------------------------------------------- exports


def export_line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def _end_message(digest: str, lines: int, end: Mapping[str, Any]) -> bytes:
    fields = {k: v for k, v in end.items() if k != "signature"}
    return _utf8(f"{_EXPORT_LABEL}{digest}\n{lines}\n{json.dumps(fields, sort_keys=True, ensure_ascii=False)}")


class ExportSigner:
    """Signs an export as it is written: the last line's Ed25519 signature covers every line before
    it (the header's ``filtered`` flag and time included) and the end line's own fields; the end
    line also states what Engram found when it checked the exported events with the audit keys."""

    def __init__(self, signing: SigningKeys, *, created_at: str):
        self.signing, self.created_at, self.digest, self.lines = signing, created_at, hashlib.sha256(), 0

    def line(self, record: Mapping[str, Any]) -> str:
        text = export_line(record)
        self.digest.update(_utf8(text))
        self.lines += 1
        return text

    def end(self, *, verified: Mapping[str, Any]) -> str:
        at = moment(self.created_at)
        end = {"type": "end", "lines": self.lines, "key_id": self.signing.signer(at), "verified": dict(verified)}
        _kid, signature = self.signing.sign(_end_message(self.digest.hexdigest(), self.lines, end), at=at)
        return export_line({**end, "signature": signature})


@dataclass(frozen=True)
class ExportReport:
    header: dict[str, Any] | None
    chains: list[ChainReport]
    problems: list[str] = field(default_factory=list)  # about the file itself

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.chains) and all(r.ok for r in self.chains)


def _export_problems(raw: list[str], records: list[dict], public: PublicKeys | None) -> list[str]:
    """The file as a whole: a header first, a signed end line last, by a key valid when it was made,
    holding nothing made after it and nothing of another chain."""
    header = records[0] if records and records[0].get("type") == "export" else None
    end = records[-1] if records and records[-1].get("type") == "end" else None
    if header is None:
        return ["the export has no header: it is not an export Engram made, or its first line was removed"]
    if end is None:
        return ["the export has no end line: it was cut short, or its signature removed"]
    if header.get("version") != EXPORT_VERSION:
        return [f"the export is of version {header.get('version')!r}, not {EXPORT_VERSION}: it cannot be verified here"]
    if public is None:
        return ["no public key was given (--public-key): the export's signature cannot be checked"]
    digest = hashlib.sha256()
    for line in raw[:-1]:
        digest.update(_utf8(line))
    if end.get("lines") != len(raw) - 1:
        return ["the export was changed after it was made: its end line counts another number of lines (a line was "
                "removed or added)"]
    if why := public.problem("the export", str(end.get("key_id", "")), header.get("created_at"),
                             _end_message(digest.hexdigest(), len(raw) - 1, end), end.get("signature", "")):
        return [why + (" (a line was removed, added or edited)" if "not signed" in why else "")]
    if raw[-1] != export_line(end):
        # The signature covers the end line's fields, not its bytes: as Engram writes it, or edited.
        return ["the export's end line was edited: it is not as Engram wrote it"]
    problems = []
    made = moment(header.get("created_at"))
    for record in records[1:-1]:
        if record.get("type") not in ("event", "checkpoint"):
            problems.append(f"the export holds a line of type {record.get('type')!r} between its header and end")
        elif record.get("chain") != header.get("tenant"):
            problems.append(f"the export of {header.get('tenant')!r} holds a line of chain {record.get('chain')!r}")
        elif made is None or (moment(record.get("created_at")) or made) > made:
            problems.append(f"the export of {header.get('created_at')} holds a {record.get('type')} made at "
                            f"{record.get('created_at')}, after it: forged, or signed by a retired key")
        else:
            continue
        break
    verified = end.get("verified") or {}
    if not problems and not verified.get("ok"):
        problems.append(f"Engram found the chain broken when it made the export: {verified.get('reason', '')}")
    return problems


def verify_export(lines: Iterable[str], *, public: PublicKeys | None, keyring: Keyring | None = None) -> ExportReport:
    """Verify an exported JSON Lines file: its header, its signature, then its chain against the
    checkpoints it carries (complete, or, for a filtered export, event by event). ``keyring`` (the
    audit keys) also recomputes each event's HMAC; without it a complete export's events are proved
    by the checkpoints' digests, and an event no checkpoint covers is refused."""
    raw = [line if line.endswith("\n") else line + "\n" for line in lines if line.strip()]
    records = []
    for n, line in enumerate(raw, 1):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            return ExportReport(header=None, chains=[], problems=[f"line {n} is not a JSON object: not an export"])
        records.append(record)
    problems = _export_problems(raw, records, public)
    header = records[0] if records and records[0].get("type") == "export" else None
    if problems:
        return ExportReport(header=header, chains=[], problems=problems)
    complete = not header.get("filtered", True)
    chain = header.get("tenant")
    events = [r for r in records[1:-1] if r["type"] == "event"]
    checkpoints = [r for r in records[1:-1] if r["type"] == "checkpoint"]
    report = verify_chain(events, checkpoints, chain=chain, keyring=keyring, public=public, complete=complete,
                          every_checkpoint=True)
    if report.ok and complete and keyring is None and report.uncovered:
        last = report.latest["seq"] if report.latest else 0
        report = ChainReport(
            chain=chain, checked=report.checked, ok=False, broken_seq=last + 1,
            reason=f"events {last + 1} to {last + report.uncovered} are pinned by no checkpoint, and their HMAC "
                   "cannot be recomputed without the audit keys", events=report.events, recomputed=False)
    return ExportReport(header=header, chains=[report], problems=[])


def keyring_from_environment() -> Keyring | None:
    """The audit link keys, when ``ENGRAM_AUDIT_KEYS`` is set: the offline verifier then also
    recomputes each event's HMAC."""
    value = os.environ.get("ENGRAM_AUDIT_KEYS", "")
    return Keyring.from_secrets(value.split(",")) if value.strip() else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tenants.audit_chain",
                                     description="Verify an Engram audit export offline.")
    parser.add_argument("--public-key", action="append", default=[], metavar="FILE",
                        help="the audit public keys (manage.py audit_public_keys, or the Verify page), or one PEM key")
    parser.add_argument("export", help="the JSON Lines export")
    args = parser.parse_args(argv)
    try:
        public = None
        for path in args.public_key:
            public = PublicKeys.from_file(path) if public is None else public.merged(PublicKeys.from_file(path))
        keyring = keyring_from_environment()
    except (KeyringError, OSError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    with open(args.export, "rb") as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # a changed byte: a report, not a traceback
        print(f"export REFUSED: byte {exc.start} is not UTF-8 text: the file was changed, or is not an export")
        return 1
    # Lines as a text file reads them (universal newlines).
    report = verify_export(io.StringIO(text, newline=None), public=public, keyring=keyring)
    header = report.header or {}
    if report.problems:
        print("export REFUSED: " + "; ".join(report.problems))
        return 1
    kind = (f"filtered ({', '.join(f'{k}={v}' for k, v in header.get('filters', {}).items())})"
            if header.get("filtered") else "complete")
    print(f"export of {header.get('tenant')!r} made {header.get('created_at')}, {kind}: signature OK, by a key "
          "valid when it was made")
    for chain in report.chains:
        print(f"chain {chain.summary()}")
    return 0 if report.ok else 1


if __name__ == "__main__":  # offline verification of an export
    sys.exit(main(sys.argv[1:]))
