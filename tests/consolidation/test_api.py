"""POST /api/v1/subjects/<external_id>/consolidate and GET .../consolidations/<id>: scopes, the
same 404 for another tenant's end-user, dry run, queued run; beat's choice of end-users."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory_app.consolidation import services as consolidation
from memory_app.models import ConsolidationRun
from memory_app.tasks import consolidate_subject
from tenants.models import AgentToken
from tenants.services.tokens import agent_token_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch):
    """Tasks the code queues (the broker is not under test here; test_worker.py runs a real one)."""
    calls = []
    monkeypatch.setattr(consolidation.current_app, "send_task", lambda name, kwargs: calls.append((name, kwargs)))
    return calls


def _client(subject, *scopes) -> APIClient:
    _, raw = agent_token_create(tenant=subject.tenant, name="t", scopes=scopes or AgentToken.Scope.values,
                                actor="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _url(subject) -> str:
    return f"/api/v1/subjects/{subject.external_id}/consolidate"


def test_dry_run_answers_the_proposed_changes(subject, say, current_facts):
    say(subject, "I live in Paris.")
    response = _client(subject).post(_url(subject), {"dry_run": True}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["run"]["status"] == "dry_run" and body["run"]["facts_created"] == 1
    assert body["changes"][0]["action"] == "create" and body["changes"][0]["text"] == "The user lives in Paris."
    assert current_facts(subject) == {}


def test_a_run_is_queued_then_pollable(subject, say, current_facts, sent):
    say(subject, "I live in Paris.")
    client = _client(subject)
    response = client.post(_url(subject), {}, format="json")
    assert response.status_code == 202, response.json()
    run_id = response.json()["run"]["id"]
    assert response["Location"] == f"/api/v1/subjects/{subject.external_id}/consolidations/{run_id}"
    assert sent == [("memory_app.tasks.consolidate_subject", {"subject_id": subject.pk, "run_id": run_id})]
    consolidate_subject.apply(kwargs=sent[0][1])  # what the worker does with it
    run = client.get(response["Location"]).json()
    assert run["status"] == "succeeded" and run["facts_created"] == 1 and run["episodes_read"] == 1
    assert [f["text"] for f in current_facts(subject).values()] == ["The user lives in Paris."]


def test_scopes_and_tenancy(make_subject, sent):
    alice = make_subject("alice", tenant="a")
    bob = make_subject("bob", tenant="b")
    assert _client(alice, "memory:read").post(_url(alice), {}, format="json").status_code == 403
    other = _client(bob).post(_url(alice), {"dry_run": True}, format="json")
    unknown = _client(bob).post("/api/v1/subjects/nobody/consolidate", {"dry_run": True}, format="json")
    assert other.status_code == unknown.status_code == 404 and other.json() == {
        **unknown.json(), "error": {**unknown.json()["error"], "details": {"external_id": "alice"}}}
    run = ConsolidationRun.objects.create(subject=alice, extractor="rules")
    assert _client(bob).get(f"/api/v1/subjects/bob/consolidations/{run.pk}").status_code == 404
    bad = _client(alice).post(_url(alice), {"extractor": "magic"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"]["fields"]["extractor"]
    no_llm = _client(alice).post(_url(alice), {"extractor": "llm"}, format="json")
    assert no_llm.status_code == 400 and no_llm.json()["error"]["code"] == "extractor_unavailable"
    assert sent == []


def test_beat_queues_end_users_after_n_episodes_or_t_minutes_of_quiet(make_subject, say, settings, sent):
    settings.ENGRAM_CONSOLIDATION_AFTER_EPISODES = 3
    settings.ENGRAM_CONSOLIDATION_QUIET_MINUTES = 30
    busy, quiet, fresh, done = (make_subject(n) for n in ("busy", "quiet", "fresh", "done"))
    say(busy, "one", "two", "three")
    say(quiet, "one")
    say(fresh, "one")
    say(done, "I live in Paris.", "two", "three")
    consolidation.consolidation_run(subject=done)
    now = timezone.now()
    assert {s.external_id for s in consolidation.consolidation_due(
        options=consolidation.DueOptions.from_settings(), now=now)} == {"busy"}
    later = now + timedelta(minutes=31)
    assert consolidation.consolidation_dispatch(now=later) == 3  # quiet and fresh are quiet by then
    assert sorted(k["subject_id"] for _, k in sent) == sorted([busy.pk, quiet.pk, fresh.pk])
    # Queued runs are not queued twice.
    assert consolidation.consolidation_dispatch(now=later) == 0


def test_a_failed_run_tells_the_agent_no_internal_address(subject, say, settings):
    """The cause of a failure (here the embeddings endpoint, by its internal URL) stays in the
    worker's log; the run an agent polls names the kind of failure only."""
    from memory_app.providers import clear_cache

    say(subject, "I live in Paris.")
    settings.ENGRAM_EMBEDDER = "openai"
    settings.ENGRAM_OPENAI_EMBEDDINGS_URL = "http://127.0.0.1:9/v1"
    clear_cache()
    try:
        with pytest.raises(Exception, match="127.0.0.1:9"):
            consolidation.consolidation_run(subject=subject)
    finally:
        settings.ENGRAM_EMBEDDER = "minilm"
        clear_cache()
    run = ConsolidationRun.objects.get(subject=subject, status="failed")
    body = _client(subject).get(f"/api/v1/subjects/{subject.external_id}/consolidations/{run.pk}").json()
    assert body["error"]["code"] == "internal_error" and "EmbeddingError" in body["error"]["message"]
    assert "127.0.0.1" not in str(body) and "http" not in str(body["error"])
