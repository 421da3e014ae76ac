"""A real Prometheus (Debian's package) scrapes a live Engram server and a live Celery worker
(pre-forking, two pool processes, multiprocess mode) with the monitor token, and the metrics are
read back through Prometheus's HTTP API."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import httpx
import pytest

from tests.api.live import MONITOR, MONITOR_TOKEN, ROOT, LiveEngram, _free_port

PROMETHEUS = shutil.which("prometheus")


@pytest.fixture
def live(tmp_path, es_admin):
    if PROMETHEUS is None:
        pytest.skip("Debian's prometheus package is not installed (scripts/test installs it)")
    engram = LiveEngram(tmp_path)
    engram.setup()
    engram.start()
    yield engram
    engram.stop()
    engram.cleanup(es_admin)


def _start_worker(engram: LiveEngram, port: int) -> subprocess.Popen:
    env = {**engram.env, "ENGRAM_WORKER_METRICS_PORT": str(port),
           "PROMETHEUS_MULTIPROC_DIR": str(engram.workdir / "worker-metrics")}
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork",
                             "--concurrency", "2", "--loglevel", "INFO"],
                            cwd=ROOT, env=env, stdout=open(engram.workdir / "worker.log", "ab"),
                            stderr=subprocess.STDOUT)


def _start_prometheus(workdir, targets: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    jobs = "".join(f"""
  - job_name: {job}
    scrape_interval: 1s
    authorization:
      credentials: {MONITOR_TOKEN}
    static_configs:
      - targets: ["{target}"]""" for job, target in targets.items())
    config = workdir / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: 1s\nscrape_configs:{jobs}\n")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=open(workdir / "prometheus.log", "ab"), stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def _query(prometheus: str, expression: str) -> list[dict]:
    response = httpx.get(f"{prometheus}/api/v1/query", params={"query": expression}, timeout=5)
    response.raise_for_status()
    return response.json()["data"]["result"]


def _eventually(prometheus: str, expression: str, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if result := _query(prometheus, expression):
                return result
        except (httpx.TransportError, httpx.HTTPStatusError):  # still starting: 503 until its storage is ready
            pass
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never had {expression}")


def test_prometheus_scrapes_the_server_and_the_worker(live):
    token = live.token("scraped")
    worker_port = _free_port()
    worker = _start_worker(live, worker_port)
    prometheus = None
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"{live.url}/api/v1/", headers=headers, timeout=30) as api:
            for text in ("My name is Ada.", "I live in Lisbon.", "I work as a nurse."):
                assert api.post("subjects/ada/turns", json={"text": text}).status_code == 201
            assert api.post("subjects/ada/recall", json={"query": "where do I live"}).status_code == 200
            assert api.post("subjects/nobody/recall", json={"query": "x"}).status_code == 404
            run = api.post("subjects/ada/consolidate", json={})  # queued: a pool process of the worker runs it
            assert run.status_code == 202
            run_url = f"subjects/ada/consolidations/{run.json()['run']['id']}"
            deadline = time.monotonic() + 120
            while api.get(run_url).json()["status"] in ("queued", "running"):
                assert time.monotonic() < deadline, live.log("worker")
                time.sleep(0.5)
            assert api.get(run_url).json()["status"] == "succeeded"
        # Both exporters refuse a scrape without the monitor token.
        assert httpx.get(f"{live.url}/metrics").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{worker_port}/metrics").status_code == 401
        assert b"engram_consolidation_runs_total" in httpx.get(f"http://127.0.0.1:{worker_port}/metrics",
                                                                headers=MONITOR).content

        prometheus, url = _start_prometheus(live.workdir, {"engram-web": f"127.0.0.1:{live.port}",
                                                          "engram-worker": f"127.0.0.1:{worker_port}"})
        up = _eventually(url, 'sum(up{job=~"engram-.*"}) == 2')
        assert float(up[0]["value"][1]) == 2
        turns = _eventually(url, 'engram_http_request_duration_seconds_count{job="engram-web",'
                                 'route="api/v1/subjects/<str:external_id>/turns",status="201"}')
        assert float(turns[0]["value"][1]) == 3
        tenant = _eventually(url, 'engram_tenant_requests_total{job="engram-web",surface="rest"}')
        assert tenant[0]["metric"]["tenant_id"].isdigit() and float(tenant[0]["value"][1]) >= 7
        assert _eventually(url, 'engram_api_errors_total{job="engram-web",code="not_found"}')
        assert _eventually(url, 'engram_recalls_total{job="engram-web",surface="turn"}')
        assert _eventually(url, 'engram_outbox_entries{job="engram-web",state="failed"}')
        # The worker's own metrics, recorded in one of its pool processes.
        runs = _eventually(url, 'engram_consolidation_runs_total{job="engram-worker",status="succeeded"}')
        assert float(runs[0]["value"][1]) == 1
        assert _eventually(url, 'engram_consolidation_facts_total{job="engram-worker",change="created"} > 0')
        assert _eventually(url, 'engram_es_requests_total{job="engram-worker",outcome="2xx"} > 0')
        assert not _query(url, 'engram_consolidation_runs_total{job="engram-web"}')  # each process its own
    finally:
        for process in (prometheus, worker):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
