"""Concurrent HTTP load on a running Engram: N agent clients, a third of requests turns, the rest
recalls, for a fixed time; per kind p50/p95/p99 latency, throughput and errors.

Run through ``scripts/bench --http`` (which starts Elasticsearch, a scratch database and the ASGI
server with its worker processes), or against any server:

    python benchmarks/http_load.py --url http://127.0.0.1:8000 --token <agent token> \\
        [--clients 8 32] [--seconds 40] [--subjects 40] [--varied]

By default turns and recalls say one of a dozen fixed sentences (so after a few requests every
query vector is cached, and turns carry no session). ``--varied`` is an agent's conversation
instead: every turn a new synthetic sentence, in sessions of six turns per client and end-user
(so each gets its derived context), and every recall a new synthetic question (no cached vector).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from datetime import UTC, datetime

import httpx

from scale_data import Synth

SENTENCES = [
    "my router keeps dropping the wifi in the evening", "I moved to Hamburg last spring",
    "the heating does not turn on in the morning", "please remind me about the invoice",
    "my daughter uses the tablet for school", "the smart plug stopped responding yesterday",
    "I prefer to be called in the afternoon", "can you check my last order", "the thermostat shows 30 degrees",
    "I changed my email address last week", "which plan am I on", "the camera app crashes on start",
]


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def prepare(*, url: str, token: str, subjects: int) -> None:
    """One turn per end-user, one after the other: creating an end-user mints its key (slow by
    design, once), which is not what the load measures."""
    with httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=120,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        for n in range(subjects):
            http.post(f"subjects/load-user-{n}/turns", json={"text": SENTENCES[n % len(SENTENCES)]}).raise_for_status()


def run(*, url: str, token: str, clients: int, seconds: float, subjects: int, seed: int = 7,
        targets: list[tuple[str, str]] | None = None, texts: list[str] | None = None,
        varied: bool = False) -> dict:
    """``targets``: (agent token, external id) pairs to spread the load over (end-users of several
    tenants); by default ``subjects`` end-users ``load-user-<n>`` under ``token``. ``texts``: what
    turns and recalls say (by default a dozen fixed sentences, soon all cached query vectors).
    ``varied``: new synthetic text for every request, turns in sessions (see the module doc)."""
    texts = texts or SENTENCES
    targets = targets or [(token, f"load-user-{n}") for n in range(subjects)]
    latencies: dict[str, list[float]] = {"turn": [], "recall": []}
    errors: dict[str, int] = {"turn": 0, "recall": 0}
    error_kinds: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    synth, origin = Synth(seed=seed), datetime.now(UTC)

    def client(n: int) -> None:
        rng = random.Random(seed + n)
        said: dict[str, int] = {}  # turns this client sent per end-user: sessions of six
        with httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=30) as http:
            while time.monotonic() < stop_at:
                bearer, who = rng.choice(targets)
                http.headers["Authorization"] = f"Bearer {bearer}"
                kind = "turn" if rng.random() < 1 / 3 else "recall"
                text, turn = rng.choice(texts), {}
                if varied and kind == "turn":
                    said[who] = count = said.get(who, 0) + 1
                    turn = {"session_id": f"load-{seed}-{n}-{who}-{count // 6}"}
                    text = synth.episode(f"{seed}-{n}-{who}", count, start=origin)["text"]
                elif varied:
                    text = synth.question(rng.randrange(10**9))
                started = time.monotonic()
                try:
                    if kind == "turn":
                        response = http.post(f"subjects/{who}/turns", json={"text": text, "k": 5, **turn},
                                             headers={"Idempotency-Key": f"{n}-{time.monotonic_ns()}"})
                    else:
                        response = http.post(f"subjects/{who}/recall", json={"query": text, "k": 10})
                    ok = response.status_code < 300 or (kind == "recall" and response.status_code == 404)
                    label = str(response.status_code)
                except httpx.HTTPError as exc:
                    ok, label = False, type(exc).__name__
                elapsed = (time.monotonic() - started) * 1000
                with lock:
                    if ok:
                        latencies[kind].append(elapsed)
                    else:
                        errors[kind] += 1
                        error_kinds[label] = error_kinds.get(label, 0) + 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - began
    result = {"clients": clients, "seconds": round(wall, 1), "errors": sum(errors.values()), "error_kinds": error_kinds,
              "throughput_rps": round((sum(len(v) for v in latencies.values()) + sum(errors.values())) / wall, 1)}
    for kind, values in latencies.items():
        result[kind] = {"count": len(values), **{f"p{p}_ms": round(v) if (v := _pct(values, p)) is not None else None
                                                 for p in (50, 95, 99)},
                        "mean_ms": round(statistics.fmean(values)) if values else None}
    return result


def markdown(results: list[dict]) -> str:
    lines = ["| clients | kind | requests | p50 ms | p95 ms | p99 ms | throughput (all) req/s | errors |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for kind in ("turn", "recall"):
            k = r[kind]
            lines.append(f"| {r['clients']} | {kind} | {k['count']} | {k['p50_ms']} | {k['p95_ms']} | {k['p99_ms']} "
                         f"| {r['throughput_rps']} | {r['errors']} |")
    lines += [f"errors at {r['clients']} clients: {r['error_kinds']}" for r in results if r["errors"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--subjects", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--prepare", action="store_true", help="first create every end-user (one turn each)")
    parser.add_argument("--varied", action="store_true", help="new text for every request, turns in sessions")
    args = parser.parse_args()
    if args.prepare:
        prepare(url=args.url, token=args.token, subjects=args.subjects)
    results = [run(url=args.url, token=args.token, clients=c, seconds=args.seconds, subjects=args.subjects,
                   varied=args.varied)
               for c in args.clients]
    print(json.dumps(results, indent=2) if args.json else markdown(results))


if __name__ == "__main__":
    main()
