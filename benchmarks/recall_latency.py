"""Latency and memory of Engram's hot paths against the real node, at a realistic index size.

Run through ``scripts/bench`` (which starts its own Elasticsearch); extra arguments come here:

    scripts/bench [--subjects 40] [--episodes 250] [--queries 400] [--threads 4]

What it does, in throwaway indices under a scratch database (nothing is left behind):
1. one tenant with ``--subjects`` end-users, each with ``--episodes`` episodes (bulk import) made
   from the fixture corpus's sentences, 8 facts and 2 playbooks; 7 catalog entries;
2. turn writes (``episode_write``: embed, index, wait until recall can see it), timed one by one;
3. recall (``memory_recall``, k=10, every type + catalog), timed one by one after an untimed
   pass that warms Elasticsearch's caches, three ways: query vectors not cached, use-count
   bumps off; the same with bumps on (they run in the background, but share the CPUs);
   query vectors cached (a repeated question);
4. recall throughput from ``--threads`` threads;
5. this process's peak RSS and Elasticsearch's heap and index size.
Figures are printed as a Markdown table (the README's), and as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from engram_core.es.client import admin_client  # noqa: E402
from engram_core.es.schema import all_aliases  # noqa: E402
from engram_eval.sandbox import sandbox  # noqa: E402
from memory_app import services  # noqa: E402
from memory_app.embeddings import get_embedder  # noqa: E402
from memory_app.selectors import memory_recall  # noqa: E402
from memory_app.evaluation import sandbox  # noqa: E402
from memory_app.recall import memory_recall  # noqa: E402
from memory_app.usage import usage_flush, usage_record_recalled  # noqa: E402
from tenants import services as tenant_services  # noqa: E402
from tenants.models import Subject, Tenant  # noqa: E402

CORPUS = ROOT / "engram_eval" / "corpora" / "eval_corpus.json"


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"n": len(ordered), "p50": q[49], "p95": q[94], "p99": q[98], "mean": statistics.fmean(ordered)}


def percentiles_text(samples_ms: list[float]) -> str:
    """"p50 / p95 / p99" of ``samples_ms``, as the benchmarks' tables print them."""
    p = percentiles(samples_ms)
    return f"{p['p50']:.1f} / {p['p95']:.1f} / {p['p99']:.1f}"


def timed(fn, *args, **kwargs) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000.0


def new_question_ms(**recall_kwargs) -> float:
    """One recall (k=10) of a question not asked before: the query-vector cache is emptied first."""
    get_embedder().query_cache.clear()
    return timed(memory_recall, k=10, **recall_kwargs)


def _recall(*, subject, query: str, record_use: bool) -> None:
    memories = memory_recall(subject=subject, query=query, k=10)
    if record_use:  # as the REST and MCP recalls do with what they hand to the agent
        usage_record_recalled(subject=subject, memories=memories)


def recall_samples(plan: list[tuple], *, record_use: bool, clear_cache: bool) -> list[float]:
    """One timed recall (k=10) per (subject, question) of ``plan``; ``clear_cache`` empties the
    query-vector cache before each call (a new question)."""
    embedder = get_embedder()
    samples = []
    for subject, question in plan:
        if clear_cache:
            embedder.query_cache.clear()
        samples.append(timed(_recall, subject=subject, query=question, record_use=record_use))
    return samples


def corpus_texts() -> tuple[dict, list[str], list[str]]:
    """The fixture corpus, its memory sentences (the benchmarks' synthetic episodes and facts are
    drawn from them) and its questions."""
    corpus = json.loads(CORPUS.read_text())
    sentences = [m["text"] for s in corpus["subjects"] for m in s["episodic"] + s["semantic"]]
    return corpus, sentences, [q["question"] for q in corpus["questions"]]


def bench_tenant(corpus: dict, *, slug: str, name: str) -> Tenant:
    """A throwaway tenant with the corpus's first catalog."""
    tenant = Tenant.objects.create(slug=f"{slug}-{uuid.uuid4().hex[:6]}", name=name)
    for entry in corpus["tenants"][0]["catalog"]:
        services.catalog_entry_write(tenant=tenant, title=entry["title"], text=entry["text"])
    return tenant


def random_episodes(rng: random.Random, sentences: list[str], *, now: datetime, count: int) -> list[dict]:
    """``count`` episodes drawn from ``sentences``, dated at random over the two years before ``now``."""
    return [{"text": f"{rng.choice(sentences)} (note {i})",
             "occurred_at": (now - timedelta(minutes=rng.randrange(2 * 365 * 24 * 60))).isoformat()}
            for i in range(count)]


def bench_playbooks(corpus: dict) -> list[dict]:
    """Every playbook of the fixture corpus, the pool ``bench_subjects`` draws from."""
    return [p for s in corpus["subjects"] for p in s["procedural"]]


def bench_subjects(tenant: Tenant, *, count: int, episodes: int, rng: random.Random, sentences: list[str],
                   now: datetime, facts: int = 0, playbooks: list[dict] | None = None) -> list[Subject]:
    """``count`` end-users ``user-<n>`` of ``tenant``, each given ``episodes`` episodes in one bulk
    import, ``facts`` facts drawn from ``sentences`` and two playbooks drawn from ``playbooks``."""
    subjects = []
    for n in range(count):
        subject = tenant_services.subject_get_or_create(tenant=tenant, external_id=f"user-{n}", actor="bench")
        subjects.append(subject)
        services.episodes_import(subject=subject, episodes=random_episodes(rng, sentences, now=now, count=episodes))
        for text in rng.sample(sentences, facts):
            services.fact_write(subject=subject, text=text)
        for p in rng.sample(playbooks, 2) if playbooks else ():
            services.playbook_write(subject=subject, trigger=p["trigger"], steps=p["steps"])
    return subjects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=40)
    parser.add_argument("--episodes", type=int, default=250, help="episodes per end-user")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--writes", type=int, default=150)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    call_command("migrate", verbosity=0)

    corpus, sentences, questions = corpus_texts()
    now = datetime.now(UTC)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    # Rows kept (on the benchmark's own scratch database): background threads read keys through their own connections.
    with sandbox() as box:
        prefix = box.prefix
        tenant = bench_tenant(corpus, slug="bench", name="Benchmark")
        started = time.perf_counter()
        subjects = bench_subjects(tenant, count=args.subjects, episodes=args.episodes, rng=rng, sentences=sentences,
                                  now=now, facts=8,
                                  playbooks=bench_playbooks(corpus))
        load_s = time.perf_counter() - started
        total = args.subjects * (args.episodes + 10) + len(corpus["tenants"][0]["catalog"])
        log(f"loaded {total} memories for {args.subjects} end-users in {load_s:.0f}s")

        writes = []
        for _ in range(args.writes):
            # Independent arrivals: back-to-back writes would fall into step with the refresh
            # cycle and each wait a whole interval.
            time.sleep(rng.uniform(0, 0.5))
            writes.append(timed(services.episode_write, subject=rng.choice(subjects), text=rng.choice(sentences)))
        log("timed turn writes")

        embedder = get_embedder()
        plan = [(rng.choice(subjects), rng.choice(questions)) for _ in range(args.queries)]

        def run(*, record_use: bool, clear_cache: bool) -> list[float]:
            return recall_samples(plan, record_use=record_use, clear_cache=clear_cache)

        run(record_use=False, clear_cache=False)  # warm-up: keys, connections, Elasticsearch's caches
        cold = run(record_use=False, clear_cache=True)
        bumps = run(record_use=True, clear_cache=True)
        usage_flush()
        cached = run(record_use=False, clear_cache=False)
        embed_ms = []
        for _, question in plan[:100]:
            embedder.query_cache.clear()
            embed_ms.append(timed(embedder.embed_query, question))
        log("timed recalls")

        def worker(chunk: list[tuple]) -> int:
            for subject, question in chunk:
                memory_recall(subject=subject, query=question, k=10)
            return len(chunk)

        started = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            # Each worker runs in a copy of this context: the sandbox's index prefix is a context variable.
            chunks = [(copy_context(), plan[i::args.threads]) for i in range(args.threads)]
            done = sum(pool.map(lambda job: job[0].run(worker, job[1]), chunks))
        throughput = done / (time.perf_counter() - started)
        usage_flush()

        es = admin_client()
        store = es.indices.stats(index=",".join(all_aliases(prefix=prefix)), metric="store")
        store_mb = store["_all"]["primaries"]["store"]["size_in_bytes"] / 1e6
        jvm = next(iter(es.nodes.stats(metric="jvm")["nodes"].values()))["jvm"]["mem"]
        results = {
            "memories": total, "end_users": args.subjects, "load_seconds": round(load_s, 1),
            "turn_write_ms": percentiles(writes),
            "recall_ms_uncached_query": percentiles(cold),
            "recall_ms_uncached_query_with_use_count_bumps": percentiles(bumps),
            "recall_ms_cached_query": percentiles(cached),
            "query_embedding_ms": percentiles(embed_ms),
            "recalls_per_second": round(throughput, 1), "threads": args.threads,
            "process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "es_heap_used_mb": round(jvm["heap_used_in_bytes"] / 2**20, 1),
            "es_heap_max_mb": round(jvm["heap_max_in_bytes"] / 2**20, 1),
            "index_store_mb": round(store_mb, 1),
            "cpus": os.cpu_count(),
            "embedder_runtime": getattr(embedder, "runtime", type(embedder).__name__),
        }
    print_table(results)
    if args.json:
        print(json.dumps(results, indent=2))


def print_table(r: dict) -> None:
    print(f"{r['memories']} memories, {r['end_users']} end-users, {r['cpus']} CPUs "
          f"(loaded in {r['load_seconds']} s)\n")
    print("| operation | n | p50 ms | p95 ms | p99 ms |")
    print("|---|---|---|---|---|")
    rows = [("turn write (embed + index + visible to recall)", "turn_write_ms"),
            ("recall, new question", "recall_ms_uncached_query"),
            ("recall, new question, use-count bumps on", "recall_ms_uncached_query_with_use_count_bumps"),
            ("recall, repeated question (vector cached)", "recall_ms_cached_query"),
            (f"query embedding alone (MiniLM, {r.get('embedder_runtime', 'numpy')})", "query_embedding_ms")]
    for label, key in rows:
        p = r[key]
        print(f"| {label} | {p['n']} | {p['p50']:.1f} | {p['p95']:.1f} | {p['p99']:.1f} |")
    print(f"\nrecall throughput: {r['recalls_per_second']} recalls/s from {r['threads']} threads; "
          f"benchmark process peak RSS {r['process_peak_rss_mb']} MB; Elasticsearch heap "
          f"{r['es_heap_used_mb']} / {r['es_heap_max_mb']} MB; indices {r['index_store_mb']} MB on disk")


if __name__ == "__main__":
    main()
