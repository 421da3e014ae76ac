"""The ASGI → WSGI bridge on its own: ``config.bridge.BufferedWSGIMiddleware`` against a2wsgi's
``WSGIMiddleware``, around a WSGI app that does nothing but ``--work-ms`` of Python on its thread
(holding the interpreter lock, as Django does), so that what is measured is the hand-over between
the event loop and the threads:

    python -m benchmarks bridge [--requests 2000] [--clients 8] [--rounds 3] [--work-ms 0 2]

Each round drives each bridge in this process on uvloop (as the server runs), variants taking
turns: ``--clients`` concurrent requests at a time, each a POST of an API-sized JSON body (in one
message, as uvicorn delivers a small body) answered with 2 KB of JSON, the bridge's pool as large
as the server's (``ENGRAM_WEB_THREADS``' default, 32). Measured: the process's CPU per request
(every thread's) beyond the app's own work, requests per second, and each request's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable

from a2wsgi import WSGIMiddleware

from benchmarks.harness import log, percentiles
from config.bridge import BufferedWSGIMiddleware

STORES = False  # no database, no Elasticsearch
VARIANTS = ("bridge", "a2wsgi")
_BODY = json.dumps({"text": "I moved to Lisbon last spring and I am learning Portuguese. " * 4,
                    "recall": {"k": 10}}).encode()
_ANSWER = json.dumps({"memories": [{"id": f"m{n}", "text": "a remembered sentence", "score": 0.5}
                                   for n in range(24)]}).encode()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, help="requests per variant and round (default 2000; --quick 200)")
    parser.add_argument("--work-ms", type=float, nargs="+", default=[0.0, 2.0],
                        help="CPU ms of Python each request's app spends on its thread (default 0 2)")
    parser.add_argument("--clients", type=int, default=8, help="requests in flight at a time")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; --quick 1)")
    parser.add_argument("--threads", type=int, default=32, help="the bridge's pool (ENGRAM_WEB_THREADS)")


def wsgi_app_for(work_ms: float):
    def wsgi_app(environ: dict, start_response) -> list[bytes]:
        stop = time.thread_time() + work_ms / 1000
        while time.thread_time() < stop:  # Python work, holding the interpreter lock as Django does
            pass
        return _answer(environ, start_response)
    return wsgi_app


def _answer(environ: dict, start_response) -> list[bytes]:
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    if len(body) != len(_BODY):
        raise RuntimeError("the body did not arrive whole")
    start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", str(len(_ANSWER)))])
    return [_ANSWER]


def app_for(variant: str, threads: int, work_ms: float):
    wsgi_app = wsgi_app_for(work_ms)
    if variant == "bridge":
        return BufferedWSGIMiddleware(wsgi_app, workers=threads, max_body_bytes=2_621_440)
    return WSGIMiddleware(wsgi_app, workers=threads)


async def _drive(app, requests: int, clients: int, latencies: list[float]) -> None:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/api/v1/subjects/u1/turns", "raw_path": b"/api/v1/subjects/u1/turns", "query_string": b"",
             "root_path": "", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(_BODY)).encode())]}
    left = [requests]

    async def client() -> None:
        while left[0] > 0:
            left[0] -= 1
            sent: list[dict] = []
            delivered = False

            async def receive() -> dict:
                nonlocal delivered
                if delivered:
                    await asyncio.Event().wait()  # no disconnect while the answer is written
                delivered = True
                return {"type": "http.request", "body": _BODY, "more_body": False}

            async def send(message: dict) -> None:
                sent.append(message)

            began = time.perf_counter()
            await app(dict(scope), receive, send)
            latencies.append((time.perf_counter() - began) * 1000)
            if sent[0]["status"] != 201 or b"".join(m.get("body", b"") for m in sent[1:]) != _ANSWER:
                raise RuntimeError(f"unexpected answer: {sent[:1]}")

    await asyncio.gather(*(client() for _ in range(clients)))


def _one(variant: str, requests: int, clients: int, threads: int, work_ms: float) -> dict:
    import uvloop

    app = app_for(variant, threads, work_ms)
    latencies: list[float] = []
    uvloop.run(_drive(app, 100, clients, []))  # the pool's threads started, the code warm
    cpu, wall = time.process_time(), time.perf_counter()
    uvloop.run(_drive(app, requests, clients, latencies))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    point = percentiles(latencies, (50, 95))
    assert point is not None
    return {"cpu_us": round((cpu / requests - work_ms / 1000) * 1e6, 1), "rps": round(requests / wall, 1),
            "p50_ms": point["p50"], "p95_ms": point["p95"]}


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    requests = args.requests or (200 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    results: dict = {"requests": requests, "clients": args.clients, "threads": args.threads, "rounds": rounds,
                     "runs": {f"{v} {w:g}": [] for w in args.work_ms for v in VARIANTS}}
    for round_ in range(rounds):
        for work_ms in args.work_ms:
            for variant in VARIANTS if round_ % 2 == 0 else reversed(VARIANTS):
                key = f"{variant} {work_ms:g}"
                results["runs"][key].append(_one(variant, requests, args.clients, args.threads, work_ms))
                log(f"round {round_ + 1} {key}: {results['runs'][key][-1]}")
                save(results)
    return results


def markdown(data: dict) -> str:
    lines = [f"{data['requests']} POSTs per variant and round, {data['clients']} in flight, a pool of "
             f"{data['threads']} threads; the median of {data['rounds']} rounds, variants taking turns:", "",
             "| bridge | app's work ms | CPU µs per request beyond the app's | requests/s | latency p50 / p95 ms |",
             "|---|---:|---:|---:|---|"]
    for key, runs in data["runs"].items():
        if runs:
            variant, work = key.rsplit(" ", 1)
            med = {k: statistics.median(r[k] for r in runs) for k in ("cpu_us", "rps", "p50_ms", "p95_ms")}
            lines.append(f"| {variant} | {work} | {med['cpu_us']:.0f} | {med['rps']:.0f} | "
                         f"{med['p50_ms']:.2f} / {med['p95_ms']:.2f} |")
    return "\n".join(lines)
