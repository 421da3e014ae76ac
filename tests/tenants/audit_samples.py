"""A sample audit chain and export, built with the module's own functions and two generations of
keys (the old ones retired at ``ROTATED``), for the verifier's tests and its mutation test."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tenants import audit_chain

BASE = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
ROTATED = BASE + timedelta(minutes=30)  # between events 4 and 5
OLD_SECRET, NEW_SECRET = "old-link-key-" + "o" * 40, "new-link-key-" + "n" * 40
OLD_SIGNING, NEW_SIGNING = audit_chain.generate_signing_key(), audit_chain.generate_signing_key()


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


KEYRING = audit_chain.Keyring.from_secrets([f"{NEW_SECRET} from={_iso(ROTATED)}",
                                            f"{OLD_SECRET} retired={_iso(ROTATED)}"])
SIGNING = audit_chain.SigningKeys.from_entries([f"{NEW_SIGNING} from={_iso(ROTATED)}",
                                                f"{OLD_SIGNING} retired={_iso(ROTATED)}"])
PUBLIC = SIGNING.public()
# What an attacker holding only the retired keys signs with: they are valid at any time to him.
RETIRED_KEYRING = audit_chain.Keyring.from_secrets([OLD_SECRET])
RETIRED_SIGNING = audit_chain.SigningKeys.from_entries([OLD_SIGNING])
CHAIN = "acme"
EVENTS = 10
CHECKPOINTS_AT = (1, 4, 7, 10)  # the first pins the keying event, seq 1


def event_time(seq: int) -> datetime:
    return BASE + timedelta(minutes=7 * seq)


def sign_event(record: dict[str, Any], prev_hash: str, keyring: audit_chain.Keyring = KEYRING) -> dict[str, Any]:
    """``record`` linked to ``prev_hash`` and signed by the key of ``keyring`` valid at its time."""
    record = {**record, "prev_hash": prev_hash}
    record["key_id"] = keyring.signer(audit_chain.moment(record["created_at"]))
    record["hash"] = audit_chain.link_hash(prev_hash=prev_hash, fields=record, keyring=keyring)
    return record


def make_event(seq: int, prev_hash: str, **fields: Any) -> dict[str, Any]:
    base = {"chain": CHAIN, "seq": seq, "created_at": _iso(event_time(seq)), "actor_type": "user",
            "actor": "alice", "action": f"demo.{seq}", "tenant_slug": CHAIN, "subject_ref": "", "target_id": f"t{seq}",
            "details": {"n": seq}}
    return sign_event({**base, **fields}, prev_hash)


def make_checkpoint(events: list[dict], seq: int, previous: dict | None, *, made: datetime,
                    signing: audit_chain.SigningKeys = SIGNING) -> dict[str, Any]:
    since = previous["seq"] if previous else 0
    return audit_chain.checkpoint_sign(
        chain=CHAIN, seq=seq, head_hash=events[seq - 1]["hash"], created_at=_iso(made), previous=previous,
        keyed_at=1, events_digest=audit_chain.events_sha256(events[since:seq]), signing=signing)


def _checkpoint_time(seq: int) -> datetime:
    return event_time(seq) + timedelta(seconds=1)


@dataclass
class Sample:
    events: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]

    def copy(self) -> Sample:
        return copy.deepcopy(self)

    def verify(self, *, keyring: audit_chain.Keyring | None = KEYRING) -> audit_chain.ChainReport:
        return audit_chain.verify_chain(self.events, self.checkpoints, chain=CHAIN, keyring=keyring, public=PUBLIC)


def sample_chain() -> Sample:
    events, prev = [], audit_chain.GENESIS
    for seq in range(1, EVENTS + 1):
        events.append(make_event(seq, prev))
        prev = events[-1]["hash"]
    checkpoints, previous = [], None
    for seq in CHECKPOINTS_AT:
        previous = make_checkpoint(events, seq, previous, made=_checkpoint_time(seq))
        checkpoints.append(previous)
    return Sample(events, checkpoints)


EXPORT_MADE = event_time(EVENTS) + timedelta(minutes=5)


def export_lines(sample: Sample, *, filters: dict[str, str] | None = None, made: datetime = EXPORT_MADE,
                 signing: audit_chain.SigningKeys = SIGNING) -> list[str]:
    """The sample as Engram exports it: header, events, checkpoints, signed end line."""
    signer = audit_chain.ExportSigner(signing, created_at=_iso(made))
    events = [e for e in sample.events if not filters or e["action"] == filters["action"]]
    check = audit_chain.ChainCheck(sample.checkpoints, chain=CHAIN, keyring=KEYRING, public=PUBLIC,
                                   complete=not filters, every_checkpoint=True)
    lines = [signer.line({"type": "export", "version": audit_chain.EXPORT_VERSION, "tenant": CHAIN,
                          "filtered": bool(filters), "filters": filters or {}, "created_at": _iso(made),
                          "through_seq": EVENTS, "algorithm": audit_chain.ALGORITHM})]
    for event in events:
        check.feed(event)
        lines.append(signer.line({"type": "event", **event}))
    lines += [signer.line({"type": "checkpoint", **cp}) for cp in sample.checkpoints]
    report = check.report()
    lines.append(signer.end(verified={"ok": report.ok, "reason": report.reason, "events": report.events,
                                      "hmac_recomputed": True}))
    return lines


def resign_export(lines: list[str], signing: audit_chain.SigningKeys = SIGNING) -> list[str]:
    """The same lines (the end line's ``verified`` kept) signed again, as someone holding
    ``signing`` would after changing them."""
    header = json.loads(lines[0]) if lines and lines[0].strip().startswith("{") else {}
    made = header.get("created_at", _iso(EXPORT_MADE)) if isinstance(header, dict) else _iso(EXPORT_MADE)
    end = json.loads(lines[-1]) if lines and lines[-1].strip().startswith("{") else {}
    signer = audit_chain.ExportSigner(signing, created_at=made if audit_chain.moment(made) else _iso(EXPORT_MADE))
    body = [signer.line(json.loads(line)) for line in lines[:-1]]
    verified = end.get("verified", {"ok": True}) if isinstance(end, dict) else {"ok": True}
    return [*body, signer.end(verified=verified if isinstance(verified, dict) else {"ok": True})]


def verify_export(lines: list[str], *, keyring: audit_chain.Keyring | None = None) -> audit_chain.ExportReport:
    return audit_chain.verify_export(lines, public=PUBLIC, keyring=keyring)
