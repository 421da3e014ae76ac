"""Read-your-writes by Elasticsearch's own refresh parameter against Engram's deferred refresh
(``memory_app.freshness``), on one index with the deployed refresh interval:

    scripts/bench refresh_modes [--writes 40] [--rounds 3] [--gap 0]

Each write is followed by a search for it, at once (the worst case for a deferred refresh: an agent
that recalls right after writing) or ``--gap`` seconds later (the end-user's next turn). Modes,
taking turns write by write:

- ``wait_for``: the write waits for the next periodic refresh (``refresh=wait_for``);
- ``true``: the write refreshes the index itself (``refresh=true``, as a library's "auto refresh");
- ``deferred``: Engram's way: the write answers at once; the read asks whether the document is
  searchable (a get from the searcher) and refreshes the index only if not;
- ``none``: the control: the write answers at once and the read searches as it is.

Measured: the write's latency, the read's extra latency (the check and a forced refresh), the share
of reads that found the write, and the forced refreshes per write.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from elasticsearch import NotFoundError

from benchmarks import engram
from benchmarks.harness import log, ms, percentiles

STORES = False  # one index of its own on the run's node; no database
MODES = ("wait_for", "true", "deferred", "none")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--writes", type=int, help="writes per mode and round (default 40; --quick 5)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; --quick 1)")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between a write and its read (default 0)")


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    writes, rounds = args.writes or (5 if args.quick else 40), args.rounds or (1 if args.quick else 3)
    es = engram.admin_client()
    index = f"engram-bench-refresh-{uuid.uuid4().hex[:8]}"
    es.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 0,
                                             "refresh_interval": settings.ES_REFRESH_INTERVAL},
                      mappings={"properties": {"text": {"type": "text"}, "mark": {"type": "keyword"}}})
    samples: dict = {mode: {"write_ms": [], "read_extra_ms": [], "found": 0, "refreshes": 0} for mode in MODES}
    rng = random.Random(7)
    try:
        for round_ in range(rounds):
            for _ in range(writes):
                for mode in rng.sample(MODES, len(MODES)):
                    _one(es, index, mode, samples[mode], gap=args.gap)
                time.sleep(rng.uniform(0, 0.3))  # the periodic refresh falls anywhere between writes
            log(f"round {round_ + 1}: " + ", ".join(f"{m} {samples[m]['found']}" for m in MODES))
            save(_summary(samples, writes * (round_ + 1), args.gap))
    finally:
        es.indices.delete(index=index, ignore_unavailable=True)
    return _summary(samples, writes * rounds, args.gap)


def _one(es, index: str, mode: str, sample: dict, *, gap: float) -> None:
    mark = uuid.uuid4().hex
    began = time.perf_counter()
    es.index(index=index, id=mark, document={"text": f"a turn {mark}", "mark": mark},
             refresh={"wait_for": "wait_for", "true": "true"}.get(mode, "false"))
    sample["write_ms"].append((time.perf_counter() - began) * 1000)
    sample["refreshes"] += mode == "true"
    time.sleep(gap)
    began = time.perf_counter()
    if mode == "deferred":
        try:
            searchable = es.get(index=index, id=mark, realtime=False, source=False).get("found")
        except NotFoundError:
            searchable = False
        if not searchable:
            es.indices.refresh(index=index)
            sample["refreshes"] += 1
    extra = (time.perf_counter() - began) * 1000
    found = es.search(index=index, query={"term": {"mark": mark}}, size=1)["hits"]["total"]["value"]
    sample["read_extra_ms"].append(extra)
    sample["found"] += bool(found)


def _summary(samples: dict, writes: int, gap: float) -> dict:
    out: dict = {"writes": writes, "gap": gap, "refresh_interval": settings.ES_REFRESH_INTERVAL, "modes": {}}
    for mode, s in samples.items():
        done = max(1, len(s["write_ms"]))
        out["modes"][mode] = {"write_ms": percentiles(s["write_ms"], (50, 95)),
                              "read_extra_ms": percentiles(s["read_extra_ms"], (50, 95)),
                              "found": round(s["found"] / done, 3), "refreshes_per_write": round(s["refreshes"] / done, 3)}
    return out


def markdown(data: dict) -> str:
    when = f"{data['gap']:g} s later" if data.get("gap") else "at once"
    lines = [f"{data['writes']} writes per mode, each read {when}; refresh interval {data['refresh_interval']}:", "",
             "| mode | write p50 / p95 ms | read's extra p50 / p95 ms | reads that found the write | "
             "forced refreshes per write |", "|---|---:|---:|---:|---:|"]
    for mode, m in data["modes"].items():
        lines.append(f"| {mode} | {ms(m['write_ms'], (50, 95))} | {ms(m['read_extra_ms'], (50, 95))} | "
                     f"{m['found']:.3f} | {m['refreshes_per_write']} |")
    return "\n".join(lines)
