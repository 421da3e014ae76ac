"""The machine's own speed: one fixed single-threaded workload (SHA-256 rounds and integer
arithmetic, no I/O), timed in CPU milliseconds.

The same code on this 2-core machine has needed 27 and then 51 ms of CPU per HTTP request four
minutes apart (docs/performance.md). Timing a workload that never changes tells the machine's
drift from the code's: ``scripts/bench --http`` runs a probe just before and just after each
measured step (``http_load.py``, idle moments), and this script alone watches an idle machine:

    python benchmarks/machine_speed.py [--seconds 150] [--every 5]

Each line is one probe's median of ``--rounds`` runs; the last line the spread over the whole
watch. A workload's CPU time includes none of the waiting for a core (``time.process_time``), so
a slower probe means each instruction took longer: the host's other tenants (memory bandwidth,
shared caches, a sibling hyperthread) or a lower clock, none of which this machine shows as steal.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time


def workload() -> float:
    """One run of the fixed workload: its CPU time in ms (70-135 ms on this machine, 2026-12-02)."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--every", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    stop_at, seen = time.monotonic() + args.seconds, []
    while time.monotonic() < stop_at:
        seen.append(probe(args.rounds))
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC  fixed workload {seen[-1]} ms of CPU", flush=True)
        time.sleep(args.every)
    print(f"{len(seen)} probes: min {min(seen)}, median {statistics.median(seen)}, max {max(seen)} ms "
          f"(max / min {max(seen) / min(seen):.2f})")


if __name__ == "__main__":
    main()
