"""Use counts of recalled facts: bumped in the background, exact under concurrency, kept in the database."""

import math
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from engram_core.es.schema import MemoryType, alias_name
from memory_app.models import FactUsage
from memory_app.selectors import memory_get
from memory_app.recall import memory_recall
from memory_app.services.facts import fact_write
from memory_app.services.forget import memory_forget
from memory_app.usage import usage_bump, usage_flush, usage_record_recalled
from tenants.services.clients import clear_caches


def test_recall_bumps_use_count_in_the_background(subject):
    fact = fact_write(subject=subject, text="Alice prefers morning appointments.")
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


def test_a_bump_never_waits_on_the_open_transaction_of_the_recall_that_scheduled_it(subject):
    # The writer key is not cached and the fact has no counter row, so the bump needs the writer
    # client; minted on the pool's own connection, its audit row waited on this test's open
    # transaction while the test waited on the bump.
    fact = fact_write(subject=subject, text="Alice keeps bees on the roof.")
    FactUsage.objects.filter(pk=fact["id"]).delete()
    clear_caches()
    usage_record_recalled(subject=subject, memories=[{"id": fact["id"], "memory_type": "semantic"}])
    usage_flush(timeout=60)  # raised TimeoutError when the bump minted the key itself


@pytest.mark.django_db(transaction=True)
def test_concurrent_use_count_bumps_lose_nothing(subject):
    fact = fact_write(subject=subject, text="Alice collects vinyl records.")
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
    a = fact_write(subject=subject, text="Alice plays the cello.")
    b = fact_write(subject=subject, text="Alice runs on Sundays.")
    gone = fact_write(subject=subject, text="Alice used to smoke.")
    memory_forget(subject=subject, memory_id=gone["id"], reason="user_request", actor="test")
    at = datetime.now(UTC)
    assert usage_bump(ids=[a["id"], b["id"], a["id"], gone["id"]], at=at, subject_id=subject.pk) == 3
    assert not FactUsage.objects.filter(pk=gone["id"]).exists()
    assert memory_get(subject=subject, memory_id=a["id"])["use_count"] == 2
    stored = memory_get(subject=subject, memory_id=b["id"])
    assert stored["use_count"] == 1 and stored["last_used_at"] == at.isoformat()
    # last_used_at never moves backwards.
    assert usage_bump(ids=[b["id"]], at=at - timedelta(days=1), subject_id=subject.pk) == 1
    assert memory_get(subject=subject, memory_id=b["id"])["last_used_at"] == at.isoformat()


def test_a_bump_leaves_the_fact_document_alone_and_recall_scores_with_the_stored_count(subject, es_admin):
    fact = fact_write(subject=subject, text="Alice prefers window seats on trains.")
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


def test_counts_held_in_old_fact_documents_are_read_then_moved_by_es_setup(subject, es_admin, settings):
    from memory_app.usage import usage_migrate

    old, counted = (fact_write(subject=subject, text=t) for t in ("Alice owns a kayak.", "Alice bakes."))
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

    fact = fact_write(subject=subject, text="Alice keeps bees.")
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
