"""Concurrent HTTP load on the ASGI server: N agent clients, turns and recalls mixed, for a fixed
time; per kind p50 / p95 / p99, throughput and errors, where the time went (``Server-Timing``)
and the RSS of each server process.

    scripts/bench http [--clients 8 32] [--seconds 40] [--varied] [--warmup 180] [--cpu-split] [--service]
    python -m benchmarks http --url http://127.0.0.1:8000 --token TOKEN ...   # an Engram already running

The server is uvicorn (``--workers`` processes, Engram's own loop and parser flags) on the run's
database and indices, with ``Server-Timing`` on and Redis as the shared cache when
``ENGRAM_CACHE_URL`` names it (``scripts/bench`` does). End-users: ``--subjects`` new ones of one
tenant, each created by one turn before the load (``--size 0``), or the corpus of
``benchmarks/corpus.py`` at ``--size`` memories, the load spread over its ordinary end-users.

Requests: a ``--turn-share`` of turns, the rest recalls (k=10), each client picking an end-user
at random. By default they say one of a dozen fixed sentences (the corpus's questions with
``--size``), so most query vectors are soon cached; ``--varied`` is a conversation instead:
every turn a new synthetic sentence in sessions of six, every recall a new question. Each
measured step has a seed of its own, so no step says what another or the warm-up said.
``--warmup`` seconds of the same load at the largest client count come first, not counted: the
node's JIT compiler takes a few minutes of load to settle, as a node in service has.

``--cpu-split`` adds where each step's CPU went on this machine (``/proc``: the node, the server's
processes, Redis, this process), what the node did per request (``_nodes/stats``, with the
monitor credential) and the machine's own speed before and after each step (benchmarks/machine.py).
``--service`` then runs the same mix at the service level, in this process (``engram.turn``,
``memory_recall``, one thread per client), and reports HTTP throughput over it.
``--mem0`` then serves Mem0 OSS over HTTP (benchmarks/mem0/mem0_server.py, 2 uvicorn workers, in
its own virtualenv, on the same node, with Engram's embedder served to it) and sends it the same
requests from the same clients: a turn is Mem0's ``add`` then a ``search`` on the turn's text
(what Engram's turn does in one call), a recall its ``search``; Engram's throughput over Mem0's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import httpx
from django.db import connections

from benchmarks import engram
from benchmarks.harness import ROOT, log, rss_mb
from benchmarks.latency import corpus_arguments, corpus_create, questions
from benchmarks.load import (Send, free_port, http_sender, prepare, rss_line, run_load, server_rss, step_seeds,
                             steps_table)


# ---------------------------------------------------------------- the server


def server_command(*, port: int, workers: int) -> list[str]:
    """uvicorn as ``scripts/dev`` runs it (Engram's loop and parser flags), with ``workers`` processes."""
    # ENGRAM_BENCH_ASGI_APP serves another application (benchmarks/asgi_a2wsgi.py: Django through
    # a2wsgi alone, the library config/bridge.py is measured against).
    app = os.environ.get("ENGRAM_BENCH_ASGI_APP", "config.asgi:application")
    return [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port",
            str(port), "--log-level", "error", *engram.UVICORN_FLAGS, "--workers", str(workers)]


@contextmanager
def asgi_server(*, workers: int) -> Iterator[tuple[str, subprocess.Popen]]:
    """Engram's ASGI server on a free port, on this run's database and indices; (its URL, its process)."""
    port = free_port()
    env = {**os.environ, "ENGRAM_API_RATE": "1000000/minute",
           "ENGRAM_SERVER_TIMING": os.environ.get("ENGRAM_SERVER_TIMING", "true")}
    if workers > 1 and not os.environ.get("ENGRAM_CACHE_URL"):
        log("warning: several workers without ENGRAM_CACHE_URL: refresh marks are not shared (scripts/bench sets it)")
    server = subprocess.Popen(server_command(port=port, workers=workers), cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(180):
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None:
                raise RuntimeError(f"the ASGI server exited with {server.returncode}")
            time.sleep(1)
        else:
            raise RuntimeError("the ASGI server did not come up")
        yield url, server
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def service_sender(subjects: dict[str, engram.Subject]) -> Callable[[], AbstractContextManager[Send]]:
    """The same requests as calls of the services a turn and a recall make, in this process."""
    @contextmanager
    def sender() -> Iterator[Send]:
        def send(kind: str, token: str, who: str, body: dict) -> tuple[bool, str, str | None]:
            subject = subjects[who]
            try:
                if kind == "turn":
                    engram.turn(tenant=subject.tenant, external_id=who, text=body["text"], k=body["k"],
                                session_id=body.get("session_id"), types=body.get("types"))
                else:
                    engram.memory_recall(subject=subject, query=body["query"], k=body["k"])
            except Exception as exc:  # noqa: BLE001 - counted as the step's error, as HTTP counts a 500
                return False, type(exc).__name__, None
            return True, "ok", None

        try:
            yield send
        finally:
            connections.close_all()  # this client thread's own database connection

    return sender


# ---------------------------------------------------------------- Mem0 over HTTP

MEM0_DIR = ROOT / "benchmarks" / "mem0"


def _wait_http(url: str, process: subprocess.Popen, what: str, *, method: str = "GET", **kwargs) -> None:
    for _ in range(300):
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            if httpx.request(method, url, timeout=5, **kwargs).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{what} did not come up")


def mem0_python() -> str:
    """The Python of Mem0's own virtualenv (``scripts/bench`` makes it and sets ENGRAM_MEM0_PYTHON)."""
    return os.environ.get("ENGRAM_MEM0_PYTHON") or str(ROOT / ".engram" / "mem0-venv" / "bin" / "python")


@contextmanager
def mem0_server(*, python: str, workers: int) -> Iterator[tuple[str, subprocess.Popen]]:
    """Mem0 behind uvicorn (``workers`` processes) in its own virtualenv, on the run's node, with
    Engram's embedder (its default runtime) served in a process of its own; (its URL, its process)."""
    embed_port, port = free_port(), free_port()
    embedder = subprocess.Popen([sys.executable, "-m", "embeddings.server", "--port", str(embed_port)],
                                cwd=ROOT, stdout=subprocess.DEVNULL)
    server = None
    try:
        _wait_http(f"http://127.0.0.1:{embed_port}/v1/embeddings", embedder, "the embeddings server", method="POST",
                   json={"input": "warm up", "model": "all-MiniLM-L6-v2"})
        host, es_port = os.environ["ES_URL"].split(",")[0].rsplit(":", 1)
        env = {**os.environ, "MEM0_TELEMETRY": "False", "MEM0_BENCH_ES_HOST": host, "MEM0_BENCH_ES_PORT": es_port,
               # Mem0 takes one credential for all its users; Engram's admin may create the engram* index.
               "MEM0_BENCH_ES_USER": os.environ["ES_ADMIN_USERNAME"],
               "MEM0_BENCH_ES_PASSWORD": os.environ["ES_ADMIN_PASSWORD"],
               "MEM0_BENCH_COLLECTION": f"{os.environ['ES_INDEX_PREFIX']}-mem0-http",
               "MEM0_BENCH_EMBED_URL": f"http://127.0.0.1:{embed_port}/v1", "MEM0_BENCH_MODEL": "all-MiniLM-L6-v2",
               "MEM0_BENCH_DIMS": "384"}
        server = subprocess.Popen([python, "-m", "uvicorn", "mem0_server:app", "--host", "127.0.0.1", "--port",
                                   str(port), "--log-level", "warning", "--workers", str(workers)],
                                  cwd=MEM0_DIR, env=env)
        url = f"http://127.0.0.1:{port}"
        _wait_http(f"{url}/search", server, "the Mem0 server", method="POST",
                   json={"query": "warm up", "user_id": "warm-up", "top_k": 1})
        yield url, server
    finally:
        for process in (server, embedder):
            if process is not None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()


def mem0_sender(url: str) -> Callable[[], AbstractContextManager[Send]]:
    """The mix's requests as Mem0's REST routes: a turn stores the text and searches on it (two
    calls, timed as one request), a recall searches."""
    @contextmanager
    def sender() -> Iterator[Send]:
        with httpx.Client(base_url=url, timeout=60) as http:
            def send(kind: str, token: str, who: str, body: dict) -> tuple[bool, str, str | None]:
                try:
                    if kind == "turn":
                        added = http.post("/memories", json={"messages": [{"role": "user", "content": body["text"]}],
                                                             "user_id": who})
                        if added.status_code >= 300:
                            return False, str(added.status_code), None
                        response = http.post("/search", json={"query": body["text"], "user_id": who,
                                                              "top_k": body["k"]})
                    else:
                        response = http.post("/search", json={"query": body["query"], "user_id": who,
                                                              "top_k": body["k"]})
                except httpx.HTTPError as exc:
                    return False, type(exc).__name__, None
                return response.status_code < 300, str(response.status_code), None

            yield send

    return sender


def ratios_table(data: dict) -> str:
    """Each step's HTTP throughput over the same mix at the service level and over Mem0's, with
    p50 / p95 per kind beside each."""
    def cell(step: dict | None) -> str:
        if not step:
            return "n/a"
        kinds = "; ".join(f"{kind} {step[kind]['p50']:.0f} / {step[kind]['p95']:.0f}" for kind in ("turn", "recall")
                          if step[kind].get("n"))
        return f"{step['throughput_rps']} ({kinds})"

    def ratio(a: dict, b: dict | None) -> str:
        return f"**{a['throughput_rps'] / b['throughput_rps']:.2f}**" if b and b["throughput_rps"] else "n/a"

    lines = ["| clients | Engram over HTTP: req/s (p50 / p95 ms) | Engram, service level | HTTP / service | "
             "Mem0 over HTTP | Engram / Mem0 |", "|---:|---|---|---:|---|---:|"]
    for n, http in enumerate(data["steps"]):
        service = (data.get("service") or [None] * (n + 1))[n]
        mem0 = (data.get("mem0") or [None] * (n + 1))[n]
        lines.append(f"| {http['clients']} | {cell(http)} | {cell(service)} | {ratio(http, service)} | {cell(mem0)} "
                     f"| {ratio(http, mem0)} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the suite


def markdown(data: dict) -> str:
    text = [f"{data['end_users']} end-users, {data['memories']:,} memories loaded before the load; "
            f"{data['workers']} server workers; {data['seconds']:.0f} s per step after a {data['warmup_s']:.0f} s "
            f"warm-up at {data['warmup_clients']} clients; {data['turn_share']:.2f} of requests turns; "
            f"{'new text every request' if data['varied'] else 'text from a fixed pool'}.", "",
            steps_table(data["steps"])]
    if data.get("rss_mb"):
        text += ["", rss_line(data["rss_mb"])]
    if data.get("service"):
        text += ["", "The same mix at the service level, in one process (a thread per client):", "",
                 steps_table(data["service"])]
    if data.get("mem0"):
        text += ["", "Mem0 OSS over HTTP (a minimal HTTP wrapper of its Memory class, benchmarks/mem0/mem0_server.py; "
                     "a turn is its add then a search), the same clients and requests; \"engram server\" is "
                     "Mem0's server and its embedding server here:", "", steps_table(data["mem0"])]
        if data.get("mem0_rss_mb"):
            text += ["", "Mem0 server " + rss_line(data["mem0_rss_mb"])]
    if data.get("service") or data.get("mem0"):
        text += ["", "Load as ratios, one run:", "", ratios_table(data)]
    return "\n".join(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    corpus_arguments(parser)
    parser.add_argument("--clients", type=int, nargs="+", help="concurrent clients per step (default 8 32; --quick 2)")
    parser.add_argument("--seconds", type=float, help="per step (default 40; --quick 5)")
    parser.add_argument("--warmup", type=float, metavar="SECONDS",
                        help="unmeasured load first (default 180; --quick 5)")
    parser.add_argument("--warmup-turn-share", type=float, metavar="SHARE",
                        help="the warm-up's share of turns (default --turn-share's)")
    parser.add_argument("--size", type=int, default=0, help="memories of the synthetic corpus to load first "
                                                            "(0: --subjects new end-users of one tenant)")
    parser.add_argument("--subjects", type=int, help="end-users when --size is 0 (default 40; --quick 8)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("ENGRAM_WEB_WORKERS", "2")))
    parser.add_argument("--varied", action="store_true", help="new text for every request, turns in sessions")
    parser.add_argument("--turn-share", type=float, default=1 / 3, help="the share of turns (0: recalls only)")
    parser.add_argument("--turn-types", type=lambda v: [t.strip() for t in v.split(",") if t.strip()],
                        metavar="TYPES", help="comma-separated memory types a turn's recall searches (default all)")
    parser.add_argument("--cpu-split", action="store_true", help="CPU per request by process, the node's work")
    parser.add_argument("--service", action="store_true", help="then the same mix at the service level")
    parser.add_argument("--mem0", action="store_true", help="then the same mix against Mem0 OSS served over HTTP "
                                                            "(its virtualenv: ENGRAM_MEM0_PYTHON, made by scripts/bench)")
    parser.add_argument("--url", help="load an Engram already running (no server, no corpus, no --service)")
    parser.add_argument("--token", help="an agent token of that Engram (with --url)")


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    clients = args.clients or ([2] if args.quick else [8, 32])
    seconds = args.seconds or (5 if args.quick else 40)
    warmup = args.warmup if args.warmup is not None else (5 if args.quick else 180)
    end_users = args.subjects or (8 if args.quick else 40)
    seeds = step_seeds(len(clients), seed=args.seed)
    data = {"clients": clients, "seconds": seconds, "warmup_s": warmup, "warmup_clients": max(clients),
            "workers": args.workers, "turn_share": args.turn_share, "varied": args.varied, "memories": 0}
    options = dict(varied=args.varied, turn_types=args.turn_types, measure_cpu=args.cpu_split)

    def steps(sender, texts: list[str] | None, targets: list[tuple[str, str]], *, measured: list[int],
              warmup_seed: int, warmup: float = warmup) -> list[dict]:
        if warmup > 0:
            warm = run_load(sender=sender, targets=targets, clients=max(clients), seconds=warmup, seed=warmup_seed,
                            texts=texts, turn_share=args.turn_share if args.warmup_turn_share is None
                            else args.warmup_turn_share, **options)
            log(f"warm-up, not counted: {warm['throughput_rps']} req/s, {warm['errors']} errors")
        done = []
        for c, seed in zip(clients, measured, strict=True):
            done.append(run_load(sender=sender, targets=targets, clients=c, seconds=seconds, seed=seed, texts=texts,
                                 turn_share=args.turn_share, **options))
            log(f"{c} clients: {done[-1]['throughput_rps']} req/s, {done[-1]['errors']} errors")
        return done

    if args.url:
        targets = [(args.token, f"load-user-{n}") for n in range(end_users)]
        prepare(url=args.url, targets=targets)
        data.update(end_users=len(targets), steps=steps(lambda: http_sender(args.url), None, targets,
                                                            measured=seeds.steps, warmup_seed=seeds.warmup))
        return data
    texts, subjects = None, {}
    if args.size:
        corpus, _ = corpus_create(args)
        corpus.grow(args.size)
        targets, texts, subjects = corpus.targets(), questions(args.seed), corpus.subjects
        data["memories"] = corpus.loaded.total
    else:
        tenant = engram.tenant_create(slug="bench", name="Bench")
        token = engram.token_create(tenant)
        targets = [(token, f"load-user-{n}") for n in range(end_users)]
    data["end_users"] = len(targets)
    with asgi_server(workers=args.workers) as (url, server):
        if not args.size:
            prepare(url=url, targets=targets)
            subjects = {who: engram.subject_get(tenant=tenant, external_id=who) for _, who in targets}
        data["steps"] = steps(lambda: http_sender(url), texts, targets, measured=seeds.steps,
                              warmup_seed=seeds.warmup)
        data["rss_mb"] = {**server_rss(server), "benchmark process": [rss_mb()]}
    save(data)
    if args.service:
        # The node is warm by now: the warm-up loads this process's embedder and keys.
        data["service"] = steps(service_sender(subjects), texts, targets, measured=seeds.service,
                                warmup_seed=seeds.service_warmup, warmup=min(warmup, 15))
        save(data)
    if args.mem0:
        with mem0_server(python=mem0_python(), workers=args.workers) as (url, server):
            # The requests Engram's HTTP steps got, in the same order (the node is warm by now).
            data["mem0"] = steps(mem0_sender(url), texts, targets, measured=seeds.steps,
                                 warmup_seed=seeds.service_warmup, warmup=min(warmup, 30))
            data["mem0_rss_mb"] = server_rss(server)
    return data
