"""A real Celery worker over the real Redis broker: a worker killed (SIGKILL) in the middle of a
consolidation and started again finishes it with no duplicate fact and no episode lost."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from engram_core.es.schema import MemoryType, alias_name
from tests.api.live import ROOT, LiveEngram

FACTS = 40
_SETUP = """
from datetime import UTC, datetime, timedelta
from tenants.models import Tenant
from tenants.services.keys import KeyLifetimes
from tenants.services.subjects import subject_get_or_create
from memory_app.services.imports import episodes_import
tenant = Tenant.objects.create(slug="kill", name="kill")
subject = subject_get_or_create(tenant=tenant, external_id="victim", actor="tests",
                                lifetimes=KeyLifetimes.from_settings())
t0 = datetime(2025, 1, 1, tzinfo=UTC)
episodes_import(subject=subject, episodes=[
    {{"text": f"My favourite thing{{chr(97 + n // 26)}}{{chr(97 + n % 26)}} is Value{{n}}x.", "occurred_at": (t0 + timedelta(minutes=n)).isoformat(),
      "session_id": "s"}} for n in range({n})])
print(subject.pk, subject.user_id)
"""
_REQUEST = """
from tenants.models import Subject
from memory_app.consolidation.services import consolidation_request
print(consolidation_request(subject=Subject.objects.get(pk={pk})).pk)
"""
_RUNS = """
from memory_app.models import ConsolidationRun
print([(r.pk, r.status) for r in ConsolidationRun.objects.order_by("pk")])
"""


@pytest.fixture
def live(tmp_path, es_admin):
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        pytest.skip("needs the Redis broker scripts/test starts")
    engram = LiveEngram(tmp_path, DJANGO_SETTINGS_MODULE="tests.consolidation.worker_settings",
                        CELERY_BROKER_URL=os.environ["CELERY_BROKER_URL"],
                        ENGRAM_TEST_QUEUE=f"consolidation-test-{uuid.uuid4().hex[:8]}",
                        ENGRAM_CELERY_VISIBILITY_TIMEOUT="5", LOG_LEVEL="INFO")
    engram.setup()
    yield engram
    engram.stop()
    engram.cleanup(es_admin)


def _worker(engram: LiveEngram) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
                             "--loglevel", "INFO", "-Q", engram.env["ENGRAM_TEST_QUEUE"]],
                            cwd=ROOT, env=engram.env, stdout=open(engram.workdir / "worker.log", "ab"),
                            stderr=subprocess.STDOUT)


def _facts(es_admin, prefix: str) -> list[dict]:
    index = alias_name(MemoryType.SEMANTIC, prefix=prefix)
    es_admin.indices.refresh(index=index)
    return [h["_source"] for h in es_admin.search(index=index, size=1000, source_excludes=["embedding"])["hits"]["hits"]]


def _waiting(es_admin, prefix: str) -> int:
    index = alias_name(MemoryType.EPISODIC, prefix=prefix)
    es_admin.indices.refresh(index=index)
    return es_admin.count(index=index, query={"bool": {"must_not": [{"exists": {"field": "consolidated_at"}}]}})["count"]


def test_a_worker_killed_mid_run_leaves_no_duplicate_and_loses_no_episode(live, es_admin):
    subject_pk = live.manage("shell", "-c", _SETUP.format(n=FACTS)).split()[-2]
    worker = _worker(live)
    try:
        run_id = live.manage("shell", "-c", _REQUEST.format(pk=subject_pk)).split()[-1]
        deadline = time.monotonic() + 120
        while len(_facts(es_admin, live.prefix)) < 5:
            assert time.monotonic() < deadline, live.log("worker")
            assert worker.poll() is None, live.log("worker")
            time.sleep(0.05)
        worker.kill()  # SIGKILL: no chance to finish, acknowledge or clean up
        worker.wait()
        written = len(_facts(es_admin, live.prefix))
        assert 5 <= written < FACTS, "the kill must land mid-run"
        assert _waiting(es_admin, live.prefix) == FACTS  # nothing stamped: the run had not finished
        assert f"({run_id}, 'running')" in live.manage("shell", "-c", _RUNS)

        worker = _worker(live)  # the restarted worker gets the unacknowledged task again
        deadline = time.monotonic() + 180
        while _waiting(es_admin, live.prefix) > 0:
            assert time.monotonic() < deadline, live.log("worker")
            time.sleep(0.5)
        # The episodes' stamps land just before the run's row is marked succeeded: wait for the row
        # before the `finally` stops the worker, which could otherwise kill it in between.
        while f"({run_id}, 'succeeded')" not in live.manage("shell", "-c", _RUNS):
            assert time.monotonic() < deadline, live.log("worker")
            time.sleep(0.5)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    facts = _facts(es_admin, live.prefix)
    texts = [f["text"] for f in facts]
    assert len(texts) == len(set(texts)) == FACTS  # every episode's fact, each exactly once
    assert all(not f.get("superseded_by") for f in facts)
    assert f"({run_id}, 'succeeded')" in live.manage("shell", "-c", _RUNS)
