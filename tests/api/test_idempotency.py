"""Idempotency-Key: a retried write gets the first response and writes nothing twice."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from engram_core.errors import Conflict
from engram_core.es.schema import MemoryType
from memory_app.idempotency import idempotency_claim, idempotency_purge
from memory_app.models import IdempotencyRecord
from memory_app.services import facts
from tenants.models import AgentToken, Subject

TURN = "/api/v1/subjects/alice/turns"


def post(api, path, body, key):
    return api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_retry_returns_the_first_response_and_writes_once(api, docs):
    first = post(api, TURN, {"text": "I moved to Hamburg"}, "key-1")
    again = post(api, TURN, {"text": "I moved to Hamburg"}, "key-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
    # Equal JSON, spaced differently, is the same request.
    spaced = api.post(TURN, data='{ "text" :  "I moved to Hamburg" }', content_type="application/json",
                      HTTP_IDEMPOTENCY_KEY="key-1")
    assert spaced.json() == first.json()
    subject = Subject.objects.get(external_id="alice")
    assert [d["id"] for d in docs(MemoryType.EPISODIC, user_id=subject.user_id)] == [first.json()["id"]]
    # A new key is a new write.
    assert post(api, TURN, {"text": "I moved to Hamburg"}, "key-2").json()["id"] != first.json()["id"]


def test_every_write_endpoint_is_idempotent(api, docs):
    fact = post(api, "/api/v1/subjects/bob/memories", {"type": "semantic", "text": "Bob likes tea"}, "f").json()
    playbook = post(api, "/api/v1/subjects/bob/memories",
                    {"type": "procedural", "trigger": "t", "steps": "s"}, "p").json()
    for _ in range(2):
        outcome = post(api, f"/api/v1/subjects/bob/playbooks/{playbook['id']}/outcome", {"success": True}, "o")
        assert outcome.status_code == 200
    assert outcome.json()["memory"]["success_count"] == 1
    for _ in range(2):
        forgotten = api.delete(f"/api/v1/subjects/bob/memories/{fact['id']}?reason=user_request",
                               HTTP_IDEMPOTENCY_KEY="forget")
        assert forgotten.status_code == 200 and forgotten.json()["status"] == "applied"
    for _ in range(2):
        imported = post(api, "/api/v1/subjects/bob/episodes:import",
                        {"episodes": [{"text": "old", "occurred_at": "2020-01-01T00:00:00Z"}]}, "import")
        assert imported.status_code == 201
    subject = Subject.objects.get(external_id="bob")
    assert len(docs(MemoryType.EPISODIC, user_id=subject.user_id)) == 1
    assert len(docs(MemoryType.SEMANTIC, user_id=subject.user_id)) == 0


def test_the_same_key_for_another_request_is_refused(api):
    post(api, TURN, {"text": "first"}, "k")
    for response in (post(api, TURN, {"text": "second"}, "k"),
                     post(api, "/api/v1/subjects/bob/turns", {"text": "first"}, "k")):
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "idempotency_key_reused"


def test_keys_belong_to_their_token(api, make_token):
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token()}")
    a = post(api, TURN, {"text": "hello"}, "shared").json()
    b = post(other, TURN, {"text": "hello"}, "shared").json()
    assert a["id"] != b["id"]


def test_client_errors_are_replayed_too(api):
    first = post(api, TURN, {"text": ""}, "bad")
    assert first.status_code == 400
    assert post(api, TURN, {"text": ""}, "bad").json() == first.json()


def test_a_key_in_use_is_409_and_a_dead_request_is_taken_over(api):
    token = AgentToken.objects.get()
    body = {"text": "hello"}
    first = post(api, TURN, body, "busy")
    record = IdempotencyRecord.objects.get(key="busy")
    # Pretend the first request is still running.
    IdempotencyRecord.objects.filter(pk=record.pk).update(status_code=None, response_body=None,
                                                          locked_at=timezone.now())
    busy = post(api, TURN, body, "busy")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "idempotency_key_in_use"
    assert busy["Retry-After"] == "1"
    # ... or died long ago (after its write landed): the retry runs again with the same memory id
    # and gets the memory the first run stored, not a conflict with itself.
    IdempotencyRecord.objects.filter(pk=record.pk).update(locked_at=timezone.now() - timedelta(hours=1))
    retry = post(api, TURN, body, "busy")
    assert retry.status_code == 201 and retry.json()["id"] == first.json()["id"]
    assert retry.json()["memory"]["text"] == "hello"
    assert token.pk == record.token_id


def test_a_server_error_releases_the_key_and_the_retry_reuses_the_memory_id(api, monkeypatch):
    real = facts.fact_store
    calls = []

    def flaky(**kwargs):
        calls.append(kwargs["memory_id"])
        if len(calls) == 1:
            raise RuntimeError("transient bug")
        return real(**kwargs)

    monkeypatch.setattr(facts, "fact_store", flaky)
    api.raise_request_exception = False
    body = {"type": "semantic", "text": "Alice likes tea"}
    assert post(api, "/api/v1/subjects/alice/memories", body, "retry-me").status_code == 500
    second = post(api, "/api/v1/subjects/alice/memories", body, "retry-me")
    assert second.status_code == 201 and calls[0] == calls[1] == second.json()["id"]


def test_claims_race_on_the_unique_constraint(memory, tenant):
    from tenants.services.tokens import agent_token_create

    token, _ = agent_token_create(tenant=tenant, name="t", scopes=["memory:write"], actor="tests")
    args = dict(token=token, key="race", method="POST", path="/p", fingerprint="f", lock_seconds=120)
    assert idempotency_claim(**args).record is not None
    with pytest.raises(Conflict):
        idempotency_claim(**args)


def test_invalid_keys_and_expiry(api):
    assert post(api, TURN, {"text": "x"}, "ü" * 3).status_code == 400
    assert post(api, TURN, {"text": "x"}, "k" * 256).json()["error"]["code"] == "invalid_idempotency_key"
    post(api, TURN, {"text": "x"}, "old")
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(days=2))
    assert idempotency_purge(ttl_hours=24) == 1


def test_a_stored_response_is_kept_under_the_end_users_id_as_stored_so_forget_and_erase_reach_it(api):
    """A client that leaves a space in the URL's end-user id addresses the same end-user; its
    stored responses must be found by that end-user's forget and erase."""
    turn = post(api, "/api/v1/subjects/alice%20/turns", {"text": "my locker code is quixotrel"}, "spaced").json()
    assert IdempotencyRecord.objects.get(key="spaced").external_id == "alice"
    api.delete(f"/api/v1/subjects/alice/memories/{turn['id']}?reason=user_request")
    assert "quixotrel" not in json.dumps(IdempotencyRecord.objects.get(key="spaced").response_body)
    api.delete("/api/v1/subjects/alice")
    assert not IdempotencyRecord.objects.filter(key="spaced").exists()
