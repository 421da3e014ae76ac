"""The audit chain's links: HMAC-SHA256 (what each event carries) against Ed25519 (what checkpoints
and exports carry), per event, in CPU microseconds on this machine:

    python -m benchmarks audit_links [--events 20000] [--rounds 5]

- ``sign``: what appending one event costs the request that records it (``audit_record`` runs on
  every staff read and every token's first read in an hour);
- ``verify``: what checking one event costs ``audit_verify``, the checkpoint writer and an export
  (each walks whole chains).

The messages are what the chain signs: ``prev_hash`` and the canonical JSON of an event's fields.
Each figure is the median of ``--rounds`` runs over ``--events`` messages.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import secrets
import statistics
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from benchmarks.harness import log
from tenants import audit_chain

STORES = False  # no database, no Elasticsearch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, help="messages per round (default 20,000; --quick 2,000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (their median)")


def _messages(n: int) -> list[bytes]:
    prev, out = audit_chain.GENESIS, []
    for seq in range(1, n + 1):
        fields = {"chain": "acme", "seq": seq, "created_at": f"2026-12-06T10:00:{seq % 60:02d}.123456+00:00",
                  "actor_type": "agent_token", "actor": "3f9a1c2b7d4e (support bot)", "action": "token.read",
                  "tenant_slug": "acme", "subject_ref": "0b8f3c52-7a1e-4a5b-9d2f-6c1e8b9a0d37",
                  "target_id": "3f9a1c2b7d4e", "details": {"kind": "recall", "memories": 10, "staff": "ada"},
                  "key_id": "78989765b9bef7e3"}
        out.append(f"{prev}\n{audit_chain.canonical(fields, audit_chain.KEYED_FIELDS)}".encode())
        prev = hashlib.sha256(out[-1]).hexdigest()
    return out


def _per_event_us(fn: Callable[[bytes, int], object], messages: list[bytes]) -> float:
    began = time.process_time()
    for n, message in enumerate(messages):
        fn(message, n)
    return (time.process_time() - began) / len(messages) * 1e6


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    n = args.events or (2_000 if args.quick else 20_000)
    messages = _messages(n)
    key = secrets.token_bytes(32)
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    macs = [hmac.new(key, m, hashlib.sha256).hexdigest() for m in messages]
    signatures = [private.sign(m) for m in messages]
    cases = {
        "hmac_sign": lambda m, i: hmac.new(key, m, hashlib.sha256).hexdigest(),
        "hmac_verify": lambda m, i: hmac.compare_digest(hmac.new(key, m, hashlib.sha256).hexdigest(), macs[i]),
        "ed25519_sign": lambda m, i: private.sign(m),
        "ed25519_verify": lambda m, i: public.verify(signatures[i], m),
    }
    results: dict = {"events": n, "rounds": args.rounds, "message_bytes": round(statistics.mean(map(len, messages)))}
    for name, fn in cases.items():
        runs = [_per_event_us(fn, messages) for _ in range(args.rounds)]
        results[f"{name}_us"] = round(statistics.median(runs), 2)
        log(f"{name}: {results[f'{name}_us']} us of CPU per event")
        save(results)
    return results


def markdown(data: dict) -> str:
    if "ed25519_verify_us" not in data:
        return f"(partial) {data}"
    rows = [("sign (append one event)", "hmac_sign_us", "ed25519_sign_us"),
            ("verify (check one event)", "hmac_verify_us", "ed25519_verify_us")]
    lines = [f"{data['events']:,} event messages of {data['message_bytes']} bytes, median of {data['rounds']} rounds, "
             "CPU microseconds per event:", "",
             "| | HMAC-SHA256 | Ed25519 | Ed25519 / HMAC |", "|---|---|---|---|"]
    for label, mac, ed in rows:
        lines.append(f"| {label} | {data[mac]} | {data[ed]} | {data[ed] / data[mac]:.0f}x |")
    per_million = data["ed25519_verify_us"] - data["hmac_verify_us"]
    lines += ["", f"A chain of a million events: {data['hmac_verify_us']:.1f} s to verify with HMAC links, "
                  f"{data['ed25519_verify_us']:.0f} s with Ed25519 links (+{per_million:.0f} s)."]
    return "\n".join(lines)
