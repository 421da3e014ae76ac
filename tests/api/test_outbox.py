"""Writes during an Elasticsearch outage: accepted (202) into the outbox, replayed in order, never twice.

The outage here is real from the application's point of view (Elasticsearch's URL points at a
closed port); tests/api/test_live.py stops the node itself in the middle of a run of writes.
"""

from __future__ import annotations

import pytest

from engram_client import EngramAPIError
from engram_core.es.schema import MemoryType
from memory_app.health import health_report
from memory_app.models import OutboxEntry
from memory_app.outbox import lease, outbox_replay
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.imports import episodes_assign_ids, episodes_import
from tenants.models import AuditEvent, Subject


def _texts(docs, memory_type, external_id):
    subject = Subject.objects.get(external_id=external_id)
    return [d["text"] for d in docs(memory_type, user_id=subject.user_id)]


def test_writes_during_an_outage_are_accepted_and_replayed_in_order(engram, es_down, docs, settings):
    before = engram.turn("alice", "turn 0")
    playbook = engram.write_playbook("alice", "router drops", "reboot")
    es_down.start()

    accepted = [engram.turn("alice", f"turn {n}") for n in range(1, 4)]
    fact = engram.write_fact("alice", "Alice has a Fritzbox")
    outcome = engram.record_outcome("alice", playbook["id"], True)
    forgotten = engram.forget("alice", before["id"], "user_request")
    newcomer = engram.turn("bob", "hello from a new end-user")
    for result in (*accepted, fact, outcome, forgotten, newcomer):
        assert result["status"] == "queued" and result["operation"]["status"] == "pending"
    # The first write of each end-user met the outage; the later ones queue behind it.
    assert [r["operation"]["reason"] for r in (*accepted, fact, newcomer)] == ["outage", *["backlog"] * 3, "outage"]
    assert all(t["recall"] is None and t["recall_error"]["code"] == "elasticsearch_unreachable" for t in accepted)
    assert fact["memory"] is None and len(fact["id"]) == 32

    with pytest.raises(EngramAPIError) as err:
        engram.recall("alice", "turn")
    assert err.value.status == 503 and err.value.retry_after == settings.ENGRAM_API_RETRY_AFTER_SECONDS
    assert outbox_replay().stopped_by_outage  # still down: nothing applied, nothing lost
    assert OutboxEntry.objects.filter(status="pending").count() == 7

    _, report = health_report(outbox_stale_seconds=settings.ENGRAM_OUTBOX_STALE_SECONDS)
    assert report["outbox"]["pending"] == 7 and report["outbox"]["pending_subjects"] == 2

    es_down.restore()
    result = outbox_replay()
    assert (result.applied, result.failed, result.pending) == (7, 0, 0)

    assert _texts(docs, MemoryType.EPISODIC, "alice") == ["turn 1", "turn 2", "turn 3"]  # turn 0 forgotten
    assert _texts(docs, MemoryType.EPISODIC, "bob") == ["hello from a new end-user"]
    assert engram.get_memory("alice", fact["id"])["text"] == "Alice has a Fritzbox"
    assert engram.get_memory("alice", accepted[0]["id"])["text"] == "turn 1"  # the id promised in the 202
    assert engram.get_memory("alice", playbook["id"])["success_count"] == 1
    assert AuditEvent.objects.filter(action="memory.forget", target_id=before["id"]).count() == 1
    operation = engram.operation(fact["operation"]["id"])
    assert operation["status"] == "done" and operation["result"] == {"id": fact["id"]}
    assert OutboxEntry.objects.exclude(payload={}).count() == 0  # no content kept once applied
    assert outbox_replay().applied == 0  # idempotent


def test_new_writes_queue_behind_pending_ones(api, es_down, docs):
    es_down.start()
    queued = api.post("/api/v1/subjects/carol/turns", {"text": "first"}, format="json")
    assert queued.status_code == 202 and queued["Location"].startswith("/api/v1/operations/")
    es_down.restore()
    # Elasticsearch is back, but "first" is not applied yet: "second" must wait behind it.
    second = api.post("/api/v1/subjects/carol/turns", {"text": "second"}, format="json")
    assert second.status_code == 202 and second.json()["operation"]["reason"] == "backlog"
    assert second.json()["recall"] == []  # nothing of the end-user's is applied yet: nothing to recall
    other = api.post("/api/v1/subjects/dave/turns", {"text": "unaffected"}, format="json")
    assert other.status_code == 201  # other end-users are not held up
    outbox_replay()
    assert _texts(docs, MemoryType.EPISODIC, "carol") == ["first", "second"]
    assert api.post("/api/v1/subjects/carol/turns", {"text": "third"}, format="json").status_code == 201


def test_a_replayed_create_that_already_landed_is_done_not_duplicated(memory, tenant, docs):
    subject = Subject.objects.create(tenant=tenant, external_id="erin")
    episode_write(subject=subject, text="landed before the outage cut the answer", memory_id="ep-landed-01")
    OutboxEntry.objects.create(tenant=tenant, external_id="erin", operation="episode", memory_id="ep-landed-01",
                               payload={"text": "landed before the outage cut the answer"}, actor="t",
                               reason="outage", after_failure=True)
    assert outbox_replay().applied == 1
    assert [d["id"] for d in docs(MemoryType.EPISODIC, user_id=subject.user_id)] == ["ep-landed-01"]


def test_a_replayed_supersede_that_half_landed_is_completed(memory, tenant, docs):
    subject = Subject.objects.create(tenant=tenant, external_id="fay")
    old = fact_write(subject=subject, text="Fay lives in Kiel")
    # The new fact landed, but the outage came before the old one was marked superseded.
    fact_write(subject=subject, text="Fay lives in Bonn", memory_id="fact-new-0001")
    OutboxEntry.objects.create(tenant=tenant, external_id="fay", operation="fact", memory_id="fact-new-0001",
                               payload={"text": "Fay lives in Bonn", "supersedes": [old["id"]]}, actor="t",
                               reason="outage", after_failure=True)
    assert outbox_replay().applied == 1
    facts = {d["id"]: d for d in docs(MemoryType.SEMANTIC, user_id=subject.user_id)}
    assert facts[old["id"]]["superseded_by"] == ["fact-new-0001"] and len(facts) == 2


def test_a_replayed_import_skips_what_is_stored(memory, tenant, docs):
    subject = Subject.objects.create(tenant=tenant, external_id="gus")
    episodes = [{"id": f"import-gus-{n}", "text": f"old {n}", "occurred_at": f"2020-01-0{n + 1}T00:00:00Z"}
                for n in range(4)]
    episodes = episodes_assign_ids(tenant_id=tenant.pk, external_id="gus", episodes=episodes, prefix="x")
    episodes_import(subject=subject, episodes=episodes[:2])
    OutboxEntry.objects.create(tenant=tenant, external_id="gus", operation="import", payload={"episodes": episodes},
                               actor="t", reason="outage", after_failure=True)
    assert outbox_replay().applied == 1
    stored = docs(MemoryType.EPISODIC, user_id=subject.user_id)
    assert [d["id"] for d in stored] == [e["memory_id"] for e in episodes]
    assert [d["client_id"] for d in stored] == [f"import-gus-{n}" for n in range(4)]


def test_an_invalid_queued_write_fails_alone_and_is_reported(engram, es_down, docs):
    engram.turn("hal", "hello")
    es_down.start()
    bad = engram.write_fact("hal", "supersedes nothing real", supersedes=["no-such-fact"])
    good = engram.turn("hal", "still applied")
    with pytest.raises(EngramAPIError) as err:
        engram.turn("hal", "")  # invalid input is refused at once, outage or not
    assert err.value.status == 400
    es_down.restore()
    assert (outbox_replay().applied, OutboxEntry.objects.filter(status="failed").count()) == (1, 1)
    operation = engram.operation(bad["operation"]["id"])
    assert operation["status"] == "failed" and operation["error"]["code"] == "not_found"
    assert _texts(docs, MemoryType.EPISODIC, "hal") == ["hello", "still applied"]
    assert engram.get_memory("hal", good["id"])["text"] == "still applied"


def test_forget_and_erase_queue_in_order(engram, es_down, docs):
    turn = engram.turn("ivy", "to be forgotten")
    es_down.start()
    later = engram.turn("ivy", "written before the erase")
    erase = engram.erase_subject("ivy")
    after = engram.turn("ivy", "written after the erase")
    assert erase["status"] == "queued" and erase["documents_deleted"] is None
    es_down.restore()
    outbox_replay()
    assert _texts(docs, MemoryType.EPISODIC, "ivy") == ["written after the erase"]
    # The turn queued before the erase is cancelled by it (the erase would delete it): one document deleted.
    assert engram.operation(erase["operation"]["id"])["result"] == {"documents_deleted": 1}
    assert engram.operation(later["operation"]["id"])["status"] == "cancelled"
    assert turn["id"] != later["id"] != after["id"]


def test_large_imports_run_in_the_background(engram, settings, docs):
    settings.ENGRAM_API_IMPORT_SYNC_MAX = 3
    episodes = [{"text": f"e{n}", "occurred_at": f"2021-01-0{n + 1}T00:00:00Z"} for n in range(5)]
    result = engram.import_episodes("jo", episodes)
    assert result["status"] == "queued" and result["operation"]["reason"] == "background"
    outbox_replay()
    assert _texts(docs, MemoryType.EPISODIC, "jo") == [f"e{n}" for n in range(5)]
    assert engram.operation(result["operation"]["id"])["result"] == {"ids": result["ids"]}


def test_one_replayer_at_a_time(memory, tenant):
    OutboxEntry.objects.create(tenant=tenant, external_id="kim", operation="episode", memory_id="kim-turn-0001",
                               payload={"text": "x"}, actor="t", reason="outage")
    holder = lease.lease_acquire(seconds=60)
    try:
        assert outbox_replay().skipped
    finally:
        lease.lease_release(holder)
    assert outbox_replay().applied == 1


def test_healthz_reports_a_stale_backlog(memory, tenant, settings, client, monitor_headers):
    settings.ENGRAM_OUTBOX_STALE_SECONDS = -1
    OutboxEntry.objects.create(tenant=tenant, external_id="lu", operation="episode", memory_id="lu-turn-00001",
                               payload={"text": "x"}, actor="t", reason="outage")
    body = client.get("/healthz", headers=monitor_headers).json()
    assert body["outbox"]["pending"] == 1
    assert any(r.startswith("outbox backlog: 1 acknowledged writes waiting") for r in body["reasons"])


def test_writes_meeting_a_migrations_write_block_are_queued_and_replayed(engram, es_admin, docs):
    """es_setup blocks writes on an index while it copies it into the next version (a mapping or
    embedder change): a write or an import in that window is accepted into the outbox, not refused."""
    from engram_core.es.schema import alias_name

    engram.turn("alice", "hello")
    blocked = [next(iter(es_admin.indices.get_alias(name=alias_name(t))))
               for t in (MemoryType.SEMANTIC, MemoryType.EPISODIC)]
    es_admin.indices.put_settings(index=",".join(blocked), settings={"index.blocks.write": True})
    try:
        fact = engram.write_fact("alice", "Alice moved to Porto")
        imported = engram.import_episodes("bob", [{"text": f"old {n}", "occurred_at": f"2020-01-0{n + 1}T00:00:00Z"}
                                                  for n in range(3)])
        assert fact["status"] == "queued" and fact["operation"]["reason"] == "outage"
        assert imported["status"] == "queued" and imported["operation"]["reason"] == "outage"
        assert outbox_replay().stopped_by_outage  # still blocked: kept, not failed
        assert set(OutboxEntry.objects.values_list("status", flat=True)) == {"pending"}
    finally:
        es_admin.indices.put_settings(index=",".join(blocked), settings={"index.blocks.write": False})
    assert outbox_replay().applied == 2
    assert engram.get_memory("alice", fact["id"])["text"] == "Alice moved to Porto"
    assert _texts(docs, MemoryType.EPISODIC, "bob") == ["old 0", "old 1", "old 2"]


def _poison_imports(monkeypatch, poison: str, exc: BaseException) -> None:
    """Importing the episode ``poison`` raises ``exc``: a bug of the write path (as a far-off date
    once overflowed the temporal reader) or a failure of another kind, simulated in Engram's own code."""
    from memory_app.services import imports

    real = imports.episode_dates

    def dates(*, text, occurred_at):
        if text == poison:
            raise exc
        return real(text=text, occurred_at=occurred_at)

    monkeypatch.setattr(imports, "episode_dates", dates)


def test_a_poisoned_import_ends_failed_and_never_blocks_a_forget_or_an_erase(engram, monkeypatch, client,
                                                                              monitor_headers):
    """The issue's scenario: a background import of 501 episodes, one of which the write path
    cannot store (a bug's exception), then the end-user asks to forget a memory and to be erased."""
    kept = engram.turn("pat", "I keep a spare key under the blue flower pot")
    secret = engram.turn("pat", "My locker code is 4471")
    poison = "The castle near us was built 4500 years ago."
    _poison_imports(monkeypatch, poison, OverflowError("date value out of range"))
    episodes = [{"text": f"import line {n}", "occurred_at": "2021-03-01T10:00:00Z"} for n in range(500)]
    episodes.insert(250, {"text": poison, "occurred_at": "2021-03-01T10:00:00Z"})
    imported = engram.import_episodes("pat", episodes)
    assert imported["status"] == "queued" and imported["operation"]["reason"] == "background"

    report = outbox_replay()
    assert (report.applied, report.failed, report.pending) == (0, 1, 0)  # failed at once: no retry fixes a bug
    operation = engram.operation(imported["operation"]["id"])
    assert operation["status"] == "failed" and operation["error"]["code"] == "internal_error"
    assert operation["attempts"] == 1
    health = client.get("/healthz", headers=monitor_headers).json()
    assert health["outbox"]["failed"] == 1 and health["outbox"]["blocked_by"] is None
    assert health["outbox"]["recent_failures"][0]["operation"] == imported["operation"]["id"]
    assert any("1 writes ended failed" in d for d in health["degraded"])
    assert sorted(t["text"] for t in engram.export("pat")["memories"]["episodic"]) == [
        "I keep a spare key under the blue flower pot", "My locker code is 4471"]  # nothing of the import kept

    # The end-user's later writes are not held back: the forget applies at once and is not recalled.
    forgotten = engram.forget("pat", secret["id"], "user_request")
    assert forgotten["status"] == "applied"
    assert all(h["id"] != secret["id"] for h in engram.recall("pat", "locker code", k=10))
    assert engram.get_memory("pat", kept["id"])["text"] == "I keep a spare key under the blue flower pot"
    erased = engram.erase_subject("pat")
    assert erased["status"] == "applied" and erased["documents_deleted"] == 1
    assert not Subject.objects.filter(external_id="pat").exists()
    # The failed import's content went with the erase; its operation says failed still.
    entry = OutboxEntry.objects.get(uid=imported["operation"]["id"])
    assert entry.payload == {} and entry.external_id.startswith("erased:")


def test_a_write_stuck_on_a_transient_error_lets_forgets_pass_and_an_erase_cancel_it(engram, monkeypatch, settings):
    from elasticsearch import ApiError
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig

    settings.ENGRAM_API_IMPORT_SYNC_MAX = 2
    meta = ApiResponseMeta(status=500, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "localhost", 9200))
    kept = engram.turn("quin", "Quin's bike is a red Gazelle")
    secret = engram.turn("quin", "Quin's PIN is 2020")
    poison = "stuck episode"
    _poison_imports(monkeypatch, poison, ApiError("a shard failed", meta=meta, body={"error": {"type": "x"}}))
    imported = engram.import_episodes("quin", [{"text": t, "occurred_at": "2021-03-01T10:00:00Z"}
                                               for t in ("before it", poison, "after it")])
    later = engram.turn("quin", "Quin moved to Utrecht")
    forgotten = engram.forget("quin", secret["id"], "user_request")
    dependent = engram.forget("quin", later["id"], "user_request")  # names a write queued behind the stuck one
    assert [r["status"] for r in (imported, later, forgotten, dependent)] == ["queued"] * 4

    report = outbox_replay()
    # One replay cycle: the import is retried later (a 500 may pass), the forget of a memory that
    # exists already is applied past it, the turn and the forget of that turn wait in order.
    assert (report.applied, report.failed, report.pending) == (1, 0, 3)
    assert engram.operation(forgotten["operation"]["id"])["status"] == "done"
    assert engram.operation(dependent["operation"]["id"])["status"] == "pending"
    with pytest.raises(EngramAPIError) as err:
        engram.get_memory("quin", secret["id"])
    assert err.value.status == 404
    assert OutboxEntry.objects.get(uid=imported["operation"]["id"]).attempts == 1

    erased = engram.erase_subject("quin")
    assert erased["status"] == "queued"
    report = outbox_replay()  # the erase completes within one cycle: what was queued before it is cancelled
    assert (report.applied, report.pending) == (1, 0)
    assert engram.operation(erased["operation"]["id"])["result"] == {"documents_deleted": 1}
    for cancelled in (imported, later, dependent):
        operation = engram.operation(cancelled["operation"]["id"])
        assert operation["status"] == "cancelled" and operation["result"]["reason"] == "erased"
    assert not Subject.objects.filter(external_id="quin").exists()
    assert kept["id"] not in str(engram.export("quin") if Subject.objects.filter(external_id="quin").exists() else "")


def test_a_transient_error_fails_the_write_after_the_bounded_attempts(engram, monkeypatch, settings):
    settings.ENGRAM_API_IMPORT_SYNC_MAX = 1
    settings.ENGRAM_OUTBOX_MAX_ATTEMPTS = 3
    _poison_imports(monkeypatch, "again and again", TimeoutError("the embedder took too long"))
    imported = engram.import_episodes("rae", [{"text": t, "occurred_at": "2021-03-01T10:00:00Z"}
                                              for t in ("fine", "again and again")])
    after = engram.turn("rae", "written behind it")
    assert after["operation"]["reason"] == "backlog"
    for attempt in (1, 2):
        assert outbox_replay().pending == 2
        assert OutboxEntry.objects.get(uid=imported["operation"]["id"]).attempts == attempt
    assert outbox_replay().failed == 1
    operation = engram.operation(imported["operation"]["id"])
    assert (operation["status"], operation["attempts"], operation["error"]["code"]) == ("failed", 3, "internal_error")
    assert engram.get_memory("rae", after["id"])["text"] == "written behind it"  # no longer held back
