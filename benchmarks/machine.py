"""The machine's own speed: one fixed single-threaded workload (SHA-256 rounds and integer
arithmetic, no I/O) timed in CPU milliseconds, so that a run's figures can be read against the
machine's drift rather than the code's. Every result records a probe at its start and end; the
``machine`` suite watches an idle machine:

    python -m benchmarks machine [--seconds 150] [--every 5]

CPU time leaves out waiting for a core, so a slower probe means each instruction took longer
(the host's other tenants, a lower clock), which a shared virtual machine need not show as steal.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections.abc import Callable

from benchmarks.harness import log

STORES = False  # no database, no Elasticsearch


def workload() -> float:
    """One run of the fixed workload: its CPU time in ms."""
    began = time.process_time()
    digest = b"engram" * 10
    for _ in range(100_000):
        digest = hashlib.sha256(digest).digest()
    total = 0
    for i in range(750_000):
        total += i * i % 7
    return (time.process_time() - began) * 1000


def probe(rounds: int = 3) -> float:
    """The workload's median CPU ms over ``rounds`` runs."""
    return round(statistics.median(workload() for _ in range(rounds)), 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, help="how long to watch (default 150; --quick 10)")
    parser.add_argument("--every", type=float, default=5, help="seconds between probes")
    parser.add_argument("--rounds", type=int, default=3, help="workload runs per probe (their median)")


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    seconds = args.seconds or (10 if args.quick else 150)
    stop_at, seen = time.monotonic() + seconds, []
    while time.monotonic() < stop_at:
        seen.append(probe(args.rounds))
        log(f"fixed workload {seen[-1]} ms of CPU")
        time.sleep(args.every)
    return {"probes_ms": seen}


def markdown(data: dict) -> str:
    seen = data["probes_ms"]
    return (f"{len(seen)} probes of the fixed workload, ms of CPU (lower is faster): min {min(seen)}, median "
            f"{statistics.median(seen)}, max {max(seen)} (max / min {max(seen) / min(seen):.2f})")
