"""Bulk import rate: episodes per second through the write path of ``POST .../episodes:import``,
and the CPU each episode costs this process (embedding, building and sending the bulk bodies)
and the Elasticsearch node (read once the merges the import set off are done).

    scripts/bench import [--users 4] [--episodes 1000] [--heavy 20000] [--callers 2]

``--users`` end-users import ``--episodes`` of the corpus's synthetic episodes each in one call,
and one heavy end-user ``--heavy`` in calls of 5,000, from ``--callers`` threads; the end-users
and their keys are made before the clock starts. Settings (``ENGRAM_EMBEDDER_THREADS``,
``ENGRAM_VECTOR_INDEX_TYPE``, ...) come from the environment as usual: variants are separate runs.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from benchmarks import engram
from benchmarks.corpus import HEAVY, START, Synth
from benchmarks.loading import HEAVY_IMPORT_CHUNK, LARGE_IMPORT, import_call
from benchmarks.harness import log, peak_rss_mb


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", type=int, help="ordinary end-users (default 4; --quick 2)")
    parser.add_argument("--episodes", type=int, help="episodes per ordinary end-user, one call (default 1000; "
                                                     "--quick 200)")
    parser.add_argument("--heavy", type=int, help="the heavy end-user's episodes (default 20000; --quick 1000)")
    parser.add_argument("--callers", type=int, default=2, help="import calls at once")
    parser.add_argument("--seed", type=int, default=7)


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    users = args.users or (2 if args.quick else 4)
    episodes = args.episodes or (200 if args.quick else 1000)
    heavy = args.heavy or (1000 if args.quick else 20000)
    synth = Synth(args.seed)
    tenant = engram.tenant_create(slug="bench-import", name="Bench import")
    names = [f"user-{n}" for n in range(users)] + [HEAVY]
    for name in names:
        engram.subject_get_or_create(tenant=tenant, external_id=name, actor="bench")
    jobs = [(name, 0, episodes) for name in names[:-1]]
    jobs += [(HEAVY, start, min(start + HEAVY_IMPORT_CHUNK, heavy)) for start in range(0, heavy, HEAVY_IMPORT_CHUNK)]
    engram.embedder_load()

    def one(*, job: tuple[str, int, int]) -> tuple[int, float]:
        name, start, stop = job
        return import_call(tenant, name, [synth.episode(name, n, start=START) for n in range(start, stop)])

    es_before = engram.node_cpu_ms()
    cpu, started = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(args.callers) as pool:
        calls = list(pool.map(lambda job: engram.as_request(one, job=job), jobs))
    wall, process_cpu = time.perf_counter() - started, time.process_time() - cpu
    waited = time.perf_counter()
    while engram.merges_running() and time.perf_counter() - waited < 60:
        time.sleep(0.5)
    es_cpu = (engram.node_cpu_ms() - es_before) / 1000
    imported = sum(n for n, _ in calls)
    large = [(n, s) for n, s in calls if n >= LARGE_IMPORT]
    large_rate = round(sum(n for n, _ in large) / sum(s for _, s in large), 1) if large else None
    log(f"imported {imported} episodes in {wall:.1f} s")
    return {"episodes": imported, "calls": len(calls), "callers": args.callers, "seconds": round(wall, 2),
            "episodes_per_s": round(imported / wall, 1),
            "episodes_per_s_large_calls": large_rate,
            "process_cpu_ms_per_episode": round(process_cpu * 1000 / imported, 2),
            "es_cpu_ms_per_episode": round(es_cpu * 1000 / imported, 2),
            "peak_rss_mb": peak_rss_mb(), **engram.footprint()}


def markdown(data: dict) -> str:
    large = data["episodes_per_s_large_calls"]
    return ("| episodes | calls (at once) | episodes/s | episodes/s, calls of >= 1,000 | CPU ms per episode: "
            "this process / Elasticsearch | index size MB | peak RSS MB |\n"
            "|---:|---:|---:|---:|---|---:|---:|\n"
            f"| {data['episodes']:,} | {data['calls']} ({data['callers']}) | {data['episodes_per_s']:.0f} "
            f"| {'n/a' if large is None else f'{large:.0f}'} | {data['process_cpu_ms_per_episode']} / "
            f"{data['es_cpu_ms_per_episode']} | {data['store_mb']} | {data['peak_rss_mb']:.0f} |")
