"""Tamper-evident audit log: every event carries a SHA-256 hash chained to the previous event of
the same tenant (events without a tenant form their own chain, key "").

The hash covers only content-free fields (who, what, when, which ids, the details that
``audit_record`` already keeps free of memory content), so erasing an end-user's memories never
needs an audit event rewritten. Changing, deleting or re-ordering a stored event breaks the chain
at that event; ``chain_verify`` names the first broken link.

This module is pure Python on plain dicts on purpose: an exported JSON Lines file can be
verified offline with nothing but it (``python -m tenants.audit_chain export.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from itertools import pairwise
from dataclasses import dataclass
from typing import Any

ALGORITHM = "sha256(prev_hash + '\\n' + canonical_json(fields))"
GENESIS = "0" * 64
# The fields a link's hash covers, in the export under these names.
HASHED_FIELDS = ("chain", "seq", "created_at", "actor_type", "actor", "action", "tenant_slug", "subject_ref",
                 "target_id", "details")


def canonical(fields: dict[str, Any]) -> str:
    return json.dumps({k: fields[k] for k in HASHED_FIELDS}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=str)


def link_hash(*, prev_hash: str, fields: dict[str, Any]) -> str:
    return hashlib.sha256(f"{prev_hash}\n{canonical(fields)}".encode()).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    chain: str
    checked: int
    ok: bool
    broken_seq: int | None = None
    broken_id: Any = None
    reason: str = ""


def chain_verify_records(records: Iterable[dict[str, Any]], *, chain: str | None = None,
                         expect_from_genesis: bool = True) -> ChainReport:
    """Verify records of ONE chain in ``seq`` order. Each record has HASHED_FIELDS plus ``prev_hash``
    and ``hash`` (and optionally ``id``). Returns the first broken link, if any: a changed event
    (hash mismatch), a removed or re-ordered one (seq gap or prev_hash not the previous hash)."""
    prev_hash, expected_seq, checked, name = (GENESIS if expect_from_genesis else None), None, 0, chain
    for record in records:
        name = record["chain"] if name is None else name
        seq = record["seq"]
        problem = ""
        if record["chain"] != name:
            problem = f"event belongs to chain {record['chain']!r}, not {name!r}"
        elif expected_seq is not None and seq != expected_seq:
            problem = f"sequence jumps from {expected_seq - 1} to {seq}: events missing or re-ordered"
        elif expected_seq is None and expect_from_genesis and seq != 1:
            problem = f"chain starts at {seq}, not 1: earlier events missing"
        elif prev_hash is not None and record["prev_hash"] != prev_hash:
            problem = "prev_hash does not match the previous event's hash"
        elif link_hash(prev_hash=record["prev_hash"], fields=record) != record["hash"]:
            problem = "hash does not match the event's fields: the event was changed"
        if problem:
            return ChainReport(chain=name or "", checked=checked, ok=False, broken_seq=seq,
                               broken_id=record.get("id"), reason=problem)
        prev_hash, expected_seq, checked = record["hash"], seq + 1, checked + 1
    return ChainReport(chain=name or "", checked=checked, ok=True)


def verify_jsonl(lines: Iterable[str]) -> list[ChainReport]:
    """Verify an exported JSON Lines file (one event per line, any chains, any order). An export
    of a filtered set verifies each event's own hash and the links between consecutive kept events."""
    by_chain: dict[str, list[dict]] = {}
    for line in lines:
        if line.strip():
            record = json.loads(line)
            by_chain.setdefault(record["chain"], []).append(record)
    reports = []
    for chain, records in sorted(by_chain.items()):
        records.sort(key=lambda r: r["seq"])
        contiguous = all(b["seq"] == a["seq"] + 1 for a, b in pairwise(records))
        if contiguous and records[0]["seq"] == 1:
            reports.append(chain_verify_records(records, chain=chain))
        else:  # a filtered export: each event's own hash, and links where events are adjacent
            report = ChainReport(chain=chain, checked=0, ok=True)
            for n, record in enumerate(records):
                bad = link_hash(prev_hash=record["prev_hash"], fields=record) != record["hash"]
                if not bad and n and records[n - 1]["seq"] + 1 == record["seq"]:
                    bad = record["prev_hash"] != records[n - 1]["hash"]
                if bad:
                    report = ChainReport(chain=chain, checked=n, ok=False, broken_seq=record["seq"],
                                         broken_id=record.get("id"), reason="hash or link mismatch")
                    break
            else:
                report = ChainReport(chain=chain, checked=len(records), ok=True)
            reports.append(report)
    return reports


if __name__ == "__main__":  # offline verification of an export
    with open(sys.argv[1], encoding="utf-8") as fh:
        results = verify_jsonl(fh)
    for r in results:
        print(f"chain {r.chain or '(no tenant)'}: {'OK' if r.ok else 'BROKEN'}, {r.checked} events verified"
              + ("" if r.ok else f"; first broken link seq {r.broken_seq} (id {r.broken_id}): {r.reason}"))
    sys.exit(0 if all(r.ok for r in results) else 1)
