"""Elasticsearch's own CPU per recall, and which part of the ``_msearch`` it goes to.

Run through ``scripts/bench --es-cost`` (its own Elasticsearch); extra arguments come here:

    scripts/bench --es-cost [--subjects 20] [--episodes 250] [--queries 300] [--rounds 3]

It loads the corpus of benchmarks/recall_latency.py (``--subjects`` end-users with ``--episodes``
imported episodes and 8 facts each, the fixture catalog), records the ``_msearch`` bodies that
``--queries`` real recalls send (``memory_recall``, k=10, each through its end-user's own key),
then sends those bodies again, each through the same key, in variants that take one part away:

- ``as sent``: the recall's own bodies;
- ``no _source``: every search returns ids and scores only (the fetch phase loads no stored
  ``_source``; what a recall would save by fetching the sources of the fused top k alone);
- ``10 hits per search``: ``size`` 10 instead of the over-fetch (80 per leg by default);
- ``no DFS``: the BM25 leg as ``query_then_fetch`` (no round gathering term statistics first);
- ``no passage search``: the dense leg without its kNN query over episodes' sentence vectors;
- ``no word counts``: without linear fusion's count of each query word among the end-user's
  memories (``recall.word_counts_search``);
- ``no word clauses``: the lexical legs without linear fusion's zero-boost named clauses
  (``recall.word_clauses``);
- ``with DFS``: the lexical legs as ``dfs_query_then_fetch``, as rank fusion sends them;
- ``kNN sections``: the same hits and scores as sent, asked as recalls did until 2026-11-27:
  each kNN search as a top-level ``knn`` section (a phase of its own before the query phase),
  the passages' kNN as a second search over the episodes' index, merged in Python;
- ``counts in the BM25 leg``: linear fusion's word counts as an aggregation of the BM25 leg
  (``global``, then the scope filter) instead of a search of their own (the same counts);
- ``index per type``: the bodies as sent, with each memory type's alias moved (for this variant's
  measurement only) to an index of its own holding a copy of that type's documents: the layout
  before 2026-11-27, where a search over the four aliases was four shard requests, not one.

``--variants`` picks some (``as sent`` is always measured). ``--jfr SECONDS`` measures no variant: it
sends the recalls as sent for that long under a flight recording of the node and prints where
Elasticsearch's CPU went, by part of a search (benchmarks/es_profile.py); with ``--variants "index
per type"``, then again on that layout. Each round starts one variant later
than the one before, so no variant is always first.

Only ``as sent`` is what a recall does; the others (but ``kNN sections``, ``counts in the BM25
leg`` and ``index per type``, which give the same answers) answer differently and exist to be
measured.
For each variant: Elasticsearch's process CPU per ``_msearch`` (``_nodes/stats``, the node's
``process.cpu.total_in_millis`` before and after), the round trip and the sum of the searches'
``took``. A warm-up round of every variant comes first; then ``--rounds`` rounds, the variants
in turn within each (so the machine's drift falls on all alike); the median of the rounds is
printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from elasticsearch import Elasticsearch, helpers  # noqa: E402

from engram_core.es.client import admin_client  # noqa: E402
from engram_core.es.schema import SOURCE_WITH_VECTORS, MemoryType, alias_name, index_definition, type_filter  # noqa: E402
from engram_eval.sandbox import sandbox  # noqa: E402
from memory_app.selectors import memory_recall  # noqa: E402
from memory_app.evaluation import sandbox  # noqa: E402
from memory_app.recall import memory_recall  # noqa: E402
from recall_latency import bench_subjects, bench_tenant, corpus_texts, percentiles  # noqa: E402


INDEX_PER_TYPE = "index per type"


def _each_search(body: list[dict], change: Callable[[dict, dict], None]) -> list[dict]:
    """A copy of an ``_msearch`` body (header, search, header, search, ...) with ``change(header,
    search)`` applied to each pair."""
    body = copy.deepcopy(body)
    for header, search in zip(body[::2], body[1::2], strict=True):
        change(header, search)
    return body


def _no_source(header: dict, search: dict) -> None:
    search["_source"] = False


def _ten_hits(header: dict, search: dict) -> None:
    search["size"] = 10


def _no_dfs(header: dict, search: dict) -> None:
    header.pop("search_type", None)


def _dfs(header: dict, search: dict) -> None:
    # a lexical leg (BM25, entity): not a count (size 0), not the dense leg (kNN queries)
    if search.get("size") and not {"knn", "dis_max"} & set(search.get("query", {"knn": None})):
        header["search_type"] = "dfs_query_then_fetch"


def _without(dropped: Callable[[dict], bool]) -> Callable[[list[dict]], list[dict]]:
    """A variant that leaves out every search (and its header) for which ``dropped(search)``."""
    def variant(body: list[dict]) -> list[dict]:
        pairs = [pair for pair in zip(body[::2], body[1::2], strict=True) if not dropped(pair[1])]
        return [part for pair in pairs for part in pair]
    return variant


def _no_word_clauses(header: dict, search: dict) -> None:
    should = search.get("query", {}).get("bool", {}).get("should")
    if isinstance(should, list):
        search["query"]["bool"]["should"] = [clause for clause in should if not _word_clause(clause)]


def _word_clause(clause: dict) -> bool:
    return any(str(options.get("_name", "")).startswith("word_")
               for options in clause.values() if isinstance(options, dict))


def _dense_parts(search: dict) -> tuple[dict, dict] | None:
    """The dense leg's two kNN queries (own vectors, passages' nested query), if ``search`` is it."""
    queries = search.get("query", {}).get("dis_max", {}).get("queries") or []
    if len(queries) == 2 and "knn" in queries[0] and "nested" in queries[1]:
        return queries[0], queries[1]
    return None


def _no_passages(header: dict, search: dict) -> None:
    if parts := _dense_parts(search):
        search["query"] = parts[0]


def _knn_sections(body: list[dict]) -> list[dict]:
    """Every kNN query as recalls sent it until 2026-11-27: a search's top-level ``knn`` section
    (run in a phase of its own before the query phase), the dense leg's passages as a second such
    search over the episodes' index, merged in Python (same hits and scores)."""
    out: list[dict] = []
    for header, search in zip(body[::2], body[1::2], strict=True):
        rest = {key: value for key, value in copy.deepcopy(search).items() if key != "query"}
        if parts := _dense_parts(search):
            own, nested = copy.deepcopy(parts)
            episodes = next(index for index in header["index"].split(",") if "episodic" in index)
            knn = nested["nested"]["query"]["knn"]
            if inner := nested["nested"].get("inner_hits"):
                knn["inner_hits"] = inner
            out += [dict(header), {**rest, "knn": own["knn"]}, {"index": episodes}, {**rest, "knn": knn}]
        elif "knn" in search.get("query", {}):  # an entity's kNN leg
            out += [dict(header), {**rest, "knn": copy.deepcopy(search["query"]["knn"])}]
        else:
            out += copy.deepcopy([header, search])
    return out


def _counts_in_bm25(body: list[dict]) -> list[dict]:
    """Linear fusion's word counts as an aggregation of the BM25 leg (``global``, then the
    recall's scope filter) instead of a search of their own (same counts)."""
    pairs = [copy.deepcopy(list(pair)) for pair in zip(body[::2], body[1::2], strict=True)]
    counts = next((n for n, (_h, s) in enumerate(pairs) if "words" in s.get("aggs", {})), None)
    bm25 = next((n for n, (_h, s) in enumerate(pairs) if s.get("size") and "bool" in s.get("query", {})), None)
    if counts is None or bm25 is None:
        return [part for pair in pairs for part in pair]
    search = pairs[counts][1]
    pairs[bm25][1]["aggs"] = {"all": {"global": {}, "aggs": {"allowed": {
        "filter": search["query"]["bool"]["filter"][0], "aggs": {"words": search["aggs"]["words"]}}}}}
    del pairs[counts]
    return [part for pair in pairs for part in pair]


VARIANTS: dict[str, Callable[[list[dict]], list[dict]]] = {
    "as sent": copy.deepcopy,
    "no _source": lambda body: _each_search(body, _no_source),
    "10 hits per search": lambda body: _each_search(body, _ten_hits),
    "no DFS": lambda body: _each_search(body, _no_dfs),
    # the lexical legs with the DFS round rank fusion gives them (linear fusion, the default, skips it)
    "with DFS": lambda body: _each_search(body, _dfs),
    # the dense leg without its passages' kNN query (memory_app.recall.search.passage_query)
    "no passage search": lambda body: _each_search(body, _no_passages),
    # linear fusion's own parts (memory_app.recall.search): the count of each query word among the
    # end-user's memories, and the zero-boost clauses that report which words a hit holds
    "no word counts": _without(lambda search: "words" in search.get("aggs", {})),
    "no word clauses": lambda body: _each_search(body, _no_word_clauses),
    # the same hits and scores, asked as before 2026-11-27 16:00 UTC: kNN sections, passages apart
    "kNN sections": _knn_sections,
    "counts in the BM25 leg": _counts_in_bm25,
    # as many searches over the same indices through the same key, each asking for nothing (no
    # query, no hits): what a search costs the node whatever it asks
    "empty searches": lambda body: [part if n % 2 == 0 else {"size": 0, "track_total_hits": False}
                                    for n, part in enumerate(body)],
    # the same bodies, with each type's alias moved to an index of its own holding that type's
    # documents (the layout before 2026-11-27: a search over the four aliases is four shard requests)
    INDEX_PER_TYPE: copy.deepcopy,
}


def per_type_copies(es: Elasticsearch, prefix: str) -> dict[MemoryType, str]:
    """An index per memory type (``<prefix>-<type>-layout``, the one index's definition) holding a
    copy of that type's documents, vectors included; {type: index}."""
    body = index_definition().body
    meta = next(iter(es.indices.get_mapping(index=alias_name(MemoryType.EPISODIC, prefix=prefix)).values()))
    body = {**body, "mappings": {**body["mappings"], "_meta": meta["mappings"].get("_meta", {})}}
    out = {}
    for memory_type in MemoryType:
        index = f"{alias_name(memory_type, prefix=prefix)}-layout"
        es.indices.create(index=index, **body)
        hits = helpers.scan(es, index=alias_name(memory_type, prefix=prefix),
                            query={"query": {"match_all": {}}, "_source": SOURCE_WITH_VECTORS})
        helpers.bulk(es, ({"_index": index, "_id": h["_id"], "_source": h["_source"]} for h in hits), chunk_size=500)
        es.indices.refresh(index=index)
        out[memory_type] = index
    return out


@contextlib.contextmanager
def aliases_on(es: Elasticsearch, prefix: str, per_type: dict[MemoryType, str]):
    """Each type's alias on its own index of ``per_type`` while inside, then back on the one index."""
    one = next(iter(es.indices.get_alias(name=alias_name(MemoryType.EPISODIC, prefix=prefix))))

    def move(to_per_type: bool) -> None:
        actions = []
        for memory_type, own in per_type.items():
            alias = alias_name(memory_type, prefix=prefix)
            old, new = (one, own) if to_per_type else (own, one)
            add = {"index": new, "alias": alias, "is_write_index": True}
            if not to_per_type:
                add["filter"] = type_filter(memory_type)
            actions += [{"remove": {"index": old, "alias": alias}}, {"add": add}]
        es.indices.update_aliases(actions=actions)

    move(True)
    try:
        yield
    finally:
        move(False)


def node_cpu_ms(es: Elasticsearch) -> int:
    """The node's process CPU so far. Elasticsearch caches its process stats for
    ``monitor.process.refresh_interval`` (1 s), so the reading waits that long: a cached figure
    would count part of one variant's CPU in the next."""
    time.sleep(1.1)
    nodes = es.nodes.stats(metric="process")["nodes"]
    return sum(node["process"]["cpu"]["total_in_millis"] for node in nodes.values())


def record_bodies(plan: list[tuple]) -> list[tuple[Elasticsearch, list[dict]]]:
    """The (end-user's client, ``_msearch`` body) of every recall of ``plan``, as sent."""
    recorded: list[tuple[Elasticsearch, list[dict]]] = []
    original = Elasticsearch.msearch

    def recording(self, *args, **kwargs):
        recorded.append((self, copy.deepcopy(kwargs["searches"])))
        return original(self, *args, **kwargs)

    Elasticsearch.msearch = recording
    try:
        for subject, question in plan:
            memory_recall(subject=subject, query=question, k=10)
    finally:
        Elasticsearch.msearch = original
    return recorded


def measure(recorded: list[tuple[Elasticsearch, list[dict]]], variant: Callable, es: Elasticsearch) -> dict:
    bodies = [(client, variant(body)) for client, body in recorded]
    walls, tooks = [], []
    cpu_before = node_cpu_ms(es)
    for client, body in bodies:
        started = time.perf_counter()
        responses = client.msearch(searches=body)["responses"]
        walls.append((time.perf_counter() - started) * 1000.0)
        tooks.append(float(sum(r.get("took", 0) for r in responses)))
    cpu_ms = node_cpu_ms(es) - cpu_before
    return {"cpu_ms": cpu_ms / len(bodies), "round_trip_ms": percentiles(walls), "took_ms": percentiles(tooks)}


def print_profile(recorded: list[tuple[Elasticsearch, list[dict]]], es: Elasticsearch, *, seconds: float,
                  layouts: dict[str, Callable[[], contextlib.AbstractContextManager]]) -> None:
    """For each of ``layouts`` (name: a context the recalls run in), the recalls as sent, over and
    over for ``seconds`` after one warm-up pass, under a flight recording of the node; prints the
    samples by part of a search (benchmarks/es_profile.py)."""
    from es_profile import profile, table

    for name, layout in layouts.items():
        with layout():
            measure(recorded, copy.deepcopy, es)  # warm-up
            sent = 0

            def workload() -> None:
                nonlocal sent
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    for client, body in recorded:
                        client.msearch(searches=body)
                        sent += 1

            started = time.monotonic()
            counts, recording = profile(es, workload)
        # Shares only: a recording samples a few threads at a time, so its sample counts are not
        # CPU time, and the recording costs CPU of its own; the rounds without --jfr compare layouts.
        print(f"{name}: {sent} `_msearch` in {time.monotonic() - started:.0f} s, "
              f"{sum(counts.values())} samples ({recording})\n")
        print(table(counts) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=250, help="episodes per end-user")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--variants", default="", help="comma-separated variant names beside 'as sent' (default: all)")
    parser.add_argument("--jfr", type=float, default=0.0, metavar="SECONDS",
                        help="instead of the variants: send the recalls as sent for SECONDS while the node keeps a "
                             "flight recording, and print where its CPU went (benchmarks/es_profile.py); again on "
                             "the index-per-type layout if --variants names it")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.variants.split(",") if name.strip()]
    if unknown := set(chosen) - set(VARIANTS):
        parser.error(f"unknown variants: {sorted(unknown)}; known: {list(VARIANTS)}")
    variants = {name: v for name, v in VARIANTS.items() if not chosen or name == "as sent" or name in chosen}
    rng = random.Random(args.seed)
    call_command("migrate", verbosity=0)
    corpus, sentences, questions = corpus_texts()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    with sandbox() as box:
        tenant = bench_tenant(corpus, slug="escost", name="ES cost")
        subjects = bench_subjects(tenant, count=args.subjects, episodes=args.episodes, rng=rng, sentences=sentences,
                                  now=datetime.now(UTC), facts=8)
        plan = [(rng.choice(subjects), rng.choice(questions)) for _ in range(args.queries)]
        recorded = record_bodies(plan)
        log(f"recorded {len(recorded)} _msearch bodies of {len(recorded[0][1]) // 2} searches "
            f"({args.subjects} end-users, {args.episodes} episodes each)")
        es = admin_client()
        prefix = box.prefix
        per_type = per_type_copies(es, prefix) if INDEX_PER_TYPE in variants else {}

        def run(name: str) -> dict:
            if name != INDEX_PER_TYPE:
                return measure(recorded, variants[name], es)
            with aliases_on(es, prefix, per_type):
                return measure(recorded, variants[name], es)

        if args.jfr:
            layouts = {"as sent": contextlib.nullcontext}
            if per_type:
                layouts[INDEX_PER_TYPE] = lambda: aliases_on(es, prefix, per_type)
            print_profile(recorded, es, seconds=args.jfr, layouts=layouts)
            return
        for name in variants:  # warm-up
            run(name)
        rounds: dict[str, list[dict]] = {name: [] for name in variants}
        names = list(variants)
        for n in range(args.rounds):
            # each round starts one variant later: the first of a round measured higher in every
            # round of two runs on 2026-11-27, identical bodies included
            for name in names[n % len(names):] + names[: n % len(names)]:
                rounds[name].append(run(name))
            log(f"round {n + 1} of {args.rounds}")

    results = {name: {"cpu_ms": statistics.median(r["cpu_ms"] for r in runs),
                      "round_trip_p50_ms": statistics.median(r["round_trip_ms"]["p50"] for r in runs),
                      "round_trip_p95_ms": statistics.median(r["round_trip_ms"]["p95"] for r in runs),
                      "took_p50_ms": statistics.median(r["took_ms"]["p50"] for r in runs),
                      "cpu_ms_rounds": [round(r["cpu_ms"], 1) for r in runs]}
               for name, runs in rounds.items()}
    base = results["as sent"]["cpu_ms"]
    print(f"Elasticsearch CPU per recall `_msearch`, {args.queries} recalls, {args.subjects} end-users × "
          f"{args.episodes} episodes; median of {args.rounds} rounds\n")
    print("| variant | ES CPU ms per _msearch (rounds) | vs as sent | round trip p50 / p95 ms | took p50 ms |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        rounds_text = ", ".join(f"{v:.1f}" for v in r["cpu_ms_rounds"])
        print(f"| {name} | {r['cpu_ms']:.1f} ({rounds_text}) | {100 * (r['cpu_ms'] - base) / base:+.0f}% | "
              f"{r['round_trip_p50_ms']:.1f} / {r['round_trip_p95_ms']:.1f} | {r['took_p50_ms']:.0f} |")
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
