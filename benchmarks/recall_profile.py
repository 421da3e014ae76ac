"""Where a recall's and a bulk import's time goes, phase by phase, against the real node.

Run through ``scripts/bench --profile`` (its own Elasticsearch); extra arguments come here:

    scripts/bench --profile [--subjects 40] [--episodes 250] [--queries 300] [--cprofile FILE]

It loads the same corpus as benchmarks/recall_latency.py (``--subjects`` end-users with
``--episodes`` imported episodes, 8 facts and 2 playbooks each, the fixture catalog), timing
every import's phases; then runs ``memory_recall`` (k=10, every type + catalog, new questions:
query-vector cache cleared, use-count bumps off) after one untimed warm-up pass, timing each
phase by wrapping the functions ``memory_recall`` calls (nothing else changes):

- refresh check, per-user key lookup, query embedding, ``_msearch`` body, ``_msearch`` round
  trip (and inside it Elasticsearch's own ``took``, per leg), fusion, scoring, and the rest
  (validation, building the result dicts: Python overhead);
- then, outside the call, the client-side JSON cost of that request and response, and the
  JSON rendering of the result an API view would do.

Import phases: validation, derived-context lookup, embedding, and the bulk requests (indexing,
the HNSW graph, the refresh wait). The embedder is the configured one
(``ENGRAM_EMBEDDER_RUNTIME``). Prints Markdown tables; ``--json`` adds the raw figures.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from engram_core.es.client import base_client  # noqa: E402
from memory_app import recall, services  # noqa: E402
from memory_app.recall import rank, search  # noqa: E402
from memory_app.recall.options import RecallOptions  # noqa: E402
from memory_app.recall.read import query_read  # noqa: E402
from memory_app.embeddings import get_embedder  # noqa: E402
from engram_eval.sandbox import sandbox  # noqa: E402
from tenants import services as tenant_services  # noqa: E402
from recall_latency import bench_playbooks, bench_tenant, corpus_texts, random_episodes  # noqa: E402
from tenants.services.clients import subject_es_client


class Phases:
    """Per-call phase timings (ms), collected by the wrappers below."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.calls: list[dict[str, float]] = []

    def add(self, name: str, ms: float) -> None:
        self.current[name] += ms

    def close(self) -> None:
        self.calls.append(dict(self.current))
        self.current = defaultdict(float)


def wrap(phases: Phases, name: str, fn):
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            phases.add(name, (time.perf_counter() - started) * 1000.0)
    return timed


class TimedEmbedder:
    def __init__(self, inner, phases: Phases) -> None:
        self.inner, self.phases = inner, phases
        self.embed_query = wrap(phases, "query embedding", inner.embed_query)
        self.embed_documents = wrap(phases, "embedding", inner.embed_documents)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class TimedClient:
    """A per-user client whose ``msearch`` is timed, with Elasticsearch's ``took`` kept per leg."""

    def __init__(self, inner, phases: Phases, last: dict) -> None:
        self.inner, self.phases, self.last = inner, phases, last

    def msearch(self, **kwargs):
        started = time.perf_counter()
        response = self.inner.msearch(**kwargs)
        self.phases.add("_msearch round trip", (time.perf_counter() - started) * 1000.0)
        body = response.body
        self.phases.add("  of which Elasticsearch took (whole _msearch)", float(body.get("took", 0)))
        for leg, item in zip(search.plain_leg_names(RecallOptions.from_settings()), body["responses"], strict=False):
            self.phases.add(f"  of which took, {leg} leg", float(item.get("took", 0)))
        self.last["request"], self.last["response"] = kwargs["searches"], body
        return response

    def __getattr__(self, name):
        return getattr(self.inner, name)


def table(title: str, calls: list[dict[str, float]], order: list[str]) -> tuple[str, dict]:
    total = statistics.fmean(c["total"] for c in calls)
    lines = [f"**{title}** ({len(calls)} calls, mean total {total:.1f} ms)\n",
             "| phase | p50 ms | p95 ms | mean ms | share of mean |", "|---|---|---|---|---|"]
    figures = {}
    for name in order:
        values = sorted(c.get(name, 0.0) for c in calls)
        q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
        mean = statistics.fmean(values)
        figures[name] = {"p50": q[49], "p95": q[94], "mean": mean}
        share = f"{100 * mean / total:.0f}%" if not name.startswith("  ") and name != "total" else ""
        lines.append(f"| {name} | {q[49]:.2f} | {q[94]:.2f} | {mean:.2f} | {share} |")
    return "\n".join(lines), figures


def knn_sweep(values: list[int], plan: list) -> str:
    """The dense leg alone, per ``num_candidates``: _msearch latency, and what share of its top 10 /
    top 80 an exhaustive candidate list (10,000, Elasticsearch's maximum) also returns."""
    from tenants.selectors import index_prefix_for, memory_scope
    
    from engram_core.es.schema import MemoryType, alias_name

    embedder = get_embedder()
    saved = settings.ENGRAM_RECALL_NUM_CANDIDATES, settings.ENGRAM_RECALL_BM25

    def run(num_candidates: int) -> tuple[list[float], list[list[str]]]:
        settings.ENGRAM_RECALL_NUM_CANDIDATES = num_candidates
        times, ids = [], []
        for subject, question in plan:
            types = list(MemoryType)
            prefix = index_prefix_for(tenant=subject.tenant)
            options = RecallOptions.from_settings()
            reading = query_read(query=question, name_words=frozenset(), now=datetime.now(UTC), tz=None,
                                 options=options)
            allowed = search.Allowed(types=types, index_for={t: alias_name(t, prefix=prefix) for t in types},
                                     scope=memory_scope(subject=subject))
            body = search.plain_legs(reading=reading, vector=embedder.embed_query(question), allowed=allowed,
                                     options=options)
            es = subject_es_client(subject=subject)
            started = time.perf_counter()
            # The dense leg as fusion sees it (with the episodes' passages, in the same search).
            response = es.msearch(searches=body)["responses"][0]
            times.append((time.perf_counter() - started) * 1000.0)
            ids.append([h["_id"] for h in response["hits"]["hits"]])
        return times, ids

    settings.ENGRAM_RECALL_BM25 = False
    try:
        run(values[0])  # warm-up
        _, exact = run(10000)
        lines = ["**dense leg alone, by num_candidates** (query vectors cached; overlap with 10,000 candidates)\n",
                 "| num_candidates | p50 ms | p95 ms | top-10 overlap | top-80 overlap |", "|---|---|---|---|---|"]
        for value in values:
            times, ids = run(value)
            q = statistics.quantiles(sorted(times), n=100, method="inclusive")
            top10 = statistics.fmean(len(set(a[:10]) & set(b[:10])) / max(1, len(b[:10])) for a, b in zip(ids, exact))
            top80 = statistics.fmean(len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(ids, exact))
            lines.append(f"| {value} | {q[49]:.1f} | {q[94]:.1f} | {top10:.3f} | {top80:.3f} |")
        return "\n".join(lines)
    finally:
        settings.ENGRAM_RECALL_NUM_CANDIDATES, settings.ENGRAM_RECALL_BM25 = saved


JSON_ROWS = ("  client JSON encode + decode, orjson as the client does (redone)",
             "  the same with the standard library's json (the client's before 2026-11-25)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=40)
    parser.add_argument("--episodes", type=int, default=250, help="episodes per end-user")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cprofile", help="also write a cProfile of the timed recalls (top 30 by own time) here")
    parser.add_argument("--knn-sweep", default="", help="comma-separated num_candidates values: for each, the "
                        "dense leg's _msearch latency and its overlap with an exhaustive (10,000) candidate list")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    call_command("migrate", verbosity=0)
    corpus, sentences, questions = corpus_texts()
    now = datetime.now(UTC)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    embedder = get_embedder()
    embedder.embed_query("load the weights before timing anything")

    with sandbox():
        tenant = bench_tenant(corpus, slug="prof", name="Profile")

        # ---- bulk import, phase by phase
        imports = Phases()
        timed_embedder = TimedEmbedder(embedder, imports)
        services.get_embedder = lambda: timed_embedder
        contexts_for_batch = services.derived.contexts_for_batch
        mark: dict[str, float] = {}

        def contexts(**kwargs):
            mark["validated"] = time.perf_counter()
            return wrap(imports, "derived-context lookup", contexts_for_batch)(**kwargs)

        services.derived.contexts_for_batch = contexts
        subjects = []
        started_all = time.perf_counter()
        for n in range(args.subjects):
            subject = tenant_services.subject_get_or_create(tenant=tenant, external_id=f"user-{n}", actor="bench")
            subjects.append(subject)
            episodes = random_episodes(rng, sentences, now=now, count=args.episodes)
            started = time.perf_counter()
            services.episodes_import(subject=subject, episodes=episodes)
            imports.add("total", (time.perf_counter() - started) * 1000.0)
            imports.add("validation", (mark["validated"] - started) * 1000.0)
            c = imports.current
            imports.add("bulk requests (index, HNSW, refresh wait)",
                        c["total"] - c["validation"] - c["derived-context lookup"] - c["embedding"])
            imports.close()
            for text in rng.sample(sentences, 8):
                services.fact_write(subject=subject, text=text)
            for p in rng.sample(bench_playbooks(corpus), 2):
                services.playbook_write(subject=subject, trigger=p["trigger"], steps=p["steps"])
        services.get_embedder = get_embedder
        services.derived.contexts_for_batch = contexts_for_batch
        load_s = time.perf_counter() - started_all
        total_memories = args.subjects * (args.episodes + 10) + len(corpus["tenants"][0]["catalog"])
        import_s = sum(c["total"] for c in imports.calls) / 1000.0
        log(f"loaded {total_memories} memories in {load_s:.0f}s "
            f"(imports: {args.subjects * args.episodes / import_s:.0f} episodes/s)")

        # ---- recall, phase by phase
        plan = [(rng.choice(subjects), rng.choice(questions)) for _ in range(args.queries)]
        for subject, question in plan:  # warm-up: keys, connections, Elasticsearch's caches
            recall.memory_recall(subject=subject, query=question, k=10)
        recalls = Phases()
        last: dict = {}
        timed_embedder = TimedEmbedder(embedder, recalls)
        originals = {name: getattr(recall, name) for name in ("refresh_ensure", "subject_es_client", "get_embedder",
                                                               "hits_rank")}
        original_body, original_fuse = search.plain_legs, rank.hits_fuse

        def scoring(*args, **kwargs):  # ranking without the fusion inside it, which is timed apart
            fused_before, started = recalls.current["fusion"], time.perf_counter()
            try:
                return originals["hits_rank"](*args, **kwargs)
            finally:
                recalls.add("scoring (multipliers, sort)", (time.perf_counter() - started) * 1000.0
                            - (recalls.current["fusion"] - fused_before))

        client_for = wrap(recalls, "per-user key and client", originals["subject_es_client"])
        recall.refresh_ensure = wrap(recalls, "refresh check", originals["refresh_ensure"])
        recall.subject_es_client = lambda **kw: TimedClient(client_for(**kw), recalls, last)
        recall.get_embedder = lambda: timed_embedder
        search.plain_legs = wrap(recalls, "_msearch body", original_body)
        rank.hits_fuse = wrap(recalls, "fusion", original_fuse)
        recall.hits_rank = scoring
        profiler = cProfile.Profile() if args.cprofile else None
        try:
            for subject, question in plan:
                embedder.query_cache.clear()
                if profiler:
                    profiler.enable()
                started = time.perf_counter()
                results = recall.memory_recall(subject=subject, query=question, k=10)
                total = (time.perf_counter() - started) * 1000.0
                if profiler:
                    profiler.disable()
                recalls.add("total", total)
                c = recalls.current
                recalls.add("rest: validation, result dicts (Python)", total - sum(
                    v for k, v in c.items() if k != "total" and not k.startswith("  ")))
                # Outside the timed call: what the client's JSON (de)serialisation and an API
                # view's rendering of this recall cost, redone here to be measured.
                serializers = base_client().transport.serializers
                started = time.perf_counter()
                serializers.get_serializer("application/x-ndjson").dumps(last["request"])
                raw = serializers.get_serializer("application/json").dumps(last["response"])
                serializers.get_serializer("application/json").loads(raw)
                recalls.add(JSON_ROWS[0], (time.perf_counter() - started) * 1000.0)
                started = time.perf_counter()
                for line in last["request"]:
                    json.dumps(line)
                json.loads(json.dumps(last["response"]))
                recalls.add(JSON_ROWS[1], (time.perf_counter() - started) * 1000.0)
                started = time.perf_counter()
                json.dumps(results, default=str)
                recalls.add("  API response JSON (redone)", (time.perf_counter() - started) * 1000.0)
                recalls.add("  response size KB", len(raw) / 1000.0)
                recalls.close()
        finally:
            for name, fn in originals.items():
                setattr(recall, name, fn)
            search.plain_legs, rank.hits_fuse = original_body, original_fuse
        sweep = knn_sweep([int(v) for v in args.knn_sweep.split(",") if v], plan[:100]) if args.knn_sweep else ""
        if profiler:
            with open(args.cprofile, "w") as out:
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
            log(f"cProfile written to {args.cprofile}")

    print(f"{total_memories} memories, {args.subjects} end-users, {os.cpu_count()} CPUs, embedder runtime "
          f"{getattr(embedder, 'runtime', type(embedder).__name__)}, vector index "
          f"{settings.ENGRAM_VECTOR_INDEX_TYPE}, num_candidates {settings.ENGRAM_RECALL_NUM_CANDIDATES}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f}\n")
    recall_text, recall_figures = table("recall, new question", recalls.calls, [
        "total", "refresh check", "per-user key and client", "query embedding", "_msearch body",
        "_msearch round trip", "  of which Elasticsearch took (whole _msearch)",
        *(f"  of which took, {leg} leg" for leg in search.plain_leg_names(RecallOptions.from_settings())),
        "fusion", "scoring (multipliers, sort)", "rest: validation, result dicts (Python)",
        *JSON_ROWS, "  API response JSON (redone)", "  response size KB"])
    import_text, import_figures = table(f"bulk import, {args.episodes} episodes per call", imports.calls, [
        "total", "validation", "derived-context lookup", "embedding", "bulk requests (index, HNSW, refresh wait)"])
    rate = args.episodes / (import_figures["total"]["mean"] / 1000.0)
    print(recall_text + "\n\n" + import_text + f"\n\nimport rate {rate:.0f} episodes/s")
    if sweep:
        print("\n" + sweep)
    if args.json:
        print(json.dumps({"recall": recall_figures, "import": import_figures, "import_rate": rate}, indent=2))


if __name__ == "__main__":
    main()
