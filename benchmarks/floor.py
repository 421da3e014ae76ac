"""The CPU floor of one request on this machine: what any hybrid recall served over HTTP must
spend, measured piece by piece at 8 clients on the corpus (``--size``, default 10,000 memories).

- ``healthz``: the ASGI server and Django's middleware around a view that does nothing;
- ``API request, no work``: an agent token's ``GET /api/v1/operations/<unknown>`` (authentication,
  rate limit, DRF, a 404): the least an API request costs the server;
- ``embed one question``: one new text through the embedder, in this process;
- ``one hybrid search``: a BM25 ``match`` and a kNN clause (k = 10) in one search of an ordinary
  end-user's episodes under the end-user's key: the node's CPU and this process's client's;
- ``Engram's recall``: ``memory_recall`` of a new question at the service level, for contrast.

The floor is the sum of the second, third and fourth rows: a request that authenticates, embeds
its question and runs a single search, and does nothing else (no second leg, no ranking, no write).
``--mem0`` then runs the ``http`` suite's 8-client mix against Mem0 OSS served over HTTP (its
server, its embedding server and the node; benchmarks/http_load.py) on the same machine, so that
the floor stands beside a third of Mem0's CPU per request, measured in the same run: what three
times Mem0's throughput on saturated cores allows an Engram request. CPU is read from ``/proc`` per
process class (benchmarks/load.py), so the figures hold however the work is spread over threads.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
import uuid
from collections.abc import Callable

import httpx
from django.db import connections

from benchmarks import engram
from benchmarks.harness import log
from benchmarks.http_load import asgi_server, mem0_python, mem0_sender, mem0_server
from benchmarks.latency import corpus_arguments, corpus_create, questions
from benchmarks.load import cpu_readings, cpu_split, run_load

CLIENTS = 8
FLOOR_ROWS = ("api", "embed", "search")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    corpus_arguments(parser)
    parser.add_argument("--size", type=int, help="memories of the synthetic corpus (default 10000; --quick 1000)")
    parser.add_argument("--seconds", type=float, help="per row (default 20; --quick 3)")
    parser.add_argument("--warmup", type=float, help="unmeasured seconds of each row first (default 10; --quick 1)")
    parser.add_argument("--mem0", action="store_true",
                        help="then the http suite's mix against Mem0 OSS over HTTP (its virtualenv: "
                             "ENGRAM_MEM0_PYTHON, made by scripts/bench)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("ENGRAM_WEB_WORKERS", "2")))


def measure(call: Callable[[int, int], None], *, seconds: float, warmup: float) -> dict:
    """``call(client, n)`` from ``CLIENTS`` threads for ``seconds`` (after ``warmup`` unmeasured
    seconds of the same: the node compiles its hot code for each new kind of request); requests per
    second and CPU ms per request by process class."""
    def clients(duration: float, counts: list[int]) -> None:
        def client(c: int) -> None:
            stop, n = time.perf_counter() + duration, 0
            try:
                while time.perf_counter() < stop:
                    call(c, n)
                    n += 1
            finally:
                counts[c] = n
                connections.close_all()

        threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    clients(warmup, [0] * CLIENTS)
    counts = [0] * CLIENTS
    before, started = cpu_readings(), time.perf_counter()
    clients(seconds, counts)
    wall, after = time.perf_counter() - started, cpu_readings()
    requests = sum(counts)
    split = cpu_split(before, after, requests=requests, wall=wall)["cpu_ms_per_request"]
    return {"requests": requests, "rps": round(requests / wall, 1),
            "cpu_ms": {k: split[k] for k in ("engram server", "elasticsearch", "load generator")}}


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    seconds = args.seconds or (3 if args.quick else 20)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 10)
    corpus, _ = corpus_create(args)
    corpus.grow(args.size or (1000 if args.quick else 10000))
    subjects, asked = corpus.ordinary, questions(args.seed)
    data: dict = {"memories": corpus.loaded.total, "clients": CLIENTS, "seconds": seconds, "rows": {}}
    embedder = engram.get_embedder()
    engram.embedder_load()

    # The hybrid search's inputs, made before the clock starts: each end-user's key and alias, and
    # a vector per question.
    rng = random.Random(args.seed)
    searches = []
    for n in range(400):
        subject = rng.choice(subjects)
        tenant = subject.tenant
        alias = engram.alias_name(engram.MemoryType.EPISODIC, prefix=engram.index_prefix_for(tenant=tenant))
        searches.append((engram.subject_es_client(subject=subject), alias, asked[n], embedder.embed_query(asked[n])))

    def search(c: int, n: int) -> None:
        es, alias, text, vector = searches[(c * 977 + n) % len(searches)]
        es.search(index=alias, size=10, query={"match": {"text": text}},
                  knn={"field": "embedding", "query_vector": vector, "k": 10, "num_candidates": 50},
                  source_excludes=engram.VECTOR_FIELDS)

    def embed(c: int, n: int) -> None:
        embedder.embed_documents([f"{asked[(c * 977 + n) % len(asked)]} {c}-{n}"])

    def recall(c: int, n: int) -> None:
        subject = subjects[(c * 31 + n) % len(subjects)]
        # A new question each time: the query-vector cache never answers it.
        engram.memory_recall(subject=subject, query=f"{asked[(c * 977 + n) % len(asked)]} {c}-{n}", k=10)

    token = engram.token_create(corpus.tenants[0])
    # Each 404 costs the server a "Not Found" line in its log too (Django's own, as in production).
    with asgi_server(workers=args.workers) as (url, _server):
        def http(path: str, headers: dict, status: int) -> Callable[[int, int], None]:
            clients: dict[int, httpx.Client] = {}  # one connection per client, kept across warm-up and run

            def call(c: int, n: int) -> None:
                if c not in clients:
                    clients[c] = httpx.Client(base_url=url, headers=headers, timeout=30)
                if (answer := clients[c].get(path).status_code) != status:
                    raise RuntimeError(f"GET {path} answered {answer}, not {status}")
            return call

        for key, call in (("healthz", http("/healthz", {}, 200)),
                          ("api", http(f"/api/v1/operations/{uuid.uuid4()}", {"Authorization": f"Bearer {token}"},
                                       404))):
            data["rows"][key] = measure(call, seconds=seconds, warmup=warmup)
            log(f"{key}: {data['rows'][key]}")
            save(data)
    for key, call in (("embed", embed), ("search", search), ("recall", recall)):
        data["rows"][key] = measure(call, seconds=seconds, warmup=warmup)
        log(f"{key}: {data['rows'][key]}")
        save(data)
    if args.mem0:
        data["mem0"] = mem0_mix(args, targets=corpus.targets(), texts=questions(args.seed), seconds=seconds,
                                warmup=warmup)
        log(f"mem0: {data['mem0']}")
    return data


def mem0_mix(args: argparse.Namespace, *, targets: list[tuple[str, str]], texts: list[str], seconds: float,
             warmup: float) -> dict:
    """The http suite's 8-client mix (a third turns, new text every request) against Mem0 over
    HTTP: requests per second and CPU ms per request by process class (its server and embedding
    server count as "engram server": the servers this process started)."""
    options = dict(targets=targets, clients=CLIENTS, texts=texts, varied=True, seed=args.seed)
    with mem0_server(python=mem0_python(), workers=args.workers) as (url, _server):
        run_load(sender=mem0_sender(url), seconds=3 * warmup, **options)
        step = run_load(sender=mem0_sender(url), seconds=seconds, measure_cpu=True, **options)
    if step["errors"]:
        raise RuntimeError(f"Mem0 answered {step['errors']} requests with errors: {step['error_kinds']}")
    cpu = step["cpu"]["cpu_ms_per_request"]
    return {"rps": step["throughput_rps"],
            "cpu_ms": {k: cpu[k] for k in ("engram server", "elasticsearch", "load generator")}}


LABELS = {
    "healthz": "`GET /healthz` over HTTP",
    "api": "API request, no work (agent token, rate limit, 404) over HTTP",
    "embed": "embed one question (this process)",
    "search": "one hybrid search: BM25 + kNN in one body, under an end-user's key",
    "recall": "Engram's recall of a new question, service level (for contrast)",
}


def floor_ms(rows: dict) -> float | None:
    """Server, node and client CPU of the floor's rows added up (see the module doc)."""
    if not all(k in rows for k in FLOOR_ROWS):
        return None
    return round(sum(sum(rows[k]["cpu_ms"].values()) - (rows[k]["cpu_ms"]["load generator"] if k == "api" else 0)
                     for k in FLOOR_ROWS), 1)


def markdown(data: dict) -> str:
    lines = [f"{data['memories']} memories; {data['clients']} clients, {data['seconds']:.0f} s per row; "
             "CPU ms per request by process (the HTTP rows' load generator is the client, left out of the floor)",
             "", "| request | req/s | Engram server | Elasticsearch | this process |", "|---|---:|---:|---:|---:|"]
    for key, row in data["rows"].items():
        cpu = row["cpu_ms"]
        lines.append(f"| {LABELS[key]} | {row['rps']} | {cpu['engram server']} | {cpu['elasticsearch']} | "
                     f"{cpu['load generator']} |")
    if (floor := floor_ms(data["rows"])) is None:
        return "\n".join(lines)
    lines += ["", f"**Floor of one request** (API request + one embedding + one hybrid search): **{floor} ms** "
                  "of CPU, before a second leg, ranking or a write."]
    if mem0 := data.get("mem0"):
        spent = mem0["cpu_ms"]["engram server"] + mem0["cpu_ms"]["elasticsearch"]
        lines += ["", f"Mem0 over HTTP, the same machine, the http suite's 8-client mix: {mem0['rps']} req/s, "
                      f"{spent:.1f} ms of CPU per request (its servers {mem0['cpu_ms']['engram server']}, the node "
                      f"{mem0['cpu_ms']['elasticsearch']}). Three times its throughput on saturated cores allows "
                      f"**{spent / 3:.1f} ms** per request; the floor is **{floor / (spent / 3):.2f}** times that."]
    return "\n".join(lines)
