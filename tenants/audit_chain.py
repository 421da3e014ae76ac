"""Tamper evidence for the audit log: keyed hash chains, signed checkpoints and signed exports.

Plain Python on plain dicts, so that an export verifies offline with nothing but this module and
the keys (``ENGRAM_AUDIT_KEYS=... python -m tenants.audit_chain export.jsonl``). What each check
detects, and how keys and checkpoints are rotated: docs/compliance.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ALGORITHM = ("hash = HMAC-SHA256(key[key_id], prev_hash + '\\n' + canonical_json(fields)); "
             "events before a chain was keyed: sha256(prev_hash + '\\n' + canonical_json(fields))")
GENESIS = "0" * 64
# A secret shorter than this is refused: the keys are what an attacker holding the database lacks.
MIN_KEY_CHARS = 32
# The fields an event's hash covers, in the export under these names; keyed events add their key id.
LEGACY_FIELDS = ("chain", "seq", "created_at", "actor_type", "actor", "action", "tenant_slug", "subject_ref",
                 "target_id", "details")
KEYED_FIELDS = (*LEGACY_FIELDS, "key_id")
CHECKPOINT_FIELDS = ("chain", "seq", "head_hash", "created_at", "previous_seq", "previous_signature", "key_id")
# Each kind of signature names its purpose, so one can never stand for another.
_CHECKPOINT_LABEL = "engram audit checkpoint\n"
_EXPORT_LABEL = "engram audit export\n"


class KeyringError(ValueError):
    """The configured audit keys cannot be used (none, or one too short)."""


def key_id(secret: str) -> str:
    """The public name of an audit key: derived from it, so a key list needs no names of its own."""
    return hmac.new(secret.encode(), b"engram audit key id", hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True)
class Keyring:
    """The audit keys: ``primary`` signs new events, checkpoints and exports; every key verifies."""

    keys: Mapping[str, bytes]
    primary: str

    @classmethod
    def from_secrets(cls, secrets: Iterable[str]) -> Keyring:
        cleaned = [s.strip() for s in secrets if s.strip()]
        if not cleaned:
            raise KeyringError("ENGRAM_AUDIT_KEYS is empty: the audit log cannot be signed or verified")
        if any(len(s) < MIN_KEY_CHARS for s in cleaned):
            raise KeyringError(f"ENGRAM_AUDIT_KEYS holds a key shorter than {MIN_KEY_CHARS} characters")
        return cls(keys={key_id(s): s.encode() for s in cleaned}, primary=key_id(cleaned[0]))

    def sign(self, message: str, *, kid: str | None = None) -> str:
        """HMAC-SHA256 of ``message`` under key ``kid`` (the primary by default); KeyError if absent."""
        return hmac.new(self.keys[kid or self.primary], message.encode(), hashlib.sha256).hexdigest()


def canonical(fields: Mapping[str, Any], names: tuple[str, ...] = LEGACY_FIELDS) -> str:
    return json.dumps({k: fields[k] for k in names}, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def link_hash(*, prev_hash: str, fields: Mapping[str, Any], keyring: Keyring | None = None) -> str:
    """The hash an event must carry: keyed under ``fields["key_id"]``, or the unkeyed form of the
    events written before the chain was keyed. KeyError when the key is not in ``keyring``."""
    kid = fields.get("key_id") or ""
    if not kid:
        return hashlib.sha256(f"{prev_hash}\n{canonical(fields)}".encode()).hexdigest()
    if keyring is None:
        raise KeyError(kid)
    return keyring.sign(f"{prev_hash}\n{canonical(fields, KEYED_FIELDS)}", kid=kid)


def checkpoint_sign(*, chain: str, seq: int, head_hash: str, created_at: str, previous: Mapping[str, Any] | None,
                    keyring: Keyring) -> dict[str, Any]:
    """A checkpoint of ``chain`` at ``seq``: its head, the time, and the checkpoint before it (so
    checkpoints form a chain of their own), signed under the primary key."""
    fields = {"chain": chain, "seq": seq, "head_hash": head_hash, "created_at": created_at,
              "previous_seq": previous["seq"] if previous else 0,
              "previous_signature": previous["signature"] if previous else "", "key_id": keyring.primary}
    return {**fields, "signature": keyring.sign(_CHECKPOINT_LABEL + canonical(fields, CHECKPOINT_FIELDS))}


def checkpoint_problem(checkpoint: Mapping[str, Any], keyring: Keyring | None) -> str:
    """'' when the checkpoint's signature holds, else why not."""
    kid = checkpoint.get("key_id", "")
    if keyring is None or kid not in keyring.keys:
        return f"is signed with key id {kid!r}, which ENGRAM_AUDIT_KEYS does not hold: forged, or its key was dropped"
    expected = keyring.sign(_CHECKPOINT_LABEL + canonical(checkpoint, CHECKPOINT_FIELDS), kid=kid)
    return "" if hmac.compare_digest(expected, checkpoint.get("signature", "")) else "is not signed by its key: forged"


# ---------------------------------------------------------------- verification


@dataclass(frozen=True)
class ChainReport:
    """One chain's verification: ``ok``, or the first problem (``reason``, at ``broken_seq``)."""

    chain: str
    checked: int  # events whose hash and link verified, from the first
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

    @property
    def label(self) -> str:
        return self.chain or "(no tenant)"

    def summary(self) -> str:
        """One line, as the command and the offline verifier print it."""
        if not self.ok:
            where = f"seq {self.broken_seq}" + (f" (event id {self.broken_id})" if self.broken_id else "")
            return f"{self.label}: BROKEN after {self.checked} good events; first broken link: {where}: {self.reason}"
        held = f"{self.checked} events" + (f" ({self.legacy} from before the chain was keyed)" if self.legacy else "")
        if self.latest is None:
            return f"{self.label}: OK, {held}; no checkpoint yet: a truncation could not be seen"
        pinned = (f"the latest checkpoint ({self.latest['created_at']}) pins seq {self.latest['seq']} and its hash"
                  + (f"; {self.uncovered} events after it await the next one" if self.uncovered else ""))
        checkpoints = f"{self.checkpoints} checkpoint" + ("s" if self.checkpoints != 1 else "")
        return f"{self.label}: OK, {held}, {checkpoints} read; {pinned}"


def _ordered_checkpoints(checkpoints: Iterable[Mapping[str, Any]], keyring: Keyring | None
                         ) -> tuple[list[Mapping[str, Any]], list[tuple[int, str]]]:
    """The checkpoints whose signature holds, in order, and (seq, problem) for each one that is
    forged, or that does not name the one before it (of those given) as its previous."""
    valid, problems = [], []
    for cp in sorted(checkpoints, key=lambda c: (c["seq"], c["created_at"])):
        if why := checkpoint_problem(cp, keyring):
            problems.append((cp["seq"], f"the checkpoint of {cp['created_at']} at seq {cp['seq']} {why}"))
            continue
        if valid and (cp["previous_seq"], cp["previous_signature"]) != (valid[-1]["seq"], valid[-1]["signature"]):
            problems.append((cp["seq"], f"the checkpoint of {cp['created_at']} at seq {cp['seq']} does not follow "
                                        f"the one before it: a checkpoint is missing or two fork"))
        valid.append(cp)
    return valid, problems


def _walk(records: list[Mapping[str, Any]], *, chain: str, keyring: Keyring | None, complete: bool,
          origin: Mapping[str, Any] | None) -> tuple[int, int, dict[int, str], tuple[int, Any, str] | None]:
    """Check each event's hash and link, in order, up to the first problem: (events that verified,
    of them unkeyed, their hashes by seq, the problem as (seq, event id, why) or None)."""
    checked, legacy, keyed_at, hashes = 0, 0, None, {}
    expected = origin["seq"] if origin else 1
    prev: Mapping[str, Any] | None = None
    for record in records:
        seq, kid, problem = record["seq"], record.get("key_id") or "", ""
        if record["chain"] != chain:
            problem = f"the event belongs to chain {record['chain']!r}, not {chain!r}"
        elif complete and seq > expected:
            problem = (f"event {expected} is missing (the sequence jumps from {expected - 1} to {seq})" if prev
                       else f"the chain starts at seq {seq}: events {expected} to {seq - 1} are missing")
            seq = expected
        elif complete and seq < expected:
            problem = f"the sequence goes back from {expected - 1} to {seq}: events re-ordered"
        elif origin and prev is None and not hmac.compare_digest(record["hash"], origin["head_hash"]):
            problem = f"event {seq} is not the one the checkpoint of {origin['created_at']} signed: rewritten"
        elif complete and not origin and prev is None and record["prev_hash"] != GENESIS:
            problem = "the first event does not start from the genesis hash"
        elif prev is not None and (complete or seq == prev["seq"] + 1) and record["prev_hash"] != prev["hash"]:
            problem = "prev_hash is not the previous event's hash: an event was removed, re-ordered or rewritten"
        elif not kid and keyed_at is not None:
            problem = (f"the event is not signed by its key: an unkeyed hash after the chain was keyed at seq "
                       f"{keyed_at} (rewritten by someone without the key)")
        elif kid and (keyring is None or kid not in keyring.keys):
            problem = (f"the event is signed with key id {kid!r}, which ENGRAM_AUDIT_KEYS does not hold: forged, "
                       "or its key was dropped from the list")
        elif not hmac.compare_digest(link_hash(prev_hash=record["prev_hash"], fields=record, keyring=keyring),
                                     record["hash"]):
            problem = (f"the event's hash is not signed by its key (key id {kid}): the event was changed" if kid else
                       "the event's hash does not match its fields: the event was changed")
        if problem:  # a missing event has no id: the one found in its place is not what broke
            return checked, legacy, hashes, (seq, record.get("id") if seq == record["seq"] else None, problem)
        if kid and keyed_at is None:
            keyed_at = seq
        legacy += not kid
        hashes[seq] = record["hash"]
        checked, prev, expected = checked + 1, record, seq + 1
    return checked, legacy, hashes, None


def verify_chain(records: Iterable[Mapping[str, Any]], checkpoints: Iterable[Mapping[str, Any]] = (), *,
                 chain: str, keyring: Keyring | None, complete: bool = True,
                 origin: Mapping[str, Any] | None = None) -> ChainReport:
    """Verify ONE chain's events (in ``seq`` order; each with the hashed fields, ``prev_hash``,
    ``hash`` and optionally ``id``) against its checkpoints.

    ``complete``: the events are the whole chain (the database, an unfiltered export), so a gap,
    or fewer events than a checkpoint pins, is a deletion. Otherwise (a filtered export) each
    event's own hash, the links between adjacent events and every checkpoint's signature are
    checked, and a checkpoint's head wherever its event is present. ``origin``: a checkpoint
    already verified; the events start at the one it pins instead of at the first."""
    records = list(records)
    checked, legacy, hashes, problem = _walk(records, chain=chain, keyring=keyring, complete=complete, origin=origin)
    problems = [problem] if problem else []
    ordered, cp_problems = _ordered_checkpoints(checkpoints, keyring)
    problems += [(seq, None, p) for seq, p in cp_problems]
    held = max(hashes, default=0) if complete else 0
    for cp in ordered if not problems and complete else ():
        if not records:
            problems.append((1, None, f"the chain was deleted: the checkpoint of {cp['created_at']} pins "
                                      f"{cp['seq']} events and the log holds none"))
        elif cp["seq"] > held:
            problems.append((held + 1, None, f"the chain was truncated: the checkpoint of {cp['created_at']} pins "
                                             f"{cp['seq']} events, the log holds {held} (events {held + 1} to "
                                             f"{cp['seq']} deleted)"))
        elif cp["seq"] in hashes and not hmac.compare_digest(hashes[cp["seq"]], cp["head_hash"]):
            problems.append((cp["seq"], None, f"event {cp['seq']} is not the one the checkpoint of "
                                              f"{cp['created_at']} signed: rewritten"))
        else:
            continue
        break
    for cp in ordered if not problems and not complete else ():
        if cp["seq"] in hashes and not hmac.compare_digest(hashes[cp["seq"]], cp["head_hash"]):
            problems.append((cp["seq"], None, f"event {cp['seq']} is not the one the checkpoint of "
                                              f"{cp['created_at']} signed: rewritten"))
            break
    latest = dict(ordered[-1]) if ordered else None
    first = problems[0] if problems else None
    return ChainReport(
        chain=chain, checked=checked, ok=first is None, broken_seq=first[0] if first else None,
        broken_id=first[1] if first else None, reason=first[2] if first else "", events=len(records),
        legacy=legacy, checkpoints=len(ordered), latest=latest,
        uncovered=max(0, held - latest["seq"]) if latest and complete else 0,
        problems=tuple(p for _, _, p in problems), filtered=not complete)


def verify_chains(events: Mapping[str, list[Mapping[str, Any]]], checkpoints: Mapping[str, list[Mapping[str, Any]]],
                  *, keyring: Keyring | None) -> list[ChainReport]:
    """Every chain the log or the checkpoints know of: a chain the checkpoints pin and the log no
    longer holds was deleted."""
    return [verify_chain(events.get(chain, []), checkpoints.get(chain, []), chain=chain, keyring=keyring)
            for chain in sorted(set(events) | set(checkpoints))]


# ---------------------------------------------------------------- exports


class ExportSigner:
    """Signs an export as it is written: the last line's signature covers every line before it,
    so a line removed, added or edited (the ``filtered`` flag included) breaks it."""

    def __init__(self, keyring: Keyring):
        self.keyring, self.digest, self.lines = keyring, hashlib.sha256(), 0

    def line(self, record: Mapping[str, Any]) -> str:
        text = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        self.digest.update(text.encode())
        self.lines += 1
        return text

    def end(self) -> str:
        signature = self.keyring.sign(f"{_EXPORT_LABEL}{self.digest.hexdigest()}\n{self.lines}")
        return json.dumps({"type": "end", "lines": self.lines, "key_id": self.keyring.primary,
                           "signature": signature}, sort_keys=True) + "\n"


@dataclass(frozen=True)
class ExportReport:
    header: dict[str, Any] | None
    chains: list[ChainReport]
    problems: list[str] = field(default_factory=list)  # about the file itself

    @property
    def ok(self) -> bool:
        return not self.problems and all(r.ok for r in self.chains)


def _export_problems(lines: list[str], keyring: Keyring | None) -> list[str]:
    end = json.loads(lines[-1]) if lines and lines[-1].strip() else {}
    if end.get("type") != "end":
        return ["the export has no end line: it was cut short, or its signature removed"]
    digest = hashlib.sha256()
    for line in lines[:-1]:
        digest.update(line.encode())
    kid = end.get("key_id", "")
    if keyring is None or kid not in keyring.keys:
        return [f"the export is signed with key id {kid!r}, which ENGRAM_AUDIT_KEYS does not hold"]
    expected = keyring.sign(f"{_EXPORT_LABEL}{digest.hexdigest()}\n{len(lines) - 1}", kid=kid)
    if end.get("lines") != len(lines) - 1 or not hmac.compare_digest(expected, end.get("signature", "")):
        return ["the export was changed after it was made: its signature does not cover these lines "
                "(a line was removed, added or edited)"]
    return []


def verify_export(lines: Iterable[str], *, keyring: Keyring | None) -> ExportReport:
    """Verify an exported JSON Lines file: its signature, then each chain it holds against the
    checkpoints it carries (complete, or, for a filtered export, event by event)."""
    raw = [line if line.endswith("\n") else line + "\n" for line in lines if line.strip()]
    records = [json.loads(line) for line in raw]
    header = records[0] if records and records[0].get("type") == "export" else None
    problems = _export_problems(raw, keyring) if header else []
    complete = not (header or {}).get("filtered", False)
    events: dict[str, list] = {}
    checkpoints: dict[str, list] = {}
    for record in records:
        kind = record.get("type", "event")
        if kind == "event":
            events.setdefault(record["chain"], []).append(record)
        elif kind == "checkpoint":
            checkpoints.setdefault(record["chain"], []).append(record)
    for chain_events in events.values():
        chain_events.sort(key=lambda r: r["seq"])
    chains = sorted(set(events) | (set(checkpoints) if complete else set(events)))
    reports = [verify_chain(events.get(c, []), checkpoints.get(c, []), chain=c, keyring=keyring, complete=complete)
               for c in chains]
    return ExportReport(header=header, chains=reports, problems=problems)


def keyring_from_environment() -> Keyring | None:
    """The verifier's keys: ``ENGRAM_AUDIT_KEYS`` (comma-separated), as the application reads them."""
    value = os.environ.get("ENGRAM_AUDIT_KEYS", "")
    return Keyring.from_secrets(value.split(",")) if value.strip() else None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: ENGRAM_AUDIT_KEYS=<keys> python -m tenants.audit_chain export.jsonl", file=sys.stderr)
        return 2
    try:
        keyring = keyring_from_environment()
    except KeyringError as exc:
        print(exc, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        report = verify_export(fh, keyring=keyring)
    header = report.header or {}
    kind = (f"filtered ({', '.join(f'{k}={v}' for k, v in header.get('filters', {}).items())})"
            if header.get("filtered") else "complete")
    if header:
        print(f"export of {header.get('tenant')!r} made {header.get('created_at')}, {kind}: "
              + ("signature OK" if not report.problems else "BROKEN: " + "; ".join(report.problems)))
    else:
        print("export without a header or signature (an older format): each chain verified as complete")
    if keyring is None and any(r.problems and "ENGRAM_AUDIT_KEYS" in r.problems[0] for r in report.chains):
        print("ENGRAM_AUDIT_KEYS is not set: keyed events cannot be verified", file=sys.stderr)
    for chain in report.chains:
        print(f"chain {chain.summary()}")
    if not report.chains:
        print("no events")
    return 0 if report.ok else 1


if __name__ == "__main__":  # offline verification of an export
    sys.exit(main(sys.argv[1:]))
