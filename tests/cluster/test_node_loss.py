"""A data node lost under load: 8 clients send turns, recalls and consolidation requests to two web
processes for a fixed time while the node holding the memory index's primary is killed (SIGKILL)
and later started again. Every acknowledged write is stored exactly once, no recall returns
another end-user's memory, recalls answer (or say 503 with Retry-After, never 500) while the
cluster is yellow, the outbox drains, and two Celery workers never run two consolidations of
one end-user at once."""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import httpx
import pytest

from engram_client import EngramClient
from tests.cluster.deployment import CLUSTER_PORT, ROOT, Deployment, cluster_env, es_http, stack

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CLUSTER_PORT not in os.environ, reason="needs the multi-node cluster of scripts/test")]

logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise

TENANTS = {"alpha": ["ann", "ben", "cat", "dan"], "beta": ["eve", "fay", "gus", "hal"]}
SENTENCES = ["I moved to Hamburg last spring", "my router drops the wifi every evening",
             "I prefer to be called in the afternoon", "my daughter is seven years old",
             "the heating does not turn on in the morning", "I changed my email address last week",
             "my smart plug stopped responding yesterday", "I am allergic to peanuts"]
QUESTIONS = ["where do I live", "what is wrong with my router", "when should you call me",
             "how old is my daughter", "what about the heating", "which email address do I use"]
CLIENTS = 8
# The counts of the last run, for the deployment guide.
REPORT = ROOT / ".engram" / "reports" / "node-loss.json"


@dataclass
class Record:
    """What the clients saw: every request's (start, kind, status, Retry-After present), each
    acknowledged write by end-user, and the ids each end-user's recalls returned."""

    requests: list[tuple[float, str, int, bool]] = field(default_factory=list)
    acknowledged: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    recalled: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    foreign_text: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, kind: str, started: float, response: httpx.Response | None) -> None:
        status = response.status_code if response is not None else 0
        with self.lock:
            self.requests.append((started, kind, status, response is not None and "Retry-After" in response.headers))

    def hits(self, who: str, memories: list[dict] | None) -> None:
        with self.lock:
            for memory in memories or []:
                self.recalled[who].add(memory["id"])
                # An episode's text names who said it: a turn of another end-user is a leak on sight.
                if memory["memory_type"] == "episodic" and not memory["text"].startswith(f"{who.title()}:"):
                    self.foreign_text.append((who, memory["text"]))


def _client(url: str, tokens: dict[str, str], record: Record, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    users = [(tenant, who) for tenant, names in TENANTS.items() for who in names]
    with httpx.Client(base_url=f"{url}/api/v1/", timeout=60) as http:
        seq = 0
        while not stop.is_set():
            tenant, who = rng.choice(users)
            auth = {"Authorization": f"Bearer {tokens[tenant]}"}
            roll = rng.random()
            if roll < 0.4:
                seq += 1
                text = f"{who.title()}: {rng.choice(SENTENCES)}, note {seed}.{seq}"
                key = uuid.uuid4().hex
                # A real client sends an unanswered write again, with the same key, until it is acknowledged.
                while True:
                    started = time.monotonic()
                    try:
                        response = http.post(f"subjects/{who}/turns", json={"text": text, "k": 5},
                                             headers={**auth, "Idempotency-Key": key})
                    except httpx.HTTPError:
                        response = None
                    record.request("turn", started, response)
                    if response is not None and response.status_code in (201, 202):
                        body = response.json()
                        with record.lock:
                            record.acknowledged[who].append((text, body["id"]))
                        record.hits(who, body.get("recall"))
                        break
                    if stop.is_set() and response is None:
                        break  # the server is going away: what was not acknowledged is not counted
                    time.sleep(0.2)
            elif roll < 0.95:
                started = time.monotonic()
                try:
                    response = http.post(f"subjects/{who}/recall", json={"query": rng.choice(QUESTIONS), "k": 10},
                                         headers=auth)
                except httpx.HTTPError:
                    response = None
                record.request("recall", started, response)
                if response is not None and response.status_code == 200:
                    record.hits(who, response.json()["memories"])
            else:
                started = time.monotonic()
                try:
                    response = http.post(f"subjects/{who}/consolidate", json={}, headers=auth)
                except httpx.HTTPError:
                    response = None
                record.request("consolidate", started, response)


class HealthWatch(threading.Thread):
    """The cluster's status once a second, from whichever node answers, with the monitor credential."""

    def __init__(self, es: dict[str, str]):
        super().__init__(daemon=True)
        self.es, self.samples, self.stopped = es, [], threading.Event()

    def status(self, http: httpx.Client) -> str:
        for url in self.es["ES_URL"].split(","):
            try:
                return http.get(f"{url}/_cluster/health").json()["status"]
            except (httpx.HTTPError, KeyError, ValueError):
                continue
        return "unreachable"

    def run(self) -> None:
        with es_http(self.es, user="MONITOR", timeout=2) as http:
            while not self.stopped.is_set():
                self.samples.append((time.monotonic(), self.status(http)))
                time.sleep(1)

    def at(self, moment: float) -> str:
        before = [status for t, status in self.samples if t <= moment]
        return before[-1] if before else "unknown"


def _primary_node(es: dict[str, str], index: str) -> int:
    """The number of the node holding the index's primary shard (nodes are named engram-<instance>-<n>)."""
    with es_http(es, timeout=30) as http:
        for url in es["ES_URL"].split(","):
            try:
                rows = http.get(f"{url}/_cat/shards/{index}", params={"format": "json", "h": "prirep,node"}).json()
                break
            except httpx.HTTPError:
                continue
    return int(next(row["node"] for row in rows if row["prirep"] == "p").rsplit("-", 1)[1])


def _wait(predicate, *, timeout: float, what, every: float = 2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if value := predicate():
                return value
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


_CONSOLIDATIONS = """
import json
from memory_app.models import ConsolidationRun
runs = {}
for run in ConsolidationRun.objects.select_related("subject").order_by("started_at"):
    runs.setdefault(run.subject.external_id, []).append(
        [run.status, run.started_at and run.started_at.isoformat(), run.finished_at and run.finished_at.isoformat(),
         (run.error or {}).get("code")])
print(json.dumps(runs))
"""


def test_a_data_node_lost_under_load_loses_nothing_acknowledged_and_leaks_nothing(tmp_path):
    es = cluster_env()
    deployment = Deployment(tmp_path, es=es, redis_db=6, ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS="1",
                            ENGRAM_CONSOLIDATION_AFTER_EPISODES="4", ENGRAM_CONSOLIDATION_DISPATCH_INTERVAL_SECONDS="5",
                            ENGRAM_HEALTH_CACHE_SECONDS="1")
    deployment.setup()
    watch = HealthWatch(es)
    restarted = threading.Event()
    killed: int | None = None
    try:
        tokens = {tenant: deployment.token(tenant) for tenant in TENANTS}
        deployment.start()
        record = Record()
        # Each end-user's first turn before the load: creating an end-user mints its key.
        for tenant, names in TENANTS.items():
            with EngramClient(deployment.urls[0], tokens[tenant], retries=3) as engram:
                for who in names:
                    text = f"{who.title()}: I am a customer of {tenant}, note first"
                    record.acknowledged[who].append((text, engram.turn(who, text)["id"]))
        stop = threading.Event()
        threads = [threading.Thread(target=_client, args=(deployment.urls[n % 2], tokens, record, stop, n))
                   for n in range(CLIENTS)]
        watch.start()
        began = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(20)
        killed = _primary_node(es, f"{deployment.prefix}-memories-v1")
        stack("node-kill", "--node", str(killed))
        killed_at = time.monotonic()
        time.sleep(30)
        restarter = threading.Thread(target=lambda: (stack("node-start", "--node", str(killed)), restarted.set()),
                                     daemon=True)
        restarter.start()
        restarter.join(timeout=900)
        assert restarted.is_set(), "the killed node did not rejoin"
        back_at = time.monotonic()
        time.sleep(15)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        ended = time.monotonic()

        with es_http(es, timeout=30) as http:
            _wait(lambda: http.get(f"{es['ES_URL'].split(',')[0]}/_cluster/health",
                                   params={"wait_for_status": "green", "timeout": "10s"}).json()["status"] == "green",
                  timeout=300, what="the cluster to be green again")
        green_at = time.monotonic()
        outbox: dict[str, dict] = {}

        def drained() -> bool:
            outbox.update({url: httpx.get(f"{url}/healthz", headers=deployment.monitor_headers, timeout=10)
                           .json()["outbox"] for url in deployment.urls})
            return all(state["pending"] == 0 for state in outbox.values())

        _wait(drained, timeout=300, what=lambda: f"the outbox to drain (last seen: {json.dumps(outbox)})")
        drained_at = time.monotonic()
        watch.stopped.set()

        # Every acknowledged write is stored, once, under the id it was acknowledged with.
        stored = 0
        for tenant, names in TENANTS.items():
            with EngramClient(deployment.urls[1], tokens[tenant], retries=3) as engram:
                for who in names:
                    memories = engram.export(who)["memories"]
                    episodes = memories["episodic"]
                    assert Counter(m["text"] for m in episodes) == Counter(t for t, _ in record.acknowledged[who]), who
                    assert {m["id"] for m in episodes} == {i for _, i in record.acknowledged[who]}, who
                    assert len(episodes) == len(record.acknowledged[who])
                    stored += len(episodes)
                    # Whatever a recall returned to this end-user is one of their own memories.
                    own = {m["id"] for kind in memories.values() for m in kind}
                    assert record.recalled[who] <= own, (who, record.recalled[who] - own)
        assert record.foreign_text == []
        with es_http(es, timeout=30) as http:
            url = es["ES_URL"].split(",")[0]
            http.post(f"{url}/{deployment.prefix}-episodic/_refresh")
            assert http.get(f"{url}/{deployment.prefix}-episodic/_count").json()["count"] == stored

        # Recalls answered while the cluster was yellow, and no request ever got a 500.
        statuses = Counter((kind, status) for _, kind, status, _ in record.requests)
        yellow = Counter((kind, status) for started, kind, status, _ in record.requests
                         if watch.at(started) == "yellow")
        failed = {key: n for key, n in statuses.items() if key[1] == 0 or (key[1] >= 500 and key[1] != 503)}
        assert failed == {}, statuses
        assert all(retry for _, _, status, retry in record.requests if status == 503), "a 503 without Retry-After"
        assert yellow[("recall", 200)] > 0, (yellow, watch.samples)
        assert statuses[("recall", 200)] > 0 and statuses[("turn", 201)] > 0

        # Two workers ran consolidations, never two of one end-user at once.
        runs = json.loads(deployment.manage("shell", "-c", _CONSOLIDATIONS).strip().splitlines()[-1])
        for who, rows in runs.items():
            done = [(start, end) for status, start, end, _ in rows if status == "succeeded"]
            for (_, end), (start, _) in zip(done, done[1:]):
                assert start >= end, (who, rows)
        # A run may fail for a reason it names (the lease held, the cluster unreachable), never an
        # unhandled one (a refused refresh was one); a refused refresh on a request is a 500 above.
        codes = Counter(code for rows in runs.values() for status, *_, code in rows if status == "failed")
        assert codes["internal_error"] == 0, codes
        ran = {name: deployment.log(name).count("consolidate_subject") for name in ("worker1", "worker2")}
        assert all(ran.values()), ran
        outcome = Counter(status for rows in runs.values() for status, *_ in rows)
        refused = sum(1 for rows in runs.values() for *_, code in rows if code == "consolidation_running")

        report = {
            "node_killed": killed, "load_seconds": round(ended - began, 1),
            "killed_after_s": round(killed_at - began, 1), "rejoined_after_s": round(back_at - began, 1),
            "green_after_s": round(green_at - began, 1), "outbox_drained_after_s": round(drained_at - began, 1),
            "yellow_seconds": sum(1 for _, status in watch.samples if status == "yellow"),
            "acknowledged_writes": stored, "queued_202": statuses[("turn", 202)],
            "requests": {f"{kind} {status}": n for (kind, status), n in sorted(statuses.items())},
            "while_yellow": {f"{kind} {status}": n for (kind, status), n in sorted(yellow.items())},
            "consolidation_runs": dict(outcome), "consolidations_refused_as_running": refused,
            "consolidation_failures": dict(codes),
            "consolidate_tasks_by_worker": ran, "rss_mb": deployment.rss_mb(),
        }
        print("node loss under load:", json.dumps(report))
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps(report, indent=1) + "\n")
    finally:
        watch.stopped.set()
        deployment.stop()
        if killed is not None and not restarted.is_set():
            stack("node-start", "--node", str(killed))
        deployment.cleanup()
