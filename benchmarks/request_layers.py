"""One recall, layer by layer: what the request path adds to the service call.

Run through ``scripts/bench --layers`` (its own Elasticsearch and Redis); extra arguments come here:

    scripts/bench --layers [--subjects 10] [--episodes 250] [--queries 200] [--rounds 2]

It loads ``--subjects`` end-users of one tenant with ``--episodes`` imported episodes each
(benchmarks/recall_latency.py's corpus), warms every question's vector (so no layer pays an
embedding: the figures compare layers, not questions), then times the same ``--queries`` recalls
(k=10) one at a time, ``--rounds`` times each, through:

1. the service: ``memory_recall``;
2. Django's test client: the REST endpoint in process (token authentication, throttle, DRF
   validation and rendering, use-count recording), no server;
3. the ASGI server over HTTP: uvicorn with one worker, a keep-alive httpx client;
4. the same while a second client sends turns (new text, no session) at 2 and then 5 per second
   to the same worker, then again with the turns stopped.

Prints one line per round (p50 / p95 / mean ms); the last round of each layer is the one to read
(the first pays its own warm-up).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from memory_app.config.serving import UVICORN_FLAGS  # noqa: E402
from memory_app.recall import memory_recall  # noqa: E402
from recall_latency import bench_subjects, corpus_texts, percentiles  # noqa: E402
from tenants.models import AgentToken, Tenant  # noqa: E402
from tenants.services.tokens import agent_token_create  # noqa: E402


def summary(samples_ms: list[float]) -> str:
    p = percentiles(samples_ms)
    return f"p50 {p['p50']:.1f} / p95 {p['p95']:.1f} / mean {p['mean']:.1f} ms"


def timed_rounds(label: str, plan: list[tuple[str, str]], call: Callable[[str, str], None], rounds: int) -> None:
    for n in range(rounds):
        samples = []
        for who, question in plan:
            started = time.perf_counter()
            call(who, question)
            samples.append((time.perf_counter() - started) * 1000.0)
        print(f"| {label} | {n + 1} | {summary(samples)} |", flush=True)


def serve(port: int) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "memory_app.config.asgi:application", "--host",
                               "127.0.0.1", "--port", str(port), "--log-level", "error", *UVICORN_FLAGS, "--workers", "1"])
    for _ in range(240):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code < 500:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.terminate()
    raise SystemExit("the ASGI server did not answer /healthz within 2 minutes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=250, help="episodes per end-user")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, default=8391)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    call_command("migrate", verbosity=0)
    call_command("es_setup", verbosity=0)
    _corpus, sentences, questions = corpus_texts()

    tenant = Tenant.objects.create(slug=f"layers-{rng.randrange(10**6)}", name="Request layers")
    _, token = agent_token_create(tenant=tenant, name="layers", scopes=AgentToken.Scope.values,
                                  actor="bench")
    subjects = {subject.external_id: subject for subject in bench_subjects(
        tenant, count=args.subjects, episodes=args.episodes, rng=rng, sentences=sentences, now=datetime.now(UTC))}
    plan = [(rng.choice(list(subjects)), rng.choice(questions)) for _ in range(args.queries)]
    for who, question in plan:  # every vector cached, Elasticsearch warm
        memory_recall(subject=subjects[who], query=question, k=10)

    print(f"{args.queries} recalls (k=10), {args.subjects} end-users × {args.episodes} episodes, "
          f"question vectors cached\n")
    print("| layer | round | p50 / p95 / mean |\n|---|---|---|")
    timed_rounds("service (`memory_recall`)", plan,
                 lambda who, q: memory_recall(subject=subjects[who], query=q, k=10), args.rounds)

    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")

    def in_process(who: str, question: str) -> None:
        response = client.post(f"/api/v1/subjects/{who}/recall", {"query": question, "k": 10},
                               content_type="application/json")
        assert response.status_code == 200, response.content

    timed_rounds("REST endpoint, Django test client", plan, in_process, args.rounds)

    server = serve(args.port)
    base = f"http://127.0.0.1:{args.port}/api/v1/"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, headers=headers) as http:
            def over_http(who: str, question: str) -> None:
                response = http.post(f"subjects/{who}/recall", json={"query": question, "k": 10})
                assert response.status_code == 200, response.text

            timed_rounds("uvicorn, 1 worker, over HTTP", plan, over_http, args.rounds)
            stop = threading.Event()

            def send_turns(per_second: float) -> None:
                with httpx.Client(base_url=base, headers=headers) as turns:
                    n = 0
                    while not stop.is_set():
                        n += 1
                        turns.post(f"subjects/{rng.choice(list(subjects))}/turns",
                                   json={"text": f"{rng.choice(sentences)} (turn {n})", "k": 5}).raise_for_status()
                        stop.wait(1 / per_second)

            for per_second in (2, 5):
                stop.clear()
                sender = threading.Thread(target=send_turns, args=(per_second,))
                sender.start()
                try:
                    timed_rounds(f"over HTTP, turns at {per_second}/s beside it", plan, over_http, args.rounds)
                finally:
                    stop.set()
                    sender.join()
            timed_rounds("over HTTP, turns stopped", plan, over_http, args.rounds)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
