"""End-to-end against a real server process (tests/api/live.py) with the typed client: parallel
turns and recalls, schemathesis over the OpenAPI schema, and Elasticsearch stopped in the middle
of a run of writes."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from engram_client import EngramAPIError, EngramClient
from tests.api.live import MONITOR, LiveEngram

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live(es_admin, tmp_path_factory):
    server = LiveEngram(tmp_path_factory.mktemp("engram-live"))
    server.setup()
    server.start()
    yield server
    server.stop()
    server.cleanup(es_admin)


@pytest.fixture(scope="module")
def live_token(live) -> str:
    return live.token()


def test_parallel_turns_and_recalls_lose_and_duplicate_nothing(live, live_token, es_admin):
    subjects, per_subject = ["ann", "ben", "cat", "dan"], 8
    tasks = []
    for s in subjects:
        for n in range(per_subject):
            tasks += [("turn", s, n)] * 2  # every write sent twice at once, with the same Idempotency-Key
        tasks += [("recall", s, None)] * 6
    random.Random(7).shuffle(tasks)
    local = threading.local()

    def client() -> EngramClient:
        if not hasattr(local, "client"):
            # Retries only "this key's first request is still running" (409 + Retry-After).
            local.client = EngramClient(live.url, live_token, retries=120, timeout=120)
        return local.client

    def run(task):
        kind, s, n = task
        if kind == "turn":
            return task, client().turn(s, f"{s} says {n}", k=5, idempotency_key=f"{s}-{n}")
        try:
            return task, client().recall(s, f"what does {s} say", k=50)
        except EngramAPIError as exc:  # the end-user's first turn may not have landed yet
            assert (exc.status, exc.code) == (404, "not_found")
            return task, []

    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(run, tasks))

    ids_by_key = defaultdict(set)
    for (kind, s, n), result in results:
        if kind == "turn":
            assert result["status"] == "applied", result
            ids_by_key[(s, n)].add(result["id"])
            memories = result["recall"]
        else:
            memories = result
        assert all(m["text"].startswith(f"{s} says") for m in memories if m["memory_type"] == "episodic"), memories
    assert all(len(ids) == 1 for ids in ids_by_key.values()) and len(ids_by_key) == len(subjects) * per_subject

    engram = EngramClient(live.url, live_token)
    for s in subjects:
        texts = Counter(m["text"] for m in engram.export(s)["memories"]["episodic"])
        assert texts == Counter({f"{s} says {n}": 1 for n in range(per_subject)})
    es_admin.indices.refresh(index=f"{live.prefix}-episodic")
    assert es_admin.count(index=f"{live.prefix}-episodic")["count"] == len(subjects) * per_subject


FAR_OFF = ["The castle near us was built 4500 years ago.", "In 10000 years nobody will remember this.",
           "That was 1000000 days ago"]


def test_a_turn_that_names_a_far_off_time_is_stored_and_recalled(live, live_token):
    """Times the calendar cannot hold (before year 1, after 9999) are not read as dates; the turn is
    stored as said, found by recall, and a question about such a time is answered."""
    engram = EngramClient(live.url, live_token)
    stored = [engram.turn("far-off", text, k=5)["id"] for text in FAR_OFF]
    imported = engram.import_episodes("far-off", [{"text": f"{text} (imported)", "occurred_at": when}
                                                  for text, when in zip(FAR_OFF, ("0001-01-01T00:00:00Z",
                                                                                  "9999-12-31T00:00:00Z",
                                                                                  "2026-12-06T10:00:00Z"))])
    texts = {m["id"]: m["text"] for m in engram.export("far-off")["memories"]["episodic"]}
    assert [texts[i] for i in stored] == FAR_OFF
    assert sorted(t for t in texts.values() if t.endswith("(imported)")) == sorted(f"{t} (imported)" for t in FAR_OFF)
    assert len(imported["ids"]) == 3
    answer = httpx.post(f"{live.url}/api/v1/subjects/far-off/recall", json={"query": "what happened 5000 years ago"},
                        headers={"Authorization": f"Bearer {live_token}"}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert any("castle" in m["text"] for m in answer.json()["memories"])
    for query in ("What happened in 10000 years?", "what was 1000000 days ago", "the week before 1 January 0001"):
        assert engram.recall("far-off", query, k=5) is not None


# One token per scope, and one with all of them: an operation is fuzzed as every kind of caller sees it
# (refused with 403 by most, served by the one whose scope it needs), and the all-scopes run follows
# the schema's links (create, read, forget, read again: api/links.py).
SCOPE_RUNS = {scope: [scope] for scope in ("memory:read", "memory:write", "memory:forget", "subject:erase",
                                           "tenant:admin")}
SCOPE_RUNS["all scopes"] = list(SCOPE_RUNS)
_CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def _schemathesis(live, token: str, *, examples: str, phases: str, workdir: Path) -> subprocess.CompletedProcess:
    from tests.fuzzing import run_seed

    command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(ROOT / "tests" / "api" / "schemathesis.toml"),
               "run", f"{live.url}/api/v1/schema/",
               "--header", f"Authorization: Bearer {token}", "--checks", _CHECKS, "--phases", phases,
               "--max-examples", examples, "--workers", "1", "--seed", str(run_seed()), "--max-failures", "20",
               "--report", "junit", "--report-junit-path", str(workdir / "junit.xml")]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("run", list(SCOPE_RUNS))
def test_schemathesis_finds_no_server_error(live, run, tmp_path):
    """The property-based run over the OpenAPI schema, once per scope (the README's command is the
    all-scopes run): long numbers and deeply nested JSON among the generated values
    (tests/api/schemathesis_hooks.py), the run's seed (printed on a failure), no 5xx."""
    from tests.fuzzing import record, run_seed

    token = live.tokens({run: SCOPE_RUNS[run]})[run]
    every = run == "all scopes"
    log_before = len(live.log())
    # One scope: generated calls to every operation (most answer 403); all scopes: also every case the
    # schema's constraints define (coverage), and chains through the links (stateful).
    result = _schemathesis(live, token, workdir=tmp_path,
                           phases="examples,coverage,fuzzing,stateful" if every else "examples,fuzzing",
                           examples=os.environ.get("ENGRAM_SCHEMATHESIS_EXAMPLES", "20") if every else
                           os.environ.get("ENGRAM_SCHEMATHESIS_SCOPE_EXAMPLES", "10"))
    summary = re.search(r"(\d+) generated, (\d+) passed", result.stdout)
    server_errors = re.findall(r'"[A-Z]+ [^"]*" 5\d\d ', live.log()[log_before:])  # runserver's access log
    record("schemathesis", run, cases=int(summary.group(1)) if summary else 0, server_errors=len(server_errors))
    seed = f"seed {run_seed()} (replay: ENGRAM_FUZZ_SEED={run_seed()})"
    print(f"schemathesis, {run}: {summary.group(0) if summary else 'no summary'}; {seed}")
    assert result.returncode == 0, f"{seed}\n" + result.stdout[-20000:] + result.stderr[-5000:]
    assert summary and summary.group(1) == summary.group(2), f"{seed}\n" + result.stdout[-3000:]
    assert server_errors == [], (seed, server_errors[:20])
    (Path(os.environ.get("ENGRAM_SCHEMATHESIS_OUT", tmp_path)) / f"{run.replace(' ', '-').replace(':', '-')}.txt"
     ).write_text(result.stdout)


# ---------------------------------------------------------------- Elasticsearch stopped mid-run


def _stack(action: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "stack.py"), action,
                    "--instance", os.environ["ENGRAM_STACK_INSTANCE"], "--es-port", os.environ["ENGRAM_STACK_ES_PORT"]],
                   check=True, cwd=ROOT)


def _wait(predicate, *, timeout: float, every: float = 1.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (httpx.HTTPError, EngramAPIError):
            value = None
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
@pytest.mark.skipif("ENGRAM_STACK_INSTANCE" not in os.environ, reason="needs a node it may stop (scripts/test)")
def test_elasticsearch_stopped_mid_run_loses_nothing_acknowledged(es_admin, tmp_path):
    server = LiveEngram(tmp_path, ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS="1")
    server.setup()
    server.start()
    server.start_worker()  # Celery worker + beat: the replay runs as in production
    token = server.token()
    subjects = ["ola", "per", "quinn"]
    acknowledged: dict[str, list[tuple[int, str]]] = defaultdict(list)  # subject -> [(seq, memory id)]
    statuses: Counter = Counter()
    stop_writing = threading.Event()

    def writer():
        client = EngramClient(server.url, token, retries=0, timeout=60)
        seq = 0
        while not stop_writing.is_set():
            s = subjects[seq % len(subjects)]
            # A real client retries an unanswered write with the same key until it is acknowledged.
            while True:
                try:
                    result = client.turn(s, f"{s} event {seq}", idempotency_key=f"write-{seq}")
                except (httpx.HTTPError, EngramAPIError) as exc:
                    statuses[getattr(exc, "status", type(exc).__name__)] += 1
                    time.sleep(0.2)
                    continue
                break
            statuses[202 if result["status"] == "queued" else 201] += 1
            acknowledged[s].append((seq, result["id"]))
            seq += 1
            time.sleep(0.05)

    def count() -> int:
        return sum(map(len, acknowledged.values()))

    thread = threading.Thread(target=writer, daemon=True)
    try:
        thread.start()
        _wait(lambda: statuses[201] >= 15, timeout=120, what="writes before the outage")
        _stack("es-stop")
        try:
            _wait(lambda: statuses[202] >= 15, timeout=120, what="writes accepted during the outage")
        finally:
            _stack("es-start")
        restarted_at = count()
        _wait(lambda: count() >= restarted_at + 15, timeout=180, what="writes after the restart")
        stop_writing.set()
        thread.join(timeout=120)
        # The worker's periodic replay drains the outbox.
        _wait(lambda: httpx.get(f"{server.url}/healthz", headers=MONITOR, timeout=10).json()["outbox"]["pending"] == 0,
              timeout=600, every=2, what="the outbox to drain\n" + server.log("worker")[-3000:])

        client = EngramClient(server.url, token, retries=3)
        for s in subjects:  # back to normal: applied at once again
            result = client.turn(s, f"{s} final")
            assert result["status"] == "applied"
            acknowledged[s].append((-1, result["id"]))
        for s in subjects:
            stored = sorted(client.export(s)["memories"]["episodic"], key=lambda m: m["created_at"])
            # Every acknowledged write is there, once, in the order it was acknowledged, with its id.
            expected = [f"{s} event {seq}" if seq >= 0 else f"{s} final" for seq, _ in acknowledged[s]]
            assert [m["text"] for m in stored] == expected, (s, statuses)
            assert [m["id"] for m in stored] == [i for _, i in acknowledged[s]]
        es_admin.indices.refresh(index=f"{server.prefix}-episodic")
        assert es_admin.count(index=f"{server.prefix}-episodic")["count"] == count()
        assert statuses[202] >= 15 and statuses[201] >= 15, statuses
        print(f"acknowledged {count()} writes: {dict(statuses)}")
    finally:
        stop_writing.set()
        thread.join(timeout=60)
        server.stop()
        server.cleanup(es_admin)


def test_api_calls_during_a_running_memory_eval_never_answer_500(live, live_token):
    # The issue's finding: while memory_eval ran against the same SQLite file, every API call
    # answered 500 "database is locked" (the eval held one write transaction for minutes).
    from tests.api.contention import EvalLoop, run_load

    with EvalLoop(live) as evals:
        time.sleep(5)  # the eval is loading its corpus (tenants, end-users, keys) when the load starts
        report = run_load(live=live, token=live_token, clients=4, seconds=20)
        failed = evals.failed

    summary = report.summary()
    assert summary["server_errors"] == 0, summary
    assert failed == [], live.log("eval")
    assert summary["requests"] >= 8 and set(summary["statuses"]) <= {200, 201}, summary
