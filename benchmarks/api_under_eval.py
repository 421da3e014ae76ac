"""API load while ``manage.py memory_eval`` runs against the same live database: no server errors.

Run through ``scripts/bench-contention`` (its own Elasticsearch), or import ``run_load``:

    scripts/bench-contention [--clients 8] [--seconds 60]

What it does: a real Engram server (``runserver``, threaded WSGI, its own SQLite file: the
embedded database whose lock used to fail every request), ``memory_eval`` started against the
same database file and restarted whenever it finishes, and ``--clients`` threads that each own
an end-user and alternate ``turns`` (write + pre-recall) and ``recall`` calls for ``--seconds``.
Reports the status codes, latency percentiles and eval runs; exits non-zero on any 5xx.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.api.live import LiveEngram  # noqa: E402


@dataclass
class LoadReport:
    statuses: Counter = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # first bodies of 5xx answers / transport errors
    eval_runs_finished: int = 0
    seconds: float = 0.0

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500) + len(
            [e for e in self.errors if e.startswith("transport")])

    def summary(self) -> dict:
        q = statistics.quantiles(self.latencies_ms, n=100) if len(self.latencies_ms) > 1 else [0.0] * 99
        return {"requests": sum(self.statuses.values()), "statuses": dict(sorted(self.statuses.items())),
                "server_errors": self.server_errors, "p50_ms": round(q[49], 1), "p95_ms": round(q[94], 1),
                "requests_per_s": round(sum(self.statuses.values()) / max(self.seconds, 1e-9), 1),
                "eval_runs_finished": self.eval_runs_finished, "errors": self.errors[:5]}


class EvalLoop:
    """``memory_eval`` against the server's database, restarted until stopped."""

    def __init__(self, live: LiveEngram):
        self.live, self.finished, self.failed = live, 0, []
        self._stop = threading.Event()
        self._process: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> EvalLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)  # the sandbox cleans up on the way out
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._thread.join(timeout=70)

    def _run(self) -> None:
        while not self._stop.is_set():
            log = open(self.live.workdir / "eval.log", "ab")
            self._process = subprocess.Popen([sys.executable, "manage.py", "memory_eval"], cwd=ROOT,
                                             env=self.live.env, stdout=log, stderr=subprocess.STDOUT)
            code = self._process.wait()
            if self._stop.is_set():
                return
            if code == 0:
                self.finished += 1
            else:
                self.failed.append(code)
                return


def run_load(*, live: LiveEngram, token: str, clients: int, seconds: float) -> LoadReport:
    """``clients`` threads, each with its own end-user, alternate turns and recalls for ``seconds``."""
    report = LoadReport()
    lock = threading.Lock()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{live.url}/api/v1", headers=headers, timeout=120) as setup:
        for n in range(clients):
            response = setup.post("/subjects", json={"external_id": f"load-{n}"})
            assert response.status_code in (200, 201), response.text
    deadline = time.monotonic() + seconds

    def client(n: int) -> None:
        with httpx.Client(base_url=f"{live.url}/api/v1/subjects/load-{n}", headers=headers, timeout=120) as http:
            i = 0
            while time.monotonic() < deadline:
                i += 1
                started = time.perf_counter()
                try:
                    if i % 2:
                        response = http.post("/turns", json={"text": f"client {n} says hello number {i}"})
                    else:
                        response = http.post("/recall", json={"query": f"hello number {i - 1}", "k": 5})
                except httpx.TransportError as exc:
                    with lock:
                        report.errors.append(f"transport: {exc!r}")
                    continue
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    report.statuses[response.status_code] += 1
                    report.latencies_ms.append(elapsed)
                    if response.status_code >= 500:
                        report.errors.append(f"{response.status_code}: {response.text[:300]}")

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report.seconds = time.monotonic() - started
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=10, help="seconds the eval runs before the load starts")
    args = parser.parse_args()
    from engram_core.es.client import admin_client

    live = LiveEngram(Path(tempfile.mkdtemp(prefix="engram-contention-")))
    try:
        live.setup()
        token = live.token()
        live.start()
        with EvalLoop(live) as evals:
            time.sleep(args.warmup)  # the eval is writing its corpus when the load starts
            report = run_load(live=live, token=token, clients=args.clients, seconds=args.seconds)
            report.eval_runs_finished = evals.finished
            eval_failed = evals.failed
    finally:
        live.stop()
        live.cleanup(admin_client())
    summary = {**report.summary(), "eval_failures": eval_failed, "clients": args.clients, "seconds": args.seconds}
    print(json.dumps(summary, indent=2))
    sys.exit(1 if report.server_errors or eval_failed else 0)


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")
    import django

    django.setup()
    main()
