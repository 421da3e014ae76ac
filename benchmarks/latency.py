"""Service-level latency at given corpus sizes: recall (new and repeated questions; ordinary
end-users and the heavy one), a turn and a superseding fact write, p50 / p95 / p99; this
process's RSS, the index size and the node's heap. The corpus (benchmarks/corpus.py) grows in
place from one size to the next.

    scripts/bench latency [--sizes 10000] [--queries 300] [--writes 60] [--tenants 100]

Per size, one call at a time: recalls (k=10, every type and the catalog; ordinary questions, and
questions gathering over time, which take the second hop, in rows of their own) after an untimed pass
that warms Elasticsearch's caches and the end-users' keys, the query-vector cache emptied before
each new question; then turns (``engram.turn``: the episode stored while a recall runs on its
text, as ``POST .../turns``) and fact writes superseding one of the end-user's facts, at random
intervals (back-to-back writes would fall into step with the refresh cycle).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from benchmarks import engram
from benchmarks.corpus import HEAVY, START, Synth
from benchmarks.loading import Corpus
from benchmarks.harness import log, ms, peak_rss_mb, percentiles, rss_mb, timed_ms

PHASES = ("refresh", "embed", "search")
HOP = "hop"  # the second hop's two searches (memory_app.recall.search.hop_leg): gathering questions only


def corpus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenants", type=int, help="default 100; --quick 10")
    parser.add_argument("--users-per-tenant", type=int, help="ordinary end-users per tenant (default 4; --quick 2)")
    parser.add_argument("--threads", type=int, default=2, help="import threads (single writes: 16 times as many)")
    parser.add_argument("--seed", type=int, default=7)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    corpus_arguments(parser)
    parser.add_argument("--sizes", type=int, nargs="+", help="memories, growing (default 10000; --quick 1000)")
    parser.add_argument("--queries", type=int, help="recalls per kind and size, the heavy end-user half as many "
                                                    "(default 300; --quick 40)")
    parser.add_argument("--writes", type=int, help="turns and fact supersessions per size (default 60; --quick 10)")


def corpus_create(args: argparse.Namespace) -> tuple[Corpus, float]:
    """The corpus's tenants and end-users, empty; the seconds it took (minting a key per end-user)."""
    corpus = Corpus(synth=Synth(args.seed), tenants=args.tenants or (10 if args.quick else 100),
                    users_per_tenant=args.users_per_tenant or (2 if args.quick else 4), threads=args.threads)
    created = corpus.create()
    log(f"{len(corpus.subjects)} end-users in {corpus.n_tenants} tenants created (keys minted) in {created:.0f} s")
    return corpus, created


def measure(corpus: Corpus, *, queries: int, writes: int, rng: random.Random, questions: list[str],
            gathering: list[str] | None = None) -> dict:
    """One size's figures (see the module doc); with ``gathering``, also recalls of ordinary
    end-users asking those questions (the second hop's), drawn by a generator of their own so that
    the other rows ask what they asked without them."""
    normal, result = corpus.ordinary, {}
    plans = [("recall", [(rng.choice(normal), rng.choice(questions)) for _ in range(queries)]),
             ("heavy", [(corpus.heavy, rng.choice(questions)) for _ in range(max(20, queries // 2))])]
    if gathering:
        own = random.Random(f"gathering/{len(gathering)}")
        plans.append(("gather", [(own.choice(normal), own.choice(gathering)) for _ in range(queries)]))
    for key, plan in plans:
        for subject, question in plan:  # untimed: keys, connections, Elasticsearch's caches
            engram.memory_recall(subject=subject, query=question, k=10)
        samples, phases = [], {p: [] for p in (*PHASES, HOP, "rest")}
        for subject, question in plan:
            engram.new_question()
            started = time.perf_counter()
            _, spent = engram.recall_phases(subject=subject, query=question, k=10)
            samples.append((time.perf_counter() - started) * 1000)
            for p in (*PHASES, HOP):
                phases[p].append(spent.get(p, 0.0))
            phases["rest"].append(samples[-1] - sum(spent.get(p, 0.0) for p in (*PHASES, HOP)))
        result[f"{key}_new"] = percentiles(samples)
        result[f"{key}_new_phases"] = {p: percentiles(v, (50, 95)) for p, v in phases.items()}
        for subject, question in plan:  # untimed: every query vector cached again
            engram.memory_recall(subject=subject, query=question, k=10)
        result[f"{key}_repeated"] = percentiles([timed_ms(engram.memory_recall, subject=s, query=q, k=10)
                                                 for s, q in plan])
    log("timed recalls")

    turns = []
    for n in range(writes):
        time.sleep(rng.uniform(0, 0.5))
        subject = rng.choice(normal)
        turns.append(timed_ms(engram.turn, tenant=subject.tenant, external_id=subject.external_id,
                              text=corpus.synth.episode(f"turn-{subject.external_id}", n, start=START)["text"]))
    supersede = []
    with_facts = sorted(e for e, ids in corpus.facts.items() if ids and e != HEAVY)
    for n in range(writes if with_facts else 0):
        time.sleep(rng.uniform(0, 0.5))
        external_id = rng.choice(with_facts)
        old = corpus.facts[external_id].pop()
        started = time.perf_counter()
        submitted = engram.write_submit(tenant=corpus.subjects[external_id].tenant, external_id=external_id,
                                        operation="fact", actor="bench",
                                        payload={"text": corpus.synth.fact(f"new-{external_id}", n),
                                                 "supersedes": [old], "contradiction": "natural"})
        supersede.append((time.perf_counter() - started) * 1000)
        corpus.facts[external_id].append(submitted.memory_id)
    result["turn"] = percentiles(turns)
    result["fact_supersede"] = percentiles(supersede)
    log("timed writes")
    return {**result, **engram.footprint(), "rss_mb": rss_mb(), "peak_rss_mb": peak_rss_mb()}


def questions(seed: int) -> list[str]:
    return [Synth(seed).question(n) for n in range(2000)]


def gathering_questions(seed: int) -> list[str]:
    return [Synth(seed).gathering_question(n) for n in range(500)]


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    sizes = args.sizes or ([1000] if args.quick else [10000])
    queries = args.queries or (40 if args.quick else 300)
    writes = args.writes or (10 if args.quick else 60)
    rng = random.Random(args.seed)
    corpus, created = corpus_create(args)
    asked = questions(args.seed)
    data = {"tenants": corpus.n_tenants, "users_per_tenant": corpus.users_per_tenant, "created_s": round(created, 1),
            "queries": queries, "writes": writes, "rows": []}
    for size in sizes:
        data["rows"].append(size_row(corpus, size, queries=queries, writes=writes, rng=rng, questions=asked,
                                     gathering=gathering_questions(args.seed)))
        save(data)
    return data


def size_row(corpus: Corpus, size: int, **measured) -> dict:
    grown = corpus.grow(size)
    log(f"{size}: imported {grown['episodes_imported']} episodes in {grown['import_s']:.1f} s, "
        f"{grown['singles']} facts, playbooks and catalog entries in {grown['singles_s']:.1f} s")
    return {"memories": corpus.loaded.total, "heavy_memories": corpus.loaded.users[(0, HEAVY)].total,
            **grown, **measure(corpus, **measured)}


_LATENCY_ROWS = [("recall, new question", "recall_new"), ("recall, repeated question", "recall_repeated"),
                 ("recall, heavy end-user, new question", "heavy_new"),
                 ("recall, heavy end-user, repeated question", "heavy_repeated"),
                 ("recall, question gathering over time (second hop), new", "gather_new"),
                 ("recall, question gathering over time (second hop), repeated", "gather_repeated"),
                 ("turn (write + pre-recall)", "turn"), ("fact write superseding one fact", "fact_supersede")]


def corpus_table(rows: list[dict]) -> str:
    """One column per corpus size; latencies as p50 / p95 / p99 ms."""
    lines = ["| | " + " | ".join(f"{r['memories']:,} memories" for r in rows) + " |", "|---|" + "---:|" * len(rows),
             "| heavy end-user's memories | " + " | ".join(f"{r['heavy_memories']:,}" for r in rows) + " |"]
    for label, key in _LATENCY_ROWS:
        lines.append(f"| {label}, p50 / p95 / p99 ms | " + " | ".join(ms(r.get(key)) for r in rows) + " |")
    for phase in (*PHASES, "rest"):
        lines.append(f"| recall, new question: {phase}, p50 / p95 ms | "
                     + " | ".join(ms((r.get("recall_new_phases") or {}).get(phase), (50, 95)) for r in rows) + " |")
    for phase in (*PHASES, HOP, "rest"):
        lines.append(f"| recall, gathering question: {phase}, p50 / p95 ms | "
                     + " | ".join(ms((r.get("gather_new_phases") or {}).get(phase), (50, 95)) for r in rows) + " |")
    for label, key, fmt in [("bulk import, all calls, episodes/s", "import_eps", "{:.0f}"),
                            ("bulk import, calls of >= 1,000 episodes only, episodes/s", "import_eps_large", "{:.0f}"),
                            ("index size on disk, MB", "store_mb", "{:.1f}"),
                            ("Elasticsearch heap used / max, MB", "heap_used_mb", "{:.0f}"),
                            ("benchmark process RSS (peak), MB", "rss_mb", "{:.0f}")]:
        cells = ["n/a" if r.get(key) is None else fmt.format(r[key]) for r in rows]
        if key == "heap_used_mb":
            cells = [f"{c} / {r.get('heap_max_mb')}" for c, r in zip(cells, rows, strict=True)]
        elif key == "rss_mb":
            cells = [f"{c} ({r.get('peak_rss_mb', 0):.0f})" for c, r in zip(cells, rows, strict=True)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(data: dict) -> str:
    return (f"{data['tenants']} tenants x {data['users_per_tenant']} end-users + 1 heavy end-user (a fifth of "
            f"each size); {data['created_s']} s to create them (keys minted). Per size {data['queries']} recalls of "
            f"each kind (heavy end-user: {max(20, data['queries'] // 2)}), {data['writes']} turns and "
            f"{data['writes']} supersessions, one at a time.\n\n" + corpus_table(data["rows"]))
