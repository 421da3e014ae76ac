"""API load while ``manage.py memory_eval`` runs against the same live database (tests/api/test_live.py):
``EvalLoop`` restarts the eval until stopped; ``run_load`` sends turns and recalls meanwhile."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from tests.api.live import ROOT, LiveEngram


@dataclass
class LoadReport:
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)  # first bodies of 5xx answers / transport errors

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500) + len(
            [e for e in self.errors if e.startswith("transport")])

    def summary(self) -> dict:
        return {"requests": sum(self.statuses.values()), "statuses": dict(sorted(self.statuses.items())),
                "server_errors": self.server_errors, "errors": self.errors[:5]}


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
            self._process.send_signal(signal.SIGINT)  # the eval cleans up on the way out
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._thread.join(timeout=70)

    def _run(self) -> None:
        while not self._stop.is_set():
            with open(self.live.workdir / "eval.log", "ab") as log:
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
                try:
                    if i % 2:
                        response = http.post("/turns", json={"text": f"client {n} says hello number {i}"})
                    else:
                        response = http.post("/recall", json={"query": f"hello number {i - 1}", "k": 5})
                except httpx.TransportError as exc:
                    with lock:
                        report.errors.append(f"transport: {exc!r}")
                    continue
                with lock:
                    report.statuses[response.status_code] += 1
                    if response.status_code >= 500:
                        report.errors.append(f"{response.status_code}: {response.text[:300]}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return report
