"""The write path under faults (issue 10): per-subject replay progress, deterministic failures that
end as failed, ids namespaced per end-user, defaults stamped at acceptance."""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from django.apps import apps
from django.conf import settings as real_settings
from django.utils import timezone

from engram_client import EngramAPIError, EngramClient
from engram_core.es.schema import MemoryType, alias_name
from memory_app.commands import turn_command, write_command
from memory_app.models import IdempotencyRecord, OutboxEntry
from memory_app.outbox import outbox_replay, write_submit
from memory_app.services import episodes as episode_services
from memory_app.services.context import ContextOptions
from memory_app.services.store import new_memory_id
from memory_app.validation import Limits
from memory_app.turns import turn_create
from tenants import selectors as tenant_selectors
from tenants.models import AuditEvent, Subject, Tenant
from tenants.services import subjects
from tenants.services.keys import KeyLifetimes
from tests.api.conftest import in_process_app, slow_refresh
from tests.test_settings_reads import ALLOWED, BELOW_THE_EDGE, EDGE

ROOT = Path(__file__).resolve().parents[2]


def _texts(docs, memory_type, external_id, tenant=None):
    subject = Subject.objects.get(external_id=external_id, **({"tenant": tenant} if tenant else {}))
    return [d["text"] for d in docs(memory_type, user_id=subject.user_id)]


def test_a_stuck_end_user_holds_back_only_its_own_writes(memory, tenant, docs, monkeypatch):
    real = episode_services.episode_store

    def stuck_for_one(**kwargs):
        if kwargs["subject"].external_id == "stuck":
            raise TimeoutError("a transient failure of this end-user's writes")
        return real(**kwargs)

    monkeypatch.setattr(episode_services, "episode_store", stuck_for_one)
    for n in range(101):  # more than one batch of the old replayer, all of one end-user
        OutboxEntry.objects.create(tenant=tenant, external_id="stuck", operation="episode",
                                   memory_id=f"stuck-turn-{n:04d}", payload={"text": f"s{n}"}, actor="t",
                                   reason="outage")
    OutboxEntry.objects.create(tenant=tenant, external_id="free", operation="episode", memory_id="free-turn-0001",
                               payload={"text": "not held up"}, actor="t", reason="outage")
    report = outbox_replay()
    assert (report.applied, report.failed, report.pending) == (1, 0, 101)
    assert _texts(docs, MemoryType.EPISODIC, "free") == ["not held up"]
    stuck = OutboxEntry.objects.filter(external_id="stuck").order_by("id")
    # Only the stuck end-user's first write was tried; its later writes wait behind it, in order.
    assert [e.attempts for e in stuck[:2]] == [1, 0]
    assert stuck[0].last_error == {"code": "error", "message": "TimeoutError"}


def test_a_queued_import_with_duplicate_ids_fails_once_with_its_reason(engram, tenant, client, monitor_headers):
    # Accepted by an older version (today such an import is refused up front): replayed, it must
    # end as failed with its reason, not be re-embedded and retried on every run.
    episodes = [{"id": "dup-id-0001", "text": f"e{n}", "occurred_at": "2021-01-01T00:00:00Z"} for n in range(2)]
    entry = OutboxEntry.objects.create(tenant=tenant, external_id="mo", operation="import",
                                       payload={"episodes": episodes}, actor="t", reason="background")
    report = outbox_replay()
    assert (report.applied, report.failed, report.pending) == (0, 1, 0)
    operation = engram.operation(str(entry.uid))
    assert operation["status"] == "failed" and operation["error"]["code"] == "duplicate_ids"
    health = client.get("/healthz", headers=monitor_headers).json()["outbox"]
    assert health["failed"] == 1
    assert health["recent_failures"][0] == {"operation": str(entry.uid), "type": "import", "code": "duplicate_ids",
                                            "at": health["recent_failures"][0]["at"]}
    assert outbox_replay().failed == 0  # not tried again


def test_an_import_with_duplicate_ids_is_refused_up_front(engram, settings):
    episodes = [{"id": "dup-id-0002", "text": f"e{n}", "occurred_at": "2021-01-01T00:00:00Z"} for n in range(2)]
    for sync_max in (500, 1):  # applied at once, or accepted for the background
        settings.ENGRAM_API_IMPORT_SYNC_MAX = sync_max
        with pytest.raises(EngramAPIError) as err:
            engram.import_episodes("nat", episodes)
        assert err.value.status == 400 and err.value.code == "duplicate_ids"
        assert err.value.details["ids"] == ["dup-id-0002"]
    assert not OutboxEntry.objects.exists()


def test_a_client_id_cannot_collide_across_end_users_or_tenants(make_client, tenant, docs):
    other_tenant = Tenant.objects.create(slug=f"{tenant.slug}-b", name="B")
    mine, theirs = make_client(), make_client(of=other_tenant)
    episode = {"id": "my-own-id-001", "text": "hello", "occurred_at": "2021-01-01T00:00:00Z"}
    results = [mine.import_episodes("alice", [episode]), mine.import_episodes("bob", [episode]),
               theirs.import_episodes("alice", [episode])]
    ids = [r["ids"][0] for r in results]
    assert len(set(ids)) == 3 and "my-own-id-001" not in ids
    for client, who, memory_id in ((mine, "alice", ids[0]), (mine, "bob", ids[1]), (theirs, "alice", ids[2])):
        memory = client.get_memory(who, memory_id)
        assert memory["client_id"] == "my-own-id-001" and memory["text"] == "hello"
    # The same episode again for the same end-user is a retry (its own id back); the same id with
    # other content is that end-user's own conflict, not another's.
    assert mine.import_episodes("alice", [episode])["ids"] == [ids[0]]
    with pytest.raises(EngramAPIError) as err:
        mine.import_episodes("alice", [{**episode, "text": "something else"}])
    assert err.value.status == 409


def test_a_write_accepted_during_an_outage_keeps_its_acceptance_time(engram, es_down, docs):
    engram.turn("pia", "before")
    es_down.start()
    accepted = engram.turn("pia", "accepted while Elasticsearch was down")
    fact = engram.write_fact("pia", "Pia likes tea")
    accepted_by = timezone.now()
    es_down.restore()
    assert outbox_replay().applied == 2
    subject = Subject.objects.get(external_id="pia")
    episode = next(d for d in docs(MemoryType.EPISODIC, user_id=subject.user_id) if d["id"] == accepted["id"])
    stored_fact = docs(MemoryType.SEMANTIC, user_id=subject.user_id)[0]
    for stamp in (episode["occurred_at"], episode["created_at"], stored_fact["created_at"],
                  stored_fact["last_used_at"]):
        assert datetime.fromisoformat(stamp) <= accepted_by
    assert stored_fact["id"] == fact["id"]


class LostAnswer(httpx.BaseTransport):
    """In front of the application: the first request to ``path`` is applied by the server, whose
    process then dies before it records its answer (the Idempotency-Key stays claimed and goes
    stale), and the client sees a read timeout. Every other request passes through."""

    def __init__(self, app, path: str):
        self.inner, self.path, self.tripped = httpx.WSGITransport(app=app), path, False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path == self.path and not self.tripped:
            self.tripped = True
            key = request.headers["Idempotency-Key"]
            IdempotencyRecord.objects.filter(key=key).update(
                status_code=None, response_body=None, locked_at=timezone.now() - timedelta(hours=1))
            raise httpx.ReadTimeout("timed out waiting for the answer", request=request)
        return response


@pytest.fixture
def lossy(make_token):
    app = in_process_app()

    def make(path: str) -> EngramClient:
        return EngramClient("http://testserver", make_token(), retries=2, max_wait=0,
                            transport=LostAnswer(app, path))

    return make


def test_a_create_whose_answer_was_lost_is_retried_into_the_original(lossy, engram, docs):
    client = lossy("/api/v1/subjects/quinn/memories")
    fact = client.write_fact("quinn", "Quinn drives a bike")
    assert fact["status"] == "applied" and fact["memory"]["text"] == "Quinn drives a bike"
    subject = Subject.objects.get(external_id="quinn")
    assert [d["id"] for d in docs(MemoryType.SEMANTIC, user_id=subject.user_id)] == [fact["id"]]


def test_an_outcome_whose_answer_was_lost_counts_once(lossy, engram):
    playbook = engram.write_playbook("rae", "wifi drops", "restart the router")
    client = lossy(f"/api/v1/subjects/rae/playbooks/{playbook['id']}/outcome")
    outcome = client.record_outcome("rae", playbook["id"], True)
    assert outcome["memory"]["success_count"] == 1
    assert engram.get_memory("rae", playbook["id"])["success_count"] == 1


def test_a_supersede_whose_answer_was_lost_marks_the_old_fact_once(lossy, engram):
    old = engram.write_fact("sam", "Sam lives in Kiel")
    client = lossy("/api/v1/subjects/sam/memories")
    new = client.write_fact("sam", "Sam lives in Bonn", supersedes=[old["id"]])
    assert new["status"] == "applied"
    assert engram.get_memory("sam", old["id"])["superseded_by"] == [new["id"]]


def test_a_write_without_an_idempotency_key_is_not_resent_after_a_timeout(make_token):
    sent = []

    def timeout(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        raise httpx.ReadTimeout("slow", request=request)

    client = EngramClient("http://testserver", make_token(), retries=2, max_wait=0,
                          transport=httpx.MockTransport(timeout))
    with pytest.raises(httpx.ReadTimeout):
        client.request("POST", "subjects/x/turns", json={"text": "hi"})
    assert sent == ["POST"]
    with pytest.raises(httpx.ReadTimeout):
        client.recall("x", "hi")  # a read: sent again
    assert sent == ["POST"] * 4


def _everywhere(es_admin, *needles: str) -> list[str]:
    """Where any of ``needles`` is still found: every field of every row of every Django model,
    and every (non-system) Elasticsearch index, after a refresh of this test's own (a refresh of
    every index would make other test processes' writes searchable while they assert they are not)."""
    from django.conf import settings
    found = []
    for model in apps.get_models():
        for row in model._base_manager.all():
            for field in model._meta.concrete_fields:
                value = json.dumps(field.value_from_object(row), default=str)
                found += [f"{model.__name__}.{field.name}" for n in needles if n in value]
    es_admin.indices.refresh(index=f"{settings.ES_INDEX_PREFIX}*")
    for needle in needles:
        hits = es_admin.search(index="*", query={"query_string": {"query": f'"{needle}"', "default_field": "*"}},
                               size=10)["hits"]["hits"]
        found += [f"{h['_index']}/{h['_id']}" for h in hits]
    return found


def test_forget_leaves_the_text_nowhere(api, engram, es_down, es_admin):
    secret = "my locker code is quixotrel"
    turn = api.post("/api/v1/subjects/una/turns", {"text": secret}, format="json", HTTP_IDEMPOTENCY_KEY="t1")
    again = api.post("/api/v1/subjects/una/turns", {"text": "what is my locker code"}, format="json",
                     HTTP_IDEMPOTENCY_KEY="t2")
    assert any("quixotrel" in m["text"] for m in again.json()["recall"])  # a stored answer holds it
    es_down.start()
    fact = engram.write_fact("una", "Una's locker: quixotrel")
    es_down.restore()
    outbox_replay()
    assert len(_everywhere(es_admin, "quixotrel")) >= 4
    engram.forget("una", turn.json()["id"], "user_request")
    engram.forget("una", fact["id"], "user_request")
    assert _everywhere(es_admin, "quixotrel") == []
    # The stored answers are still replayed, redacted: a retry is not run again.
    replay = api.post("/api/v1/subjects/una/turns", {"text": secret}, format="json", HTTP_IDEMPOTENCY_KEY="t1")
    assert replay.status_code == 201 and replay.json()["memory"] == {"id": turn.json()["id"], "forgotten": True}


def _searchable(es_admin, memory_type, memory_id) -> bool:
    return es_admin.count(index=alias_name(memory_type), query={"ids": {"values": [memory_id]}})["count"] == 1


def test_writes_that_answer_stored_are_searchable_without_waiting_for_the_periodic_refresh(engram, make_client,
                                                                                           es_admin, settings):
    """A write the API answers for is visible to the next search when it answers, by a refresh of
    its own or at the subject's next read, never by waiting out the refresh interval: under a 60 s
    interval each of these would take a minute with ``wait_for``."""
    settings.ENGRAM_REFRESH_PENDING_SECONDS = 120
    admin = make_client()
    engram.turn("ines", "hello")
    playbook = engram.write_playbook("ines", "router offline", "unplug it; wait 10 s; plug it in")
    fact = engram.write_fact("ines", "Ines has a Fritzbox router.")
    with slow_refresh(es_admin):
        started = time.monotonic()
        entry = admin.create_catalog_entry("Fritzbox reset", "Hold the reset button for 10 seconds")
        assert _searchable(es_admin, MemoryType.CATALOG, entry["id"])  # tenant-wide: refreshed by its write
        engram.record_outcome("ines", playbook["id"], True)
        # Deferred: the end-user's next read refreshes first and sees the new count.
        assert engram.recall("ines", "router offline", types=["procedural"])[0]["success_count"] == 1
        engram.forget("ines", fact["id"], reason="user_request")
        assert not _searchable(es_admin, MemoryType.SEMANTIC, fact["id"])  # gone from search when it answers
        assert time.monotonic() - started < 30


def test_replayed_writes_are_searchable_when_the_replay_ends(engram, es_down, es_admin, monkeypatch):
    """Replayed writes are applied without a refresh each (a backlog would otherwise cut the index
    into a segment per write) and made searchable once per end-user at the end of its entries."""
    from elasticsearch._sync.client._base import BaseClient

    engram.turn("ruth", "before")
    es_down.start()
    turn = engram.turn("ruth", "accepted while Elasticsearch was down")
    fact = engram.write_fact("ruth", "Ruth keeps bees.")
    es_down.restore()
    # The refreshes Engram asks for (the index's own refresh count also takes a periodic refresh
    # that was already running when the interval changed).
    asked, real = [], BaseClient.perform_request

    def perform_request(self, method, path, **kwargs):
        if path.endswith("/_refresh") or (kwargs.get("params") or {}).get("refresh") in (True, "true", "wait_for"):
            asked.append(path)
        return real(self, method, path, **kwargs)

    with slow_refresh(es_admin):
        monkeypatch.setattr(BaseClient, "perform_request", perform_request)
        started = time.monotonic()
        assert outbox_replay().applied == 2
        assert time.monotonic() - started < 30
        monkeypatch.undo()
        assert len(asked) == 1 and asked[0].endswith("/_refresh")  # one for the end-user's two writes
        assert _searchable(es_admin, MemoryType.EPISODIC, turn["id"])
        assert _searchable(es_admin, MemoryType.SEMANTIC, fact["id"])


def test_erase_leaves_no_personal_data_but_a_tombstone(api, engram, es_admin):
    who = "pia.personal@example.com"
    created = api.post("/api/v1/subjects", {"external_id": who, "display_name": "Pia Personal"}, format="json",
                       HTTP_IDEMPOTENCY_KEY="create-pia")
    assert created.status_code == 201
    with slow_refresh(es_admin):
        engram.turn(who, "I was born in Lisbon")  # stored, not yet searchable: erase must find it anyway
        user_id = Subject.objects.get(external_id=who).user_id
        engram.erase_subject(who)
    assert _everywhere(es_admin, who, "Pia Personal", "born in Lisbon") == []
    assert Subject.objects.get(user_id=user_id).external_id == f"erased:{user_id}"
    assert AuditEvent.objects.filter(action="subject.erase", subject_ref=str(user_id)).exists()


def test_a_turn_does_not_wait_for_a_refresh_yet_the_next_recall_sees_it(engram, es_admin, settings):
    from django.core.cache import cache

    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    engram.turn("vic", "first words")
    cache.clear()  # no earlier turn pending: the next turn's own recall has nothing to refresh
    with slow_refresh(es_admin) as index:
        turn = engram.turn("vic", "my bicycle is a green Gazelle")
        # Stored (a realtime get finds it) but not yet searchable: the turn did not wait for a refresh.
        assert es_admin.get(index=index, id=turn["id"])["found"]
        assert es_admin.count(index=index, query={"ids": {"values": [turn["id"]]}})["count"] == 0
        # The next recall of this end-user refreshes first and finds it (read-your-writes).
        assert turn["id"] in [m["id"] for m in engram.recall("vic", "green Gazelle bicycle")]
        # And the next turn's recall sees the previous turn too.
        later = engram.turn("vic", "it has a broken bell")
        again = engram.turn("vic", "what colour is my bicycle")
        assert later["id"] in [m["id"] for m in again["recall"]] or turn["id"] in [m["id"] for m in again["recall"]]


def test_a_pending_turn_that_a_periodic_refresh_made_searchable_forces_no_refresh(engram, es_admin, settings):
    from django.core.cache import cache

    from memory_app.freshness import refresh_ensure

    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    with slow_refresh(es_admin) as index:
        engram.turn("zoe", "my cat is called Miso")
        subject = Subject.objects.get(external_id="zoe")
        refreshes = es_admin.indices.stats(index=index, metric="refresh")["_all"]["primaries"]["refresh"]
        # Not searchable yet: the check refreshes.
        assert refresh_ensure(subject=subject) is True
        turn = engram.turn("zoe", "Miso is three years old")
        es_admin.indices.refresh(index=index)  # what the periodic refresh does
        after = es_admin.indices.stats(index=index, metric="refresh")["_all"]["primaries"]["refresh"]
        # Searchable already: no refresh is forced, the mark is cleared, and recall finds the turn.
        assert refresh_ensure(subject=subject) is False
        assert cache.get(f"engram:refresh-pending:{subject.pk}:episodic") is None
        now = es_admin.indices.stats(index=index, metric="refresh")["_all"]["primaries"]["refresh"]
        assert now["external_total"] == after["external_total"] > refreshes["external_total"]
        assert turn["id"] in [m["id"] for m in engram.recall("zoe", "how old is Miso")]


def _counted_refreshes(monkeypatch, freshness, *, before=None, after=None):
    """Count the forced refreshes and the searchability checks of ``freshness``; ``before`` and
    ``after`` run around each real refresh (to keep it in flight)."""
    refreshes, checks = [], []
    real_refresh, real_searchable = freshness._refresh_now, freshness._searchable

    def refresh(writer, indices):
        (before or (lambda: None))()
        real_refresh(writer, indices)
        refreshes.append(indices)
        (after or (lambda: None))()

    def searchable(writer, *, index, memory_id):
        checks.append(memory_id)
        return real_searchable(writer, index=index, memory_id=memory_id)

    monkeypatch.setattr(freshness, "_refresh_now", refresh)
    monkeypatch.setattr(freshness, "_searchable", searchable)
    return refreshes, checks


def _watched_flights(monkeypatch, freshness):
    """An event set once a read waits for a refresh in flight (each flight's ``done`` reports it)."""
    import threading
    from types import SimpleNamespace

    following = threading.Event()

    class Done(threading.Event):
        def wait(self, timeout=None):
            following.set()
            return super().wait(timeout)

    monkeypatch.setattr(freshness, "_Flight", lambda: SimpleNamespace(done=Done()))
    return following


def _until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_a_read_shares_the_forced_refresh_in_flight_when_it_covers_its_write(engram, es_admin, monkeypatch):
    import threading

    from memory_app import freshness
    from tenants.services.clients import writer_es_client

    with slow_refresh(es_admin) as index:
        first = engram.turn("ann", "my kayak is red")["id"]
        second = engram.turn("ben", "my canoe is blue")["id"]  # written before the refresh below begins
        following = _watched_flights(monkeypatch, freshness)
        # The leader's refresh begins only once the second read waits for it.
        refreshes, checks = _counted_refreshes(monkeypatch, freshness, before=lambda: following.wait(5))
        writer = writer_es_client()
        leader = threading.Thread(target=freshness._refresh_shared, args=(writer, {index: first}))
        leader.start()
        _until(lambda: freshness._flights)  # the leader's refresh is in flight
        freshness._refresh_shared(writer, {index: second})
        leader.join()
        # One refresh made both searchable; the second read waited for it and checked its turn.
        assert refreshes == [index]
        assert checks == [second]
        assert es_admin.count(index=index, query={"ids": {"values": [first, second]}})["count"] == 2
    assert freshness._flights == {}


def test_a_read_whose_write_came_after_the_refresh_in_flight_began_refreshes_again(engram, es_admin, monkeypatch):
    import threading

    from memory_app import freshness
    from tenants.services.clients import writer_es_client

    with slow_refresh(es_admin) as index:
        first = engram.turn("ann", "my kayak is red")["id"]
        landed = threading.Event()
        following = _watched_flights(monkeypatch, freshness)
        refreshes, checks = _counted_refreshes(monkeypatch, freshness,
                                               after=lambda: landed.wait(5) if len(refreshes) == 1 else None)
        writer = writer_es_client()
        leader = threading.Thread(target=freshness._refresh_shared, args=(writer, {index: first}))
        leader.start()
        _until(lambda: refreshes)  # the leader's refresh has run and it is still in flight
        later = engram.turn("ben", "my canoe is blue")["id"]  # not covered by that refresh
        follower = threading.Thread(target=freshness._refresh_shared, args=(writer, {index: later}))
        follower.start()
        assert following.wait(5)  # the follower waits for the flight
        landed.set()
        leader.join()
        follower.join()
        # The follower found its turn still unsearchable after the shared refresh and refreshed itself.
        assert refreshes == [index, index]
        assert checks == [later]
        assert es_admin.count(index=index, query={"ids": {"values": [first, later]}})["count"] == 2
    assert freshness._flights == {}


@contextmanager
def _another_process_refreshing(monkeypatch, freshness, cache, index):
    """Hold the shared cache's flight of ``index`` as another server process's refresh would; an
    event set once a read waits for it. Yields (that process's flight key, the event); the key is
    gone afterwards, whatever the test did."""
    import threading

    monkeypatch.setattr(freshness, "cache", cache)
    key = freshness._flight_key(index)
    cache.redis_client().set(key, b"another-process", px=60_000)
    waiting, real = threading.Event(), freshness._other_flight_wait

    def wait(redis, key, flight, *, deadline):
        waiting.set()
        real(redis, key, flight, deadline=deadline)

    monkeypatch.setattr(freshness, "_other_flight_wait", wait)
    try:
        yield key, waiting
    finally:
        cache.redis_client().delete(key)


@pytest.mark.parametrize("covered", [True, False], ids=["it began after the turn", "it began before the turn"])
def test_a_read_waits_for_a_forced_refresh_in_flight_in_another_process(engram, es_admin, monkeypatch,
                                                                        shared_redis_cache, covered):
    import threading

    from memory_app import freshness
    from tenants.services.clients import writer_es_client

    with slow_refresh(es_admin) as index:
        turn = engram.turn("ann", "my kayak is red")["id"]
        with _another_process_refreshing(monkeypatch, freshness, shared_redis_cache, index) as (key, waiting):
            refreshes, checks = _counted_refreshes(monkeypatch, freshness)
            read = threading.Thread(target=freshness._refresh_shared, args=(writer_es_client(), {index: turn}))
            read.start()
            assert waiting.wait(5)  # the read waits for the other process's refresh instead of sending one
            if covered:
                es_admin.indices.refresh(index=index)  # that refresh, begun after the turn was written
            shared_redis_cache.redis_client().delete(key)  # and done
            read.join(5)
            assert not read.is_alive()
            assert checks == [turn]  # it asked again whether its turn was searchable
            # and sent a refresh of its own only when the other one began before the turn
            assert refreshes == ([] if covered else [index])
            assert es_admin.count(index=index, query={"ids": {"values": [turn]}})["count"] == 1
            assert shared_redis_cache.redis_client().get(key) is None  # and released its flight
    assert freshness._flights == {}


@pytest.mark.parametrize("shared", [False, True], ids=["process cache", "shared Redis"])
def test_a_write_landing_while_a_read_refreshes_keeps_its_mark_for_the_next_read(engram, es_admin, monkeypatch,
                                                                                   settings, shared, request):
    import uuid

    from memory_app import freshness
    from tenants.services.clients import writer_es_client

    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    if shared:
        monkeypatch.setattr(freshness, "cache", request.getfixturevalue("shared_redis_cache"))
    who = f"lea-{uuid.uuid4().hex[:8]}"
    with slow_refresh(es_admin) as index:
        engram.turn(who, "my kayak is red")
        subject = Subject.objects.get(external_id=who)
        key = freshness._key(subject, MemoryType.EPISODIC)
        landed = new_memory_id()
        real = freshness._refresh_now

        def refresh_while_a_write_lands(writer, indices):
            real(writer, indices)
            # Another request of the same end-user stores a turn after this refresh began, and
            # marks it once stored.
            writer_es_client().index(index=index, id=landed, document={
                "tenant_id": subject.tenant.slug, "user_id": str(subject.user_id), "memory_type": "episodic",
                "text": "my canoe is blue", "created_at": timezone.now().isoformat()})
            freshness.refresh_defer(subject=subject, memory_type=MemoryType.EPISODIC, memory_id=landed, seconds=60)

        monkeypatch.setattr(freshness, "_refresh_now", refresh_while_a_write_lands)
        assert freshness.refresh_ensure(subject=subject) is True
        # The read cleared its own mark, not the one set meanwhile: the next read makes that write visible.
        assert freshness._pending_id(freshness._marks_get([key])[key]) == landed
        monkeypatch.setattr(freshness, "_refresh_now", real)
        assert freshness.refresh_ensure(subject=subject) is True
        assert es_admin.count(index=index, query={"ids": {"values": [landed]}})["count"] == 1
        assert freshness._marks_get([key]) == {}


def test_a_read_that_refreshes_while_a_turn_is_being_written_cannot_hide_that_turn(engram, es_admin, monkeypatch,
                                                                                    settings):
    """The inspector polls every 2 s: a read of the end-user may refresh after a turn's mark is set
    but before its document lands. That refresh must not clear the mark, or the next read misses
    the turn until the periodic refresh."""
    from memory_app.freshness import refresh_ensure

    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    with slow_refresh(es_admin):
        engram.turn("nia", "my kayak is red")
        subject = Subject.objects.get(external_id="nia")
        real = episode_services.document_create

        def a_read_first(**kwargs):
            refresh_ensure(subject=subject)  # the inspector's poll, just before the turn's document lands
            return real(**kwargs)

        monkeypatch.setattr(episode_services, "document_create", a_read_first)
        turn = engram.turn("nia", "my canoe is blue")
        monkeypatch.undo()
        assert turn["id"] in [m["id"] for m in engram.recall("nia", "what colour is the canoe")]


def test_back_to_back_turns_of_a_session_derive_context_from_unrefreshed_predecessors(engram, es_admin, settings):
    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    with slow_refresh(es_admin) as index:
        first = engram.turn("wes", "my sister Ada lives in Porto", session_id="s1")
        second = engram.turn("wes", "she teaches chemistry there", session_id="s1")
        stored = es_admin.get(index=index, id=second["id"])["_source"]
    assert stored["context_ids"] == [first["id"]]
    assert "Ada lives in Porto" in stored["derived_context"]


def test_export_includes_the_last_turn_before_a_refresh(engram, es_admin, settings):
    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    with slow_refresh(es_admin):
        turn = engram.turn("xan", "my passport expires in May")
        exported = engram.export("xan")
    assert turn["id"] in [m["id"] for m in exported["memories"]["episodic"]]


def test_a_turn_recalls_while_it_writes(engram, monkeypatch):
    import threading

    from memory_app import turns

    engram.turn("yan", "I keep bees on the roof")  # a known end-user from here on
    recalling = threading.Event()
    real_recall, real_write = turns.memory_recall, episode_services.episode_store

    def recall(**kwargs):
        recalling.set()
        return real_recall(**kwargs)

    def write(**kwargs):
        # Were the recall to follow the write, it could not have started yet: this would time out.
        if not recalling.wait(timeout=20):
            raise AssertionError("the turn's recall did not start while the turn was being written")
        return real_write(**kwargs)

    monkeypatch.setattr(turns, "memory_recall", recall)
    monkeypatch.setattr(episode_services, "episode_store", write)
    turn = engram.turn("yan", "how are my bees doing")
    assert any("bees on the roof" in m["text"] for m in turn["recall"])
    assert turn["id"] not in [m["id"] for m in turn["recall"]]


class _SettingsWitness:
    """Stands for ``django.conf.settings`` in a module: each read is recorded as (module, function)
    of the reader; a read inside an options constructor (``from_settings``) is its caller's, one
    in a comprehension its function's."""

    def __init__(self, real, reads: set[tuple[str, str]]):
        self._real, self._reads = real, reads

    def __getattr__(self, name):
        frame = sys._getframe(1)
        while frame.f_code.co_name in ("from_settings", "<dictcomp>", "<listcomp>", "<setcomp>", "<genexpr>"):
            frame = frame.f_back
        self._reads.add((Path(frame.f_code.co_filename).resolve().relative_to(ROOT).as_posix(), frame.f_code.co_name))
        return getattr(self._real, name)


# Read by the turn's own entries: recall's (it reads its options, as a request's entry
# does) and the key machinery's (the client factory reads the key lifetimes on every read and write).
_TURN_ENTRIES = {("memory_app/recall/__init__.py", "memory_recall_with_reading"),
                 ("tenants/services/clients.py", "subject_es_client"),
                 ("tenants/services/clients.py", "writer_es_client")}


@pytest.mark.parametrize("known", [False, True], ids=["new end-user", "known end-user"])
def test_below_the_edge_a_turn_reads_no_setting_and_no_end_user(memory, tenant, monkeypatch, known):
    """The edge checks the turn, reads its options and reads or creates its end-user
    (``turn_command``); the turn service and everything below it (the outbox, dispatch, the
    services) trust what it hands them: no setting is read there but where the settings scan
    allows it, and no end-user is read or created again."""
    def checked(text: str):
        return turn_command(tenant=tenant, external_id="wes", text=text, max_query_chars=2000,
                            limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
                            lifetimes=KeyLifetimes.from_settings(), session_id="s1")

    if known:
        turn_create(tenant=tenant, turn=checked("I keep bees on the roof"))
    turn = checked("how are my bees doing?")  # the edge: a new end-user is created here
    assert turn.write.subject == Subject.objects.get(tenant=tenant, external_id="wes")

    reads: set[tuple[str, str]] = set()
    end_users: list[str] = []
    witness = _SettingsWitness(real_settings, reads)
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in BELOW_THE_EDGE or not getattr(module, "__file__", None):
            continue
        if not Path(module.__file__).resolve().relative_to(ROOT).as_posix().startswith(EDGE):
            if getattr(module, "settings", None) is real_settings:
                monkeypatch.setattr(module, "settings", witness)
        for reader in ("subject_get_or_create", "subject_find", "subject_get"):
            real = getattr(subjects if reader == "subject_get_or_create" else tenant_selectors, reader)
            if getattr(module, reader, None) is real:
                monkeypatch.setattr(module, reader, lambda _reader=reader, _real=real, **kwargs:
                                    end_users.append(_reader) or _real(**kwargs))

    result = turn_create(tenant=tenant, turn=turn)
    assert not result.submitted.queued and result.recall_error is None
    assert end_users == []
    assert sorted(reads - set(ALLOWED) - _TURN_ENTRIES) == []
    assert reads, "the witness saw no read at all: it is not standing where the settings are read"


def test_a_write_is_applied_only_for_the_tenant_it_was_checked_for(memory, tenant):
    write = write_command(tenant=tenant, external_id="uma", operation="episode", payload={"text": "uma's line"},
                          limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
                          lifetimes=KeyLifetimes.from_settings())
    other = Tenant.objects.create(slug="other-one", name="Other")
    with pytest.raises(ValueError):
        write_submit(tenant=other, write=write)
    assert not OutboxEntry.objects.filter(external_id="uma").exists()


def test_one_turn_cleans_its_end_users_id_once_at_the_edge(engram, monkeypatch):
    """Validate once, at the edge: on one POST turn the end-user's id is cleaned once (the view
    reads the path), whether the turn creates the end-user or finds them; idempotency, the turn
    command, the outbox and the end-user's creation trust it. Every module holding the function
    gets the counting one, so a call from anywhere is counted."""
    import sys

    from engram_core import validation

    real, calls = validation.clean_external_id, []

    def counting(value, **kwargs):
        calls.append(value)
        return real(value, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "clean_external_id", None) is real:
            monkeypatch.setattr(module, "clean_external_id", counting)
    engram.turn("tia", "I keep bees on the roof")  # a new end-user: the turn's acceptance creates them
    assert calls == ["tia"]
    engram.turn(" tia", "how are my bees doing?", idempotency_key="k-tia")  # known; a key claimed
    assert calls == ["tia", " tia"]


def test_one_turn_cleans_its_episode_once_at_the_edge(engram, monkeypatch):
    """Validate once, at the edge: a turn's episode is cleaned into ``EpisodeFields`` once (the
    turn command), and its text checked once as an episode's; the outbox, dispatch and the
    episode service store the cleaned fields as they are."""
    import sys

    from memory_app import validation

    cleaned, texts = [], []
    real_clean, real_text = validation.EpisodeFields.clean.__func__, validation.clean_text

    def counting_clean(cls, p, **kwargs):
        cleaned.append(p.get("text"))
        return real_clean(cls, p, **kwargs)

    def counting_text(value, **kwargs):
        texts.append((kwargs.get("field", "text"), value))
        return real_text(value, **kwargs)

    monkeypatch.setattr(validation.EpisodeFields, "clean", classmethod(counting_clean))
    for module in list(sys.modules.values()):
        if getattr(module, "clean_text", None) is real_text:
            monkeypatch.setattr(module, "clean_text", counting_text)
    engram.turn("ivy", "I keep bees on the roof")  # a new end-user
    engram.turn("ivy", "how are my bees doing?", session_id="s1")  # known
    assert cleaned == ["I keep bees on the roof", "how are my bees doing?"]
    # (the recall on the turn cleans its own query: field "query")
    assert [value for field, value in texts if field == "text"] == cleaned


def test_a_bad_turn_is_refused_before_its_recall_starts(engram, monkeypatch, settings):
    from memory_app import turns

    engram.turn("zoe", "I keep bees")
    recalls = []
    real = turns.memory_recall
    monkeypatch.setattr(turns, "memory_recall", lambda **kwargs: recalls.append(kwargs) or real(**kwargs))
    with pytest.raises(EngramAPIError) as err:
        engram.turn("zoe", "bees " * settings.ENGRAM_MAX_TEXT_CHARS)  # passes the serializer, not the service
    assert err.value.status == 400 and err.value.code == "text_too_long"
    assert recalls == []  # no recall ran (and recorded use counts) for a turn that was refused


def test_what_rest_and_turns_hand_to_the_agent_counts_as_used_and_a_preview_does_not(engram):
    from memory_app.recall import memory_recall
    from memory_app.usage import usage_flush

    fact = engram.write_fact("una", "Una is allergic to peanuts")
    engram.recall("una", "peanut allergy")
    engram.turn("una", "do I have a peanut allergy?")
    subject = Subject.objects.get(external_id="una")
    memory_recall(subject=subject, query="peanut allergy")  # a read alone (the inspector's preview)
    usage_flush()
    assert engram.get_memory("una", fact["id"])["use_count"] == 2


def test_api_fact_and_playbook_writes_do_not_wait_for_a_refresh_yet_the_next_read_sees_them(engram, es_admin,
                                                                                             settings):
    from memory_app import selectors

    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    indices = [alias_name(t) for t in (MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL)]
    for index in indices:
        es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": "60s"})
    try:
        engram.turn("yara", "hello")  # the end-user exists, with a pending turn
        started = time.monotonic()
        old = engram.write_fact("yara", "Yara lives in Porto.")
        playbook = engram.write_playbook("yara", "printer jams", "open tray B; remove the sheet")
        # Under a 60 s refresh interval a write waiting for its refresh would take up to a minute.
        assert time.monotonic() - started < 20
        searchable = es_admin.count(index=f"{alias_name(MemoryType.SEMANTIC)},{alias_name(MemoryType.PROCEDURAL)}",
                                    query={"ids": {"values": [old["id"], playbook["id"]]}})["count"]
        assert searchable == 0  # stored, not yet searchable: nothing waited for them
        turn = engram.turn("yara", "my printer jammed again")
        # One mark per type: the fact's mark did not replace the turn's, nor the playbook's.
        ids = {m["id"] for m in engram.recall("yara", "printer jammed Porto", k=20)}
        assert {old["id"], playbook["id"], turn["memory"]["id"]} <= ids
        # A supersession: the old fact leaves recall and the listing at the next read.
        new = engram.write_fact("yara", "Yara lives in Lisbon now.", supersedes=[old["id"]])
        facts = engram.recall("yara", "where does Yara live", types=["semantic"], k=5)
        assert [f["id"] for f in facts] == [new["id"]]
        subject = Subject.objects.get(external_id="yara")
        assert [f["id"] for f in selectors.fact_list(subject=subject)] == [new["id"]]
    finally:
        for index in indices:
            es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": settings.ES_REFRESH_INTERVAL})


@contextmanager
def _own_redis():
    """A Redis server of this test's own (stopping the one scripts/test shares would stop the
    others' broker): yields its URL and a function that stops it."""
    import shutil
    import socket
    import subprocess
    import tempfile

    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (scripts/test installs it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="engram-redis-")
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "redis did not start"
            time.sleep(0.05)

        def stop():
            server.terminate()
            server.wait(10)

        yield f"redis://127.0.0.1:{port}/0", stop
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def test_turns_and_recalls_answer_with_the_cache_down_mid_stream(engram, api, es_admin, settings, client,
                                                                 monitor_headers):
    """The shared cache (ENGRAM_CACHE_URL) holds the refresh marks and the rate limits' logs. When
    it becomes unreachable, turns and recalls still answer, each read still sees the end-user's
    last write (refresh on read), the rate limit holds in each process, and /healthz says the cache
    is degraded without taking the server out of rotation."""
    from django.core.cache import caches

    settings.ENGRAM_REFRESH_PENDING_SECONDS = 60
    with _own_redis() as (url, stop):
        settings.CACHES = {"default": {"BACKEND": "config.cache.SharedRedisCache", "LOCATION": url}}
        caches["default"].set("engram:probe", "up")  # the cache is that Redis, and reachable
        with slow_refresh(es_admin):
            for n in range(8):
                if n == 3:
                    stop()  # mid-stream
                turn = engram.turn("mia", f"my bike number {n} is green")
                assert turn["status"] == "applied"
                # Read-your-writes, with the marks or without them.
                assert turn["id"] in [m["id"] for m in engram.recall("mia", f"bike number {n}")], n
        health = client.get("/healthz", headers=monitor_headers)
        assert health.status_code == 200, health.json()
        body = health.json()
        assert body["status"] == "degraded" and body["cache"] == {"backend": "redis", "reachable": False}
        assert [d for d in body["degraded"] if d.startswith("cache unreachable")]
        assert client.get("/healthz", headers=monitor_headers).json()["cache"]["reachable"] is False
        assert client.get("/healthz").json() == {"status": "ok"}  # anyone else: serving
        # The rate limit still holds, counted in this process.
        settings.ENGRAM_API_RATES = {**settings.ENGRAM_API_RATES, "agent": "5/minute"}
        statuses = [api.post("/api/v1/subjects/mia/recall", {"query": "bike"}, format="json").status_code
                    for _ in range(7)]
        assert statuses == [200] * 5 + [429] * 2


def test_erase_finds_a_non_ascii_external_id_in_stored_responses_and_failed_writes(api, tenant):
    """Review finding: the erase looked for the end-user in ``json.dumps`` output, where "josé" is
    "jos\\u00e9", and left failed outbox entries naming them in their error."""
    OutboxEntry.objects.create(tenant=tenant, external_id="josé", operation="forget", memory_id="some-memory-01",
                               payload={"reason": "user_request"}, actor="t", reason="backlog")
    assert outbox_replay().failed == 1  # the end-user did not exist yet: "unknown end-user", naming them
    failed = OutboxEntry.objects.get(external_id="josé")
    assert failed.last_error["details"] == {"external_id": "josé"}
    for who, key in (("josé", "create-jose"), ("jos", "create-jos")):
        assert api.post("/api/v1/subjects", {"external_id": who}, format="json",
                        HTTP_IDEMPOTENCY_KEY=key).status_code == 201
    # Django's test client, not the typed one in-process: httpx's WSGI transport hands Django a
    # non-ASCII path undecoded (PEP 3333 wants it as latin-1), which Django reads as another id.
    assert api.post("/api/v1/subjects/jos%C3%A9/turns", {"text": "Hola"}, format="json").status_code == 201
    assert api.delete("/api/v1/subjects/jos%C3%A9").json()["status"] == "applied"
    assert not IdempotencyRecord.objects.filter(key="create-jose").exists()
    assert IdempotencyRecord.objects.filter(key="create-jos").exists()  # another end-user's: kept
    failed.refresh_from_db()
    assert failed.external_id.startswith("erased:") and "jos" not in json.dumps(failed.last_error, ensure_ascii=False)
    assert failed.status == "failed" and failed.last_error["code"] == "not_found"


def test_an_end_user_cannot_take_the_name_an_erase_needs(api, engram):
    """Review finding: a writer of the tenant could create ``erased:<another user's id>``, and that
    user's erase then failed for good (its tombstone's name was taken)."""
    engram.turn("bob", "hello")
    bob = Subject.objects.get(external_id="bob")
    for name in (f"erased:{bob.user_id}", f"ERASED:{bob.user_id}", "erased"):
        taken = api.post(f"/api/v1/subjects/{name}/turns", {"text": "x"}, format="json")
        assert taken.status_code == 400 and taken.json()["error"]["code"] == "invalid_external_id", name
        created = api.post("/api/v1/subjects", {"external_id": name}, format="json")
        assert created.status_code == 400, name
    assert engram.erase_subject("bob")["status"] == "applied"
    assert Subject.objects.get(user_id=bob.user_id).external_id == f"erased:{bob.user_id}"
