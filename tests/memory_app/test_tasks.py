"""The Celery tasks: thin, and each leaves an end-user erased meanwhile alone."""

from __future__ import annotations

import pytest

from memory_app.consolidation.services import consolidation_request
from memory_app.models import ConsolidationRun
from memory_app.services.episodes import episode_write
from memory_app.services.forget import subject_erase
from memory_app.tasks import consolidate_subject
from tenants.models import SubjectKey


@pytest.mark.django_db(transaction=True)
def test_a_consolidation_queued_for_an_end_user_erased_meanwhile_does_nothing(subject, count_docs):
    episode_write(subject=subject, text="My favourite colour is blue.")
    run = consolidation_request(subject=subject)
    subject_erase(subject=subject, actor="test")

    consolidate_subject(subject.pk, run_id=run.pk)

    run.refresh_from_db()
    assert run.status == ConsolidationRun.Status.FAILED and run.error["code"] == "subject_erased"
    assert count_docs() == 0
    assert not SubjectKey.objects.filter(subject=subject, revoked_at__isnull=True).exists()


@pytest.mark.django_db(transaction=True)
def test_a_consolidation_asked_for_while_the_end_user_has_queued_writes_waits_for_them(subject, count_docs):
    from celery.exceptions import Retry

    from memory_app.models import OutboxEntry

    said = episode_write(subject=subject, text="My favourite colour is blue.")["id"]
    OutboxEntry.objects.create(tenant=subject.tenant, external_id=subject.external_id, operation="forget",
                               memory_id=said, payload={"reason": "user_request"}, actor="test", reason="outage")
    run = consolidation_request(subject=subject)

    with pytest.raises(Retry):  # under a worker: tried again after the replay interval
        consolidate_subject(subject.pk, run_id=run.pk)

    run.refresh_from_db()
    assert run.status == ConsolidationRun.Status.QUEUED
    assert count_docs() == 1  # the episode, nothing derived


@pytest.mark.django_db(transaction=True)
def test_a_consolidation_that_finds_the_cluster_unreachable_tries_again_then_says_it_failed(subject, monkeypatch):
    from celery.exceptions import Retry

    from memory_app import tasks
    from engram_core.errors import ServiceUnavailable

    def down(**kwargs):
        raise ServiceUnavailable("Elasticsearch is unreachable; retry later", code="elasticsearch_unreachable")

    monkeypatch.setattr(tasks, "consolidation_run", down)
    run = consolidation_request(subject=subject)

    with pytest.raises(Retry):  # a passing outage: the worker tries again later
        consolidate_subject(subject.pk, run_id=run.pk)
    run.refresh_from_db()
    assert run.status == ConsolidationRun.Status.QUEUED

    # Out of tries, the run says so instead of staying queued for good.
    consolidate_subject.apply(kwargs={"subject_id": subject.pk, "run_id": run.pk}, retries=tasks._OUTAGE_RETRIES)
    run.refresh_from_db()
    assert run.status == ConsolidationRun.Status.FAILED and run.error["code"] == "elasticsearch_unreachable"


@pytest.mark.django_db(transaction=True)
def test_a_consolidation_message_whose_run_is_gone_does_nothing(subject, count_docs):
    episode_write(subject=subject, text="My favourite colour is blue.")
    run = consolidation_request(subject=subject)
    run_id = run.pk
    run.delete()

    consolidate_subject(subject.pk, run_id=run_id)  # no error: nothing to run

    assert not ConsolidationRun.objects.filter(subject=subject).exists()
    assert count_docs() == 1  # the episode, nothing derived
