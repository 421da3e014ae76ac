import io
import json
import math
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from engram_core.errors import Conflict, NotFound, ValidationFailed
from memory_app.embeddings import EmbeddingError
from engram_core.es.schema import MemoryType, alias_name
from memory_app import selectors, services
from memory_app.models import FactUsage
from memory_app.recall import memory_recall
from memory_app.selectors import memory_get, memory_history, subject_export
from memory_app.usage import usage_bump, usage_flush, usage_record_recalled
from tenants.models import AuditEvent, SubjectKey


def ids(results):
    return [r["id"] for r in results]


# ---------------------------------------------------------------- writing and same-turn visibility


def test_a_turn_is_recallable_as_soon_as_the_write_returns(subject):
    written = services.episode_write(subject=subject, text="My daughter's piano recital is on Friday at 6pm.")
    results = memory_recall(subject=subject, query="when is the piano recital?", k=3)
    assert ids(results)[0] == written["id"]
    assert results[0]["memory_type"] == "episodic" and results[0]["role"] == "user"


def test_every_memory_type_and_the_catalog_are_recalled_in_one_call(subject):
    episode = services.episode_write(subject=subject, text="The garage door opener stopped working yesterday.")
    fact = services.fact_write(subject=subject, text="Alice owns a Chamberlain garage door opener.")
    playbook = services.playbook_write(subject=subject, trigger="garage door opener does not respond",
                                       steps="1. Check the breaker. 2. Re-pair the remote.")
    entry = services.catalog_entry_write(tenant=subject.tenant, title="Garage door openers",
                                         text="Garage door openers must be re-paired after a power cut.")
    results = memory_recall(subject=subject, query="garage door opener", k=10)
    assert set(ids(results)) == {episode["id"], fact["id"], playbook["id"], entry["id"]}
    only = memory_recall(subject=subject, query="garage door opener", k=10, types=["semantic", "catalog"])
    assert set(ids(only)) == {fact["id"], entry["id"]}


def test_tampered_scope_in_metadata_does_not_move_a_memory(subject, make_subject):
    mallory = make_subject("mallory", tenant="globex")
    written = services.episode_write(subject=subject, text="I like green tea.",
                                     metadata={"tenant_id": "globex", "user_id": str(mallory.user_id)})
    stored = memory_get(subject=subject, memory_id=written["id"])
    assert (stored["tenant_id"], stored["user_id"]) == ("acme", str(subject.user_id))
    assert memory_recall(subject=mallory, query="green tea", k=10) == []


# ---------------------------------------------------------------- bad input writes nothing


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"text": ""}, "empty_text"),
    ({"text": "   \n "}, "empty_text"),
    ({"text": "x" * 8001}, "text_too_long"),
    ({"text": 42}, "invalid_text"),
    ({"text": "ok", "occurred_at": "yesterday"}, "invalid_datetime"),
    ({"text": "ok", "occurred_at": "2026-01-31T09:00:00"}, "invalid_datetime"),
    ({"text": "ok", "role": "robot"}, "invalid_role"),
    ({"text": "ok", "metadata": {"blob": "x" * 5000}}, "metadata_too_large"),
    # What Elasticsearch's client cannot write faithfully (found by schemathesis): numbers
    # beyond 64 bits, infinities, lone surrogates.
    ({"text": "ok", "metadata": {"n": 876050756799401203597312}}, "invalid_metadata"),
    ({"text": "ok", "metadata": {"n": [float("inf")]}}, "invalid_metadata"),
    ({"text": "ok", "metadata": {"\ud9d3": "x"}}, "invalid_metadata"),
    ({"text": "ok", "memory_id": "bad id!"}, "invalid_id"),
])
def test_bad_episode_input_is_refused_and_nothing_is_written(subject, count_docs, kwargs, code):
    with pytest.raises(ValidationFailed) as exc:
        services.episode_write(subject=subject, **kwargs)
    assert exc.value.code == code and exc.value.status == 400
    assert count_docs() == 0


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"k": 0}, "k_out_of_range"),
    ({"k": 101}, "k_out_of_range"),
    ({"k": "5"}, "k_out_of_range"),
    ({"types": ["episodic", "dreams"]}, "unknown_memory_type"),
    ({"types": []}, "invalid_types"),
    ({"since": "last week"}, "invalid_datetime"),
    ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "invalid_time_range"),
    ({"query": ""}, "empty_text"),
    ({"query": "q" * 2001}, "text_too_long"),
])
def test_bad_recall_input_is_refused(subject, kwargs, code):
    with pytest.raises(ValidationFailed) as exc:
        memory_recall(subject=subject, **{"query": "anything", **kwargs})
    assert exc.value.code == code


def test_superseding_unknown_or_foreign_ids_is_refused_and_writes_nothing(subject, make_subject, count_docs):
    bob = make_subject("bob")
    bobs = services.fact_write(subject=bob, text="Bob is allergic to peanuts.")
    for bad in (["0123456789abcdef"], [bobs["id"]]):
        with pytest.raises(NotFound) as exc:
            services.fact_write(subject=subject, text="Alice is allergic to cats.", supersedes=bad)
        assert exc.value.details == {"ids": bad}
    assert count_docs(MemoryType.SEMANTIC) == 1
    assert "superseded_by" not in memory_get(subject=bob, memory_id=bobs["id"])


def test_a_supersession_that_fails_half_way_is_undone(subject, count_docs, monkeypatch):
    old = services.fact_write(subject=subject, text="Alice works at Initech.")
    other = services.fact_write(subject=subject, text="Alice works remotely.")
    # The new id collides with an existing memory: the create fails before any old doc changes.
    with pytest.raises(Conflict):
        services.fact_write(subject=subject, text="Alice works at Globex.", supersedes=[old["id"]],
                            memory_id=other["id"])
    assert "superseded_by" not in memory_get(subject=subject, memory_id=old["id"])
    # Now fail on the second old document (a concurrent change bumps its sequence number).
    visible = selectors.visible_documents(subject=subject, ids=[old["id"], other["id"]])
    services.writer_es_client().update(index=alias_name(MemoryType.SEMANTIC), id=other["id"],
                                       doc={"confidence": 0.5}, refresh=True)
    monkeypatch.setattr(selectors, "visible_documents", lambda **kw: visible)  # hand over the now-stale view
    with pytest.raises(Conflict):
        services.fact_write(subject=subject, text="Alice works at Globex.", supersedes=[old["id"], other["id"]],
                            memory_id="new-fact-0001")
    monkeypatch.undo()
    assert count_docs(MemoryType.SEMANTIC) == 2
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id="new-fact-0001")
    # Undone: the old facts carry no superseded_by (null) and are recalled as current again.
    assert memory_get(subject=subject, memory_id=old["id"]).get("superseded_by") is None
    assert memory_get(subject=subject, memory_id=other["id"]).get("superseded_by") is None
    assert set(ids(memory_recall(subject=subject, query="where does Alice work", k=5))) == {
        old["id"], other["id"]}


# ---------------------------------------------------------------- supersession


def test_supersession_chain_is_readable_both_ways_and_hidden_by_default(subject):
    abc = services.fact_write(subject=subject, text="Alice lives in Leeds.", confidence=0.9)
    xyz = services.fact_write(subject=subject, text="Alice lives in York.", supersedes=[abc["id"]])
    pqr = services.fact_write(subject=subject, text="Alice lives in Bath.", supersedes=[xyz["id"]],
                              contradiction="harsh", confidence=0.9)
    assert pqr["confidence"] == pytest.approx(0.8)
    assert memory_get(subject=subject, memory_id=abc["id"])["superseded_by"] == [xyz["id"]]

    middle = memory_history(subject=subject, memory_id=xyz["id"])
    assert [d["id"] for d in middle["older"]] == [abc["id"]]
    assert [d["id"] for d in middle["newer"]] == [pqr["id"]]
    assert [d["id"] for d in memory_history(subject=subject, memory_id=abc["id"])["newer"]] == [xyz["id"], pqr["id"]]
    assert [d["id"] for d in memory_history(subject=subject, memory_id=pqr["id"])["older"]] == [xyz["id"], abc["id"]]

    assert ids(memory_recall(subject=subject, query="where does Alice live", k=10)) == [pqr["id"]]
    everything = memory_recall(subject=subject, query="where does Alice live", k=10, include_superseded=True)
    assert set(ids(everything)) == {abc["id"], xyz["id"], pqr["id"]}


def test_superseding_an_already_superseded_fact_is_allowed(subject):
    old = services.fact_write(subject=subject, text="Alice drives a Fiat.")
    first = services.fact_write(subject=subject, text="Alice drives a Honda.", supersedes=[old["id"]])
    second = services.fact_write(subject=subject, text="Alice drives a Volvo.", supersedes=[old["id"]])
    assert memory_get(subject=subject, memory_id=old["id"])["superseded_by"] == [first["id"], second["id"]]


def test_forget_leaves_a_content_free_tombstone(subject):
    fact = services.fact_write(subject=subject, text="Alice's PIN is 4321.")
    services.memory_forget(subject=subject, memory_id=fact["id"], reason="user asked", actor="agent:test")
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id=fact["id"])
    event = AuditEvent.objects.get(action="memory.forget")
    assert event.target_id == fact["id"] and event.details == {"memory_type": "semantic", "reason": "user asked"}
    assert "4321" not in str(event.details)
    with pytest.raises(NotFound):
        services.memory_forget(subject=subject, memory_id=fact["id"], reason="again", actor="agent:test")


def test_forgetting_someone_elses_memory_is_not_found(subject, make_subject):
    bob = make_subject("bob")
    fact = services.fact_write(subject=bob, text="Bob's locker code is 999.")
    with pytest.raises(NotFound):
        services.memory_forget(subject=subject, memory_id=fact["id"], reason="x", actor="agent:test")
    assert memory_get(subject=bob, memory_id=fact["id"])["text"] == "Bob's locker code is 999."


# ---------------------------------------------------------------- scoring


def test_playbook_outcomes_are_counted_and_rank_playbooks(subject):
    good = services.playbook_write(subject=subject, trigger="wifi keeps dropping", steps="Restart the router.")
    bad = services.playbook_write(subject=subject, trigger="wifi keeps dropping", steps="Restart the router.")
    for _ in range(4):
        services.playbook_outcome_record(subject=subject, playbook_id=good["id"], success=True)
    services.playbook_outcome_record(subject=subject, playbook_id=bad["id"], success=False)
    updated = services.playbook_outcome_record(subject=subject, playbook_id=bad["id"], success=False,
                                               refined_steps="Move the router away from the microwave.")
    assert (updated["failure_count"], updated["refined_steps"]) == (2, "Move the router away from the microwave.")
    results = memory_recall(subject=subject, query="wifi keeps dropping", k=2, types=["procedural"], explain=True)
    assert ids(results) == [good["id"], bad["id"]]
    # 1 + 0.1 · (2 · posterior mean − 1): Beta(5, 1) mean 5/6, Beta(1, 3) mean 1/4.
    assert results[0]["explain"]["multipliers"]["outcome"] == pytest.approx(1 + 0.1 * (2 * 5 / 6 - 1))
    assert results[1]["explain"]["multipliers"]["outcome"] == pytest.approx(1 + 0.1 * (2 * 1 / 4 - 1))
    assert results[0]["success_count"] == 4 and results[0]["last_success_at"]


def test_explain_shows_ranks_fusion_and_every_multiplier(subject, settings):
    settings.ENGRAM_FUSION = "rrf"
    now = datetime(2026, 11, 1, tzinfo=UTC)
    old = services.episode_write(subject=subject, text="We adopted a beagle puppy named Max.",
                                 occurred_at=now - timedelta(days=900))
    fact = services.fact_write(subject=subject, text="Alice has a beagle called Max.")
    services.catalog_entry_write(tenant=subject.tenant, title="Pets", text="Pet cameras support beagle-sized dogs.")
    results = memory_recall(subject=subject, query="beagle Max", k=5, explain=True, now=now)
    by_id = {r["id"]: r for r in results}
    e = by_id[old["id"]]["explain"]
    assert e["bm25_rank"] >= 1 and e["dense_rank"] >= 1
    # Leg weights: BM25 1.0, dense 0.5 (ENGRAM_RRF_*_WEIGHT).
    assert e["rrf_score"] == pytest.approx(1 / (30 + e["bm25_rank"]) + 0.5 / (30 + e["dense_rank"]))
    # 900 days old, offset 180 d, scale 1825 d, decay 0.5 at offset + scale.
    sigma_sq = -(1825**2) / (2 * math.log(0.5))
    assert e["multipliers"] == {"time_decay": pytest.approx(math.exp(-(720**2) / (2 * sigma_sq)))}
    assert e["final_score"] == pytest.approx(e["rrf_score"] * e["multipliers"]["time_decay"])
    assert set(by_id[fact["id"]]["explain"]["multipliers"]) == {"time_decay", "use_count"}
    catalog = next(r for r in results if r["memory_type"] == "catalog")
    assert catalog["explain"]["multipliers"] == {"catalog_prior": 0.85}


def test_recall_bumps_use_count_in_the_background(subject):
    fact = services.fact_write(subject=subject, text="Alice prefers morning appointments.")
    memory_recall(subject=subject, query="appointment time preference", k=3)
    usage_flush()
    assert memory_get(subject=subject, memory_id=fact["id"])["use_count"] == 0  # a read alone counts nothing
    for _ in range(3):
        hits = memory_recall(subject=subject, query="appointment time preference", k=3)
        usage_record_recalled(subject=subject, memories=hits)
    usage_flush()
    stored = memory_get(subject=subject, memory_id=fact["id"])
    assert stored["use_count"] == 3
    assert stored["last_used_at"] >= fact["last_used_at"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_use_count_bumps_lose_nothing(subject):
    fact = services.fact_write(subject=subject, text="Alice collects vinyl records.")
    at = datetime.now(UTC)
    barrier = threading.Barrier(8)
    errors = []

    def bump():
        try:
            barrier.wait()
            for _ in range(5):
                usage_bump(ids=[fact["id"]], at=at, subject_id=subject.pk)
        except Exception as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()  # this thread's own, so no session outlives the test

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert memory_get(subject=subject, memory_id=fact["id"])["use_count"] == 40


def test_one_bump_round_covers_several_facts_and_skips_forgotten_ones(subject):
    a = services.fact_write(subject=subject, text="Alice plays the cello.")
    b = services.fact_write(subject=subject, text="Alice runs on Sundays.")
    gone = services.fact_write(subject=subject, text="Alice used to smoke.")
    services.memory_forget(subject=subject, memory_id=gone["id"], reason="asked", actor="test")
    at = datetime.now(UTC)
    assert usage_bump(ids=[a["id"], b["id"], a["id"], gone["id"]], at=at, subject_id=subject.pk) == 3
    assert not FactUsage.objects.filter(pk=gone["id"]).exists()
    assert memory_get(subject=subject, memory_id=a["id"])["use_count"] == 2
    stored = memory_get(subject=subject, memory_id=b["id"])
    assert stored["use_count"] == 1 and stored["last_used_at"] == at.isoformat()
    # last_used_at never moves backwards.
    assert usage_bump(ids=[b["id"]], at=at - timedelta(days=1), subject_id=subject.pk) == 1
    assert memory_get(subject=subject, memory_id=b["id"])["last_used_at"] == at.isoformat()


# ---------------------------------------------------------------- import, export, erase


def test_import_keeps_original_timestamps_and_reports_progress(subject):
    seen = []
    episodes = [{"text": f"Session note {n}: we talked about hiking trail {n}.",
                 "occurred_at": f"2023-05-{n + 1:02d}T10:00:00Z", "session_id": "s1"} for n in range(30)]
    written = services.episodes_import(subject=subject, episodes=episodes, batch_size=8,
                                       progress=lambda done, total: seen.append((done, total)))
    assert len(written) == 30 and seen[-1] == (30, 30)
    results = memory_recall(subject=subject, query="hiking trail 7", k=1, types=["episodic"])
    assert results[0]["occurred_at"].startswith("2023-05-08T10:00:00")


def test_import_refreshes_once_at_the_end_not_per_chunk(subject, es_admin, settings):
    # Under a 60 s refresh interval, a refresh wait per chunk (the old refresh=wait_for) would
    # take about a minute per chunk; one refresh at the end makes everything visible at once.
    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": "60s"})
    try:
        episodes = [{"text": f"Import note {n} about the boiler.", "occurred_at": f"2023-06-{n + 1:02d}T09:00:00Z"}
                    for n in range(20)]
        started = time.monotonic()
        written = services.episodes_import(subject=subject, episodes=episodes, batch_size=8)
        assert time.monotonic() - started < 30
        # No refresh of our own: what a search sees right now is what the import made visible.
        assert es_admin.count(index=index)["count"] == 20
        assert {r["id"] for r in memory_recall(subject=subject, query="boiler import note", k=20,
                                               types=["episodic"])} == set(written)
    finally:
        es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": settings.ES_REFRESH_INTERVAL})


def test_import_with_one_bad_episode_writes_nothing(subject, count_docs):
    episodes = [{"text": "fine", "occurred_at": "2023-05-01T10:00:00Z"},
                {"text": "no date"}]
    with pytest.raises(ValidationFailed) as exc:
        services.episodes_import(subject=subject, episodes=episodes)
    assert exc.value.details["index"] == 1 and exc.value.code == "invalid_datetime"
    assert count_docs() == 0


def test_import_failing_half_way_keeps_nothing(subject, count_docs):
    # The stored id the client's id 5 maps to is taken (client ids are namespaced per end-user).
    taken = services.client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id,
                                      client_id="episode-0000000005")
    existing = services.episode_write(subject=subject, text="already here", memory_id=taken)
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z", "id": f"episode-{n:010d}"}
                for n in range(10)]
    with pytest.raises(Conflict) as exc:
        services.episodes_import(subject=subject, episodes=episodes, batch_size=3)
    assert exc.value.code == "import_failed"
    assert count_docs() == 1
    assert memory_get(subject=subject, memory_id=existing["id"])["text"] == "already here"


def test_an_import_whose_embedding_fails_part_way_keeps_nothing(subject, count_docs, monkeypatch):
    # The third batch's vectors fail (a hosted embedder gone away) after the first chunk was
    # written: that chunk is deleted again before the error reaches the caller.
    embedded = []
    episode_vectors = services.derived.episode_vectors

    def failing(items, **kwargs):
        embedded.append(len(items))
        if len(embedded) == 3:
            raise EmbeddingError("the embedding server went away")
        return episode_vectors(items, **kwargs)

    monkeypatch.setattr(services.derived, "episode_vectors", failing)
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z"} for n in range(10)]
    written = []
    with pytest.raises(EmbeddingError):
        services.episodes_import(subject=subject, episodes=episodes, batch_size=3,
                                 progress=lambda done, total: written.append(done))
    assert written and written[-1] >= 3  # a chunk had been written when the embedding failed
    assert count_docs() == 0


def test_computed_ahead_computes_the_next_item_while_the_caller_holds_this_one():
    started = {n: threading.Event() for n in range(4)}

    def compute(n):
        started[n].set()
        return n * 10

    ahead = services.computed_ahead([0, 1, 2, 3], compute)
    assert next(ahead) == (0, 0)
    # The caller has not asked for item 1, and it is being (or has been) computed.
    assert started[1].wait(timeout=10)
    assert not started[2].is_set()
    assert list(ahead) == [(1, 10), (2, 20), (3, 30)]
    assert list(services.computed_ahead([], compute)) == []

    # A caller that stops early: the item in flight finishes and nothing after it starts.
    started = {n: threading.Event() for n in range(4)}
    ahead = services.computed_ahead([0, 1, 2, 3], compute)
    next(ahead)
    ahead.close()
    assert started[1].is_set() and not started[2].is_set() and not started[3].is_set()


@pytest.mark.parametrize("session_id", [7, {"id": "s1"}, "", "x" * 201])
def test_a_bad_session_id_is_refused_before_anything_is_written(subject, count_docs, session_id):
    with pytest.raises(ValidationFailed) as exc:
        services.episodes_import(subject=subject, episodes=[
            {"text": "fine", "occurred_at": "2023-05-01T10:00:00Z", "session_id": "s1"},
            {"text": "also fine", "occurred_at": "2023-05-01T10:01:00Z", "session_id": session_id}])
    assert exc.value.details["field"] == "session_id"
    with pytest.raises(ValidationFailed):
        services.write_validate(operation="episode", payload={"text": "fine", "session_id": session_id})
    assert count_docs() == 0


def test_an_import_sent_again_answers_its_episodes_not_a_conflict(subject, count_docs):
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z", "id": f"episode-{n:04d}"}
                for n in range(5)]
    first = services.episodes_import(subject=subject, episodes=episodes, batch_size=2)
    assert services.episodes_import(subject=subject, episodes=episodes, batch_size=2) == first
    assert count_docs() == 5
    # The same id with other content is still a conflict, and the earlier import is kept whole.
    with pytest.raises(Conflict):
        services.episodes_import(subject=subject, episodes=[*episodes[:4], {**episodes[4], "text": "changed"}])
    assert count_docs() == 5 and memory_get(subject=subject, memory_id=first[4])["text"] == "episode 4"


def test_a_bulk_chunk_the_client_resent_after_it_applied_counts_once(subject, count_docs, monkeypatch):
    """The Elasticsearch client retries a bulk request whose answer timed out; the cluster had
    applied it, so the retry's creates conflict with themselves."""
    real = services.helpers.streaming_bulk

    def applied_then_resent(client, actions, **kwargs):
        actions = list(actions)
        services.helpers.bulk(client, actions, raise_on_error=False)  # applied; the answer is lost
        return real(client, actions, **kwargs)

    monkeypatch.setattr(services.helpers, "streaming_bulk", applied_then_resent)
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z", "id": f"episode-{n:04d}"}
                for n in range(5)]
    written = services.episodes_import(subject=subject, episodes=episodes, batch_size=2)
    assert len(written) == 5 and count_docs() == 5
    # And when such an import fails for another reason, what it wrote (both sends) is undone.
    taken = services.client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id,
                                      client_id="other-0009")
    services.episode_write(subject=subject, text="already here", memory_id=taken)
    more = [{"text": f"other {n}", "occurred_at": "2023-05-02T10:00:00Z", "id": f"other-{n:04d}"} for n in range(10)]
    with pytest.raises(Conflict):
        services.episodes_import(subject=subject, episodes=more, batch_size=3)
    assert count_docs() == 6


def test_export_and_erase(subject, make_subject, count_docs):
    bob = make_subject("bob")
    services.episode_write(subject=subject, text="I need a new phone.")
    services.fact_write(subject=subject, text="Alice wants a new phone.")
    services.playbook_write(subject=subject, trigger="phone upgrade", steps="Offer trade-in.")
    services.catalog_entry_write(tenant=subject.tenant, title="Phones", text="Trade-ins are accepted.")
    services.fact_write(subject=bob, text="Bob has a new phone.")

    exported = subject_export(subject=subject)
    assert {k: len(v) for k, v in exported["memories"].items()} == {"episodic": 1, "semantic": 1, "procedural": 1}
    assert all("embedding" not in d for items in exported["memories"].values() for d in items)

    assert services.subject_erase(subject=subject, actor="agent:test") == 3
    assert count_docs() == 2  # bob's fact and the catalog entry remain
    assert not SubjectKey.objects.filter(subject=subject, revoked_at__isnull=True).exists()
    assert AuditEvent.objects.filter(action="subject.erase", target_id=str(subject.user_id)).exists()


def test_import_command_reports_progress_and_refuses_bad_lines(subject, tmp_path, count_docs):
    from django.core.management import CommandError, call_command

    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps({"text": f"note {n}", "occurred_at": "2024-01-0{}T08:00:00Z".format(n + 1)})
                              for n in range(3)))
    out = io.StringIO()
    call_command("memory_import", str(good), "--tenant", "acme", "--subject", "alice", stdout=out)
    assert "3/3 episodes written" in out.getvalue() and "imported 3 episodes for acme/alice" in out.getvalue()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine", "occurred_at": "2024-01-01T08:00:00Z"}\n{"text": "", "occurred_at": "2024-01-01T08:00:00Z"}\n')
    with pytest.raises(CommandError, match="empty_text: episode 1: text must not be empty"):
        call_command("memory_import", str(bad), "--tenant", "acme", "--subject", "alice")
    assert count_docs() == 3


def test_a_bump_leaves_the_fact_document_alone_and_recall_scores_with_the_stored_count(subject, es_admin):
    fact = services.fact_write(subject=subject, text="Alice prefers window seats on trains.")
    index = alias_name(MemoryType.SEMANTIC)
    before = es_admin.get(index=index, id=fact["id"])
    question = "seat preference on trains"
    for _ in range(3):
        usage_record_recalled(subject=subject, memories=memory_recall(subject=subject, query=question, k=3))
    usage_flush()
    after = es_admin.get(index=index, id=fact["id"])
    # Counted in the database; the document (and its vector) was not rewritten.
    assert (after["_seq_no"], after["_version"]) == (before["_seq_no"], before["_version"])
    assert "use_count" not in after["_source"]
    assert FactUsage.objects.get(pk=fact["id"]).use_count == 3
    hit = next(h for h in memory_recall(subject=subject, query=question, k=3, explain=True) if h["id"] == fact["id"])
    assert hit["use_count"] == 3
    assert hit["explain"]["multipliers"]["use_count"] == pytest.approx(1 + 0.2 * math.log10(4))


def test_forget_and_erase_delete_the_use_counters(make_subject):
    alice, bob = make_subject("alice"), make_subject("bob")
    kept, gone = (services.fact_write(subject=alice, text=t) for t in ("Alice hikes.", "Alice smokes."))
    bobs = services.fact_write(subject=bob, text="Bob sails.")
    at = datetime.now(UTC)
    usage_bump(ids=[kept["id"], gone["id"]], at=at, subject_id=alice.pk)
    usage_bump(ids=[bobs["id"]], at=at, subject_id=bob.pk)
    services.memory_forget(subject=alice, memory_id=gone["id"], reason="asked", actor="test")
    ours = FactUsage.objects.filter(subject__in=[alice, bob])  # (rows of earlier tests' pool threads stay)
    assert set(ours.values_list("pk", flat=True)) == {kept["id"], bobs["id"]}
    services.subject_erase(subject=alice, actor="test")
    assert set(ours.values_list("pk", flat=True)) == {bobs["id"]}


def test_counts_held_in_old_fact_documents_are_read_then_moved_by_es_setup(subject, es_admin, settings):
    from memory_app.usage import usage_migrate

    old, counted = (services.fact_write(subject=subject, text=t) for t in ("Alice owns a kayak.", "Alice bakes."))
    index = alias_name(MemoryType.SEMANTIC)
    # As a fact stored before counts moved to the database holds them.
    for fact, n in ((old, 5), (counted, 2)):
        es_admin.update(index=index, id=fact["id"], doc={"use_count": n}, refresh=True)
    assert memory_get(subject=subject, memory_id=old["id"])["use_count"] == 5  # read as stored until moved
    usage_bump(ids=[counted["id"]], at=datetime.now(UTC), subject_id=subject.pk)  # a first bump starts from it
    assert FactUsage.objects.get(pk=counted["id"]).use_count == 3

    assert usage_migrate(es=es_admin, prefixes=[settings.ES_INDEX_PREFIX]) == 1  # only the row that was missing
    assert FactUsage.objects.get(pk=old["id"]).use_count == 5
    assert FactUsage.objects.get(pk=counted["id"]).use_count == 3  # the newer row is kept
    assert usage_migrate(es=es_admin, prefixes=[settings.ES_INDEX_PREFIX]) == 0  # idempotent


def test_background_bumps_manage_their_database_connection(subject, monkeypatch):
    # The pool threads outlive requests: each bump is handled as Django handles a request, a broken
    # (a database restart) or expired connection dropped before and after the work, on its thread.
    from engram_core import db
    from memory_app import usage

    fact = services.fact_write(subject=subject, text="Alice keeps bees.")
    calls = []
    close_old_connections = db.close_old_connections

    def check() -> None:
        calls.append(threading.get_ident())
        close_old_connections()  # the real one: here (CONN_MAX_AGE 0) it closes the pool thread's

    monkeypatch.setattr(db, "close_old_connections", check)
    usage.usage_record(ids=[fact["id"]], at=datetime.now(UTC), subject=subject)
    usage_flush()
    assert len(calls) == 2 and calls[0] == calls[1] != threading.get_ident()
    assert memory_get(subject=subject, memory_id=fact["id"])["use_count"] == 1
