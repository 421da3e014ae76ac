"""One error format for every 4xx/5xx: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from engram_core.errors import NotFound, ValidationFailed
from api import apis
from memory_app.validation import Limits
from tenants.services.keys import KeyLifetimes
from memory_app.services.context import ContextOptions


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer eng_nope", "Basic dXNlcjpwYXNz",
                                    "Bearer eng_0123456789ab_" + "x" * 43])
def test_missing_or_bad_tokens_are_401(db, header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.post("/api/v1/subjects/alice/recall", {"query": "x"}, format="json")
    _error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="engram"'


def test_a_revoked_token_is_401(memory, tenant):
    from tenants.services.tokens import agent_token_create, agent_token_revoke

    token, raw = agent_token_create(tenant=tenant, name="t", scopes=["memory:read"], actor="tests")
    agent_token_revoke(token=token, actor="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    _error(client.post("/api/v1/subjects/alice/recall", {"query": "x"}, format="json"), 401, "unauthenticated")


@pytest.mark.parametrize(("scopes", "method", "path", "needed"), [
    (["memory:read"], "post", "/api/v1/subjects/a/turns", "memory:write"),
    (["memory:write"], "post", "/api/v1/subjects/a/recall", "memory:read"),
    (["memory:write"], "delete", "/api/v1/subjects/a/memories/abcdefgh?reason=other", "memory:forget"),
    (["memory:write", "memory:read", "memory:forget"], "delete", "/api/v1/subjects/a", "subject:erase"),
    (["memory:write", "memory:read", "memory:forget"], "post", "/api/v1/subjects", "tenant:admin"),
    (["memory:write", "memory:read", "memory:forget"], "post", "/api/v1/catalog/entries", "tenant:admin"),
    (["tenant:admin"], "get", "/api/v1/subjects/a/export", "memory:read"),
])
def test_each_endpoint_needs_its_scope(make_token, scopes, method, path, needed):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(*scopes)}")
    error = _error(getattr(client, method)(path, {}, format="json"), 403, "insufficient_scope")
    assert needed in error["details"]["required_scope"]


def test_validation_errors_name_the_fields(api):
    error = _error(api.post("/api/v1/subjects/a/recall", {"k": 0, "types": ["nope"]}, format="json"),
                   400, "invalid")
    assert set(error["details"]["fields"]) == {"query", "k", "types"}
    error = _error(api.post("/api/v1/subjects/a/memories", {"type": "semantic"}, format="json"), 400, "invalid")
    assert "text" in error["details"]["fields"]
    _error(api.post("/api/v1/subjects/a/memories", {"type": "episodic", "text": "x"}, format="json"),
           400, "invalid_memory_type")
    _error(api.post("/api/v1/subjects/a/memories", ["not", "an", "object"], format="json"), 400, "invalid_memory_type")
    for kind in (["semantic"], {"a": 1}, 1, None):  # schemathesis sent a nested list: a TypeError answered 500
        _error(api.post("/api/v1/subjects/a/memories", {"type": kind, "text": "x"}, format="json"),
               400, "invalid_memory_type")
    _error(api.post("/api/v1/subjects/a/turns", ["not", "an", "object"], format="json"), 400, "invalid")


@pytest.mark.parametrize(("method", "path", "body", "misspelt"), [
    ("post", "/api/v1/subjects/u/turns", {"text": "I moved to Lyon", "sesion_id": "s1"}, "sesion_id"),
    ("post", "/api/v1/subjects/u/turns", {"text": "I moved to Lyon", "ocurred_at": "2025-01-01T00:00:00Z"},
     "ocurred_at"),
    ("post", "/api/v1/subjects/u/memories", {"type": "semantic", "text": "Lives in Lyon", "supersede": ["x" * 8]},
     "supersede"),
    ("post", "/api/v1/subjects/u/memories", {"type": "semantic", "text": "Lives in Lyon", "trigger": "moving"},
     "trigger"),
    ("post", "/api/v1/subjects/u/episodes:import",
     {"episodes": [{"text": "I moved to Lyon", "occurred_at": "2025-01-01T00:00:00Z", "sesion_id": "s1"}]},
     "episodes"),
    ("post", "/api/v1/subjects", {"external_id": "u2", "display": "U"}, "display"),
    ("post", "/api/v1/catalog/entries", {"title": "Moving", "text": "How to move", "tags": ["x"]}, "tags"),
])
def test_a_field_the_operation_does_not_take_is_refused_and_nothing_is_written(api, method, path, body, misspelt):
    """A misspelt field would otherwise be dropped: the turn stored outside its session, dated now,
    the old fact left current."""
    api.post("/api/v1/subjects", {"external_id": "u"}, format="json")
    error = _error(getattr(api, method)(path, body, format="json"), 400, "invalid")
    assert misspelt in error["details"]["fields"]
    if misspelt == "episodes":  # nested: the episode's own field, by position
        assert error["details"]["fields"]["episodes"] == {"0": {"sesion_id": [
            "Unknown field; this accepts text, occurred_at, role, session_id, context, metadata, id."]}}
    export = api.get("/api/v1/subjects/u/export").json()
    assert export["memories"] == {"episodic": [], "semantic": [], "procedural": []}
    assert api.get("/api/v1/subjects/u2/export").status_code == 404


def test_an_unknown_field_is_reported_with_the_invalid_ones(api):
    error = _error(api.post("/api/v1/subjects/a/recall", {"k": 0, "typs": ["semantic"]}, format="json"),
                   400, "invalid")
    assert set(error["details"]["fields"]) == {"query", "k", "typs"}
    error = _error(api.delete("/api/v1/subjects/a/memories/abcdefgh?reason=other&hard=1"), 400, "invalid")
    assert set(error["details"]["fields"]) == {"hard"}


@pytest.mark.parametrize("metadata", [{"note": "a\u0000b"}, {"a\u0000b": 1}, {"nested": ["x", {"y": "\u0000"}]}])
def test_metadata_with_a_nul_character_is_refused_and_nothing_is_written(api, tenant, metadata):
    """PostgreSQL's jsonb holds no NUL character: the outbox and the idempotency records (which keep
    the answer, metadata included) could not store one, so the edge refuses it as text fields do."""
    from memory_app.commands import write_command

    _error(api.post("/api/v1/subjects/n/turns", {"text": "hello", "metadata": metadata}, format="json",
                    HTTP_IDEMPOTENCY_KEY="nul-1"), 400, "parse_error")  # the body as a whole
    _error(api.post("/api/v1/subjects/n/episodes:import", {"episodes": [
        {"text": "hello", "occurred_at": "2025-01-01T00:00:00Z", "metadata": metadata}]}, format="json"),
        400, "parse_error")
    assert api.get("/api/v1/subjects/n/export").status_code == 404  # no write created the end-user
    with pytest.raises(ValidationFailed) as refused:  # the check every path shares
        write_command(tenant=tenant, external_id="n", operation="episode",
                      payload={"text": "hello", "metadata": metadata}, limits=Limits.from_settings(),
                      context_options=ContextOptions.from_settings(), lifetimes=KeyLifetimes.from_settings())
    assert refused.value.code == "invalid_metadata"


def test_a_memory_id_no_memory_can_have_is_unknown_even_behind_queued_writes(api, tenant):
    """A control character in an id: 404 as for any unknown memory, found at acceptance, so a forget
    queued behind the end-user's writes never carries it into the outbox (PostgreSQL refused the NUL
    with a 500)."""
    from memory_app.commands import write_command

    api.post("/api/v1/subjects/c/turns", {"text": "hello"}, format="json")
    for path, status, code in (("abcdefgh%01ij", 404, "not_found"), ("abcdefgh%00ij", 400, "invalid")):
        _error(api.get(f"/api/v1/subjects/c/memories/{path}"), status, code)
        _error(api.get(f"/api/v1/subjects/c/memories/{path}/history"), status, code)
        _error(api.delete(f"/api/v1/subjects/c/memories/{path}?reason=other"), status, code)
        _error(api.post(f"/api/v1/subjects/c/playbooks/{path}/outcome", {"success": True}, format="json"),
               status, code)
    for impossible in ("abcdefgh\x00ij", "a" * 65):  # the outbox's column holds 64
        with pytest.raises(NotFound):
            write_command(tenant=tenant, external_id="c", operation="forget", payload={"reason": "other"},
                          limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
                          lifetimes=KeyLifetimes.from_settings(), memory_id=impossible)
    _error(api.post("/api/v1/subjects/c/memories", {"type": "semantic", "text": "x",
                                                    "supersedes": ["abcdefgh\u0001ij"]}, format="json"),
           400, "invalid_ids")
    with pytest.raises(ValidationFailed):  # MCP's path: the check every path shares, not the serializer
        write_command(tenant=tenant, external_id="c", operation="fact",
                      payload={"text": "x", "supersedes": ["abcdefgh\x00ij"]}, limits=Limits.from_settings(),
                      context_options=ContextOptions.from_settings(), lifetimes=KeyLifetimes.from_settings())


def test_an_error_that_echoes_a_nul_character_is_still_answered_with_an_idempotency_key(api):
    """An idempotency record keeps the answer; an answer naming what the caller sent (an unknown
    field, an unknown id) may hold a NUL, which PostgreSQL cannot store."""
    api.post("/api/v1/subjects/e/turns", {"text": "hello"}, format="json")
    _error(api.delete("/api/v1/subjects/e/memories/abcdefgh%01ij?reason=other", HTTP_IDEMPOTENCY_KEY="nul-a"),
           404, "not_found")
    _error(api.delete("/api/v1/subjects/e/memories/abcdefgh%00ij?reason=other", HTTP_IDEMPOTENCY_KEY="nul-d"),
           400, "invalid")  # a NUL anywhere in a request: refused before any view (RefuseNulMiddleware)
    _error(api.delete("/api/v1/subjects/e/memories/abcdefgh?reason=other%00", HTTP_IDEMPOTENCY_KEY="nul-e"),
           400, "invalid")
    error = _error(api.post("/api/v1/subjects/e/turns", {"text": "hi", "b\u0000d": 1}, format="json",
                            HTTP_IDEMPOTENCY_KEY="nul-b"), 400, "parse_error")
    again = api.post("/api/v1/subjects/e/turns", {"text": "hi", "b\u0000d": 1}, format="json",
                     HTTP_IDEMPOTENCY_KEY="nul-b")
    assert again.status_code == 400 and again.json()["error"] == error
    _error(api.post("/api/v1/subjects/a%01b/turns", {"text": "hi"}, format="json", HTTP_IDEMPOTENCY_KEY="nul-c"),
           400, "invalid_external_id")


def test_steps_are_text_or_a_list_of_steps_as_over_mcp(api):
    created = api.post("/api/v1/subjects/p/memories", {"type": "procedural", "trigger": "The router drops Wi-Fi",
                                                       "steps": ["Reboot it", " ", "Change the channel "]},
                       format="json")
    assert created.status_code == 201, created.content
    assert created.json()["memory"]["steps"] == "Reboot it\nChange the channel"
    outcome = api.post(f"/api/v1/subjects/p/playbooks/{created.json()['id']}/outcome",
                       {"success": True, "refined_steps": ["Change the channel first"]}, format="json")
    assert outcome.json()["memory"]["refined_steps"] == "Change the channel first"
    for bad in ([1, 2], {"a": "b"}, 7):
        error = _error(api.post("/api/v1/subjects/p/memories", {"type": "procedural", "trigger": "t", "steps": bad},
                                format="json"), 400, "invalid")
        assert "steps" in error["details"]["fields"]
    _error(api.post("/api/v1/subjects/p/memories", {"type": "procedural", "trigger": "t", "steps": [" "]},
                    format="json"), 400, "empty_text")
    assert len(api.get("/api/v1/subjects/p/export").json()["memories"]["procedural"]) == 1


def test_a_new_end_user_needs_an_id_the_urls_can_name(api, tenant):
    """"a/b" could be created but never addressed as /subjects/<external_id>/…; an existing one keeps working."""
    from tenants.models import Subject

    for bad in ("a/b", ".", ".."):
        error = _error(api.post("/api/v1/subjects", {"external_id": bad}, format="json"), 400, "invalid_external_id")
        assert error["details"] == {"field": "external_id"}
    assert not Subject.objects.filter(tenant=tenant).exists()
    for fine in ("a b", "user@example.com", "a.b", "名前"):
        assert api.post("/api/v1/subjects", {"external_id": fine}, format="json").status_code == 201, fine


def test_the_admin_form_refuses_an_unaddressable_end_user_id(tenant):
    from django.core.exceptions import ValidationError

    from tenants.models import Subject

    with pytest.raises(ValidationError) as refused:
        Subject(tenant=tenant, external_id="a/b").full_clean()
    assert "external_id" in refused.value.message_dict
    Subject(tenant=tenant, external_id="a b").full_clean()


def test_a_bound_that_is_a_setting_is_the_settings_of_the_request(api, settings):
    """Read when the request is validated, not when apis.py was imported."""
    for limit in (3, 5):
        settings.ENGRAM_RECALL_MAX_K, settings.ENGRAM_MAX_SUPERSEDES, settings.ENGRAM_MAX_IMPORT_EPISODES = limit, limit, limit
        error = _error(api.post("/api/v1/subjects/a/recall", {"query": "x", "k": limit + 1}, format="json"),
                       400, "invalid")
        assert set(error["details"]["fields"]) == {"k"} and str(limit) in str(error["details"]["fields"]["k"])
        error = _error(api.post("/api/v1/subjects/a/memories", {"type": "semantic", "text": "Lives in Lyon",
                                                                "supersedes": ["x" * 8] * (limit + 1)},
                                format="json"), 400, "invalid")
        assert set(error["details"]["fields"]) == {"supersedes"}
        episodes = [{"text": "I moved", "occurred_at": "2025-01-01T00:00:00Z"}] * (limit + 1)
        error = _error(api.post("/api/v1/subjects/a/episodes:import", {"episodes": episodes}, format="json"),
                       400, "invalid")
        assert set(error["details"]["fields"]) == {"episodes"}


def test_service_validation_errors_keep_their_codes(api, settings):
    settings.ENGRAM_MAX_TEXT_CHARS = 10
    error = _error(api.post("/api/v1/subjects/a/turns", {"text": "much longer than ten"}, format="json"),
                   400, "text_too_long")
    assert error["details"] == {"field": "text", "length": 20, "limit": 10}


def test_an_unknown_time_zone_is_refused_and_a_turn_that_names_one_stores_nothing(api):
    api.post("/api/v1/subjects/tz/turns", {"text": "hello"}, format="json")
    error = _error(api.post("/api/v1/subjects/tz/recall", {"query": "what did I say yesterday?",
                                                            "timezone": "Mars/Olympus_Mons"}, format="json"),
                   400, "invalid_timezone")
    assert error["details"] == {"field": "timezone"}
    _error(api.post("/api/v1/subjects/tz/turns", {"text": "I fixed the gate yesterday", "timezone": "../etc/passwd"},
                    format="json"), 400, "invalid_timezone")
    export = api.get("/api/v1/subjects/tz/export").json()
    assert [e["text"] for e in export["memories"]["episodic"]] == ["hello"]  # the refused turn was not stored
    ok = api.post("/api/v1/subjects/tz/recall", {"query": "what did I say yesterday?", "timezone": "Europe/Paris"},
                  format="json")
    assert ok.status_code == 200, ok.content


def test_unknown_end_users_and_memories_are_404(api):
    _error(api.get("/api/v1/subjects/nobody/export"), 404, "not_found")
    api.post("/api/v1/subjects/known/turns", {"text": "hello"}, format="json")
    error = _error(api.get("/api/v1/subjects/known/memories/0123456789abcdef"), 404, "not_found")
    assert error["details"] == {"id": "0123456789abcdef"}
    _error(api.get("/api/v1/no/such/endpoint"), 404, "not_found")
    _error(api.post("/api/v1/subjects/known/turns/extra", {}, format="json"), 404, "not_found")
    # Found by the schemathesis run (seed 2999680042): a line break in a path segment.
    _error(api.get("/api/v1/subjects/known/consolidations/%C2%A9%0A%C2%B3"), 404, "not_found")
    _error(api.get("/api/v1/operations/00000000-0000-0000-0000-000000000000"), 404, "not_found")


def test_bad_path_values_are_refused(api):
    _error(api.post("/api/v1/subjects/%01bad/turns", {"text": "x"}, format="json"), 400, "invalid_external_id")
    _error(api.post("/api/v1/subjects/" + "x" * 201 + "/turns", {"text": "x"}, format="json"),
           400, "invalid_external_id")


def test_wrong_method_parse_error_and_media_type(api):
    response = api.get("/api/v1/subjects/a/turns")
    _error(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST"
    _error(api.options("/api/v1/subjects/a/turns"), 405, "method_not_allowed")
    _error(api.post("/api/v1/subjects/a/turns", data="{not json", content_type="application/json"),
           400, "parse_error")
    _error(api.post("/api/v1/subjects/a/turns", data="text=x", content_type="application/x-www-form-urlencoded"),
           415, "unsupported_media_type")
    _error(api.post("/api/v1/subjects/a/turns", data='{"text": NaN}', content_type="application/json"),
           400, "parse_error")


def test_bodies_over_the_limit_are_413(api, settings):
    settings.ENGRAM_API_MAX_BODY_BYTES = 1000
    error = _error(api.post("/api/v1/subjects/a/turns", {"text": "x" * 2000}, format="json"), 413,
                   "request_too_large")
    assert error["details"] == {"limit_bytes": 1000}
    # Imports have their own, larger limit.
    settings.ENGRAM_API_MAX_IMPORT_BODY_BYTES = 5000
    episodes = [{"text": "x" * 100, "occurred_at": "2024-01-01T00:00:00Z"}] * 10
    assert api.post("/api/v1/subjects/a/episodes:import", {"episodes": episodes}, format="json").status_code == 201
    _error(api.post("/api/v1/subjects/a/episodes:import", {"episodes": episodes * 5}, format="json"), 413,
           "request_too_large")


def test_rate_limit_per_token_with_retry_after(make_token, settings):
    settings.ENGRAM_API_RATES = {**settings.ENGRAM_API_RATES, "agent": "3/minute"}
    first, second = APIClient(), APIClient()
    first.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token()}")
    second.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token()}")
    for _ in range(3):
        assert first.post("/api/v1/subjects/nobody/recall", {"query": "x"}, format="json").status_code == 404
    response = first.post("/api/v1/subjects/nobody/recall", {"query": "x"}, format="json")
    error = _error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60 and error["details"]["retry_after"] == int(response["Retry-After"])
    # Another token of the same tenant has its own budget.
    assert second.post("/api/v1/subjects/nobody/recall", {"query": "x"}, format="json").status_code == 404


@pytest.mark.parametrize("shared", [False, True], ids=["process cache", "shared Redis"])
def test_the_rate_limit_holds_for_concurrent_requests_of_one_token(shared, request, monkeypatch, settings):
    import uuid
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from api.auth import TokenRateThrottle

    if shared:
        monkeypatch.setattr(TokenRateThrottle, "cache", request.getfixturevalue("shared_redis_cache"))
    clock = [1_000_000.0]
    monkeypatch.setattr(TokenRateThrottle, "timer", lambda self: clock[0])
    settings.ENGRAM_API_RATES = {**settings.ENGRAM_API_RATES, "agent": "50/minute"}
    request = SimpleNamespace(auth=SimpleNamespace(pk=uuid.uuid4().hex))

    def one(_):
        return TokenRateThrottle().allow_request(request, None)

    with ThreadPoolExecutor(8) as pool:  # eight requests of the token at a time, 200 in all
        assert sum(pool.map(one, range(200))) == 50
    refused = TokenRateThrottle()
    assert refused.allow_request(request, None) is False
    assert refused.wait() == pytest.approx(60.0)  # the oldest of the 50 leaves the period in a minute
    clock[0] += 30
    assert TokenRateThrottle().allow_request(request, None) is False
    clock[0] += 30.5  # the first 50 are older than the period now
    assert sum(one(n) for n in range(60)) == 50


def test_unexpected_errors_are_a_logged_content_free_500(api, monkeypatch, caplog):
    api.post("/api/v1/subjects/a/turns", {"text": "hello"}, format="json")

    def boom(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(apis, "memory_recall", boom)
    api.raise_request_exception = False
    with caplog.at_level(logging.ERROR):
        response = api.post("/api/v1/subjects/a/recall", {"query": "x"}, format="json")
    error = _error(response, 500, "internal_error")
    assert "secret" not in response.content.decode() and error["details"] == {}
    assert any("secret internals" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_elasticsearch_down_answers_reads_with_503_and_retry_after(api, es_down):
    api.post("/api/v1/subjects/a/turns", {"text": "hello"}, format="json")
    es_down.start()
    for response in (api.post("/api/v1/subjects/a/recall", {"query": "hello"}, format="json"),
                     api.get("/api/v1/subjects/a/export")):
        error = _error(response, 503, response.json()["error"]["code"])
        assert error["code"] in ("elasticsearch_unavailable", "elasticsearch_unreachable")
        assert response["Retry-After"] == "10"


def _locked_writes(execute, sql, params, many, context):
    """A Django execute wrapper: every write fails the way a SQLite file locked past its busy
    timeout fails (the database layer itself raises; nothing above it is replaced)."""
    if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
        from django.db import OperationalError

        raise OperationalError("database is locked")
    return execute(sql, params, many, context)


def test_a_locked_database_answers_503_with_retry_after_never_500(api):
    from django.db import connection

    with connection.execute_wrapper(_locked_writes):
        response = api.post("/api/v1/subjects", {"external_id": "newcomer"}, format="json")

    error = _error(response, 503, "database_busy")
    assert response["Retry-After"] == "2" and error["details"] == {"retry_after": 2}


def test_reads_still_answer_while_the_database_refuses_writes(api, tenant):
    # The agent token's last-used stamp is bookkeeping: a busy database skips it, the read goes on.
    from django.db import connection

    from tenants.services.subjects import subject_get_or_create

    subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    with connection.execute_wrapper(_locked_writes):
        response = api.post("/api/v1/subjects/alice/recall", {"query": "anything"}, format="json")

    assert response.status_code == 200, response.content


def test_the_token_stamp_is_written_at_most_once_a_minute(api, tenant):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            api.get("/api/v1/subjects/nobody/export")
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "agenttoken" in q["sql"]]
    assert len(updates) == 1


def _operations() -> list[tuple[str, str, bool]]:
    """Every operation of the API's schema: (method, path with sample values, whether it takes a body)."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    samples = {"{external_id}": "alice", "{memory_id}": "abcdefgh12", "{run_id}": "1",
               "{uid}": "00000000-0000-0000-0000-000000000000"}
    out = []
    for path, methods in schema["paths"].items():
        for sample, value in samples.items():
            path = path.replace(sample, value)
        for method, operation in methods.items():
            out.append((method, path, "requestBody" in operation))
    return out


def test_a_body_nested_five_thousand_levels_deep_is_a_parse_error_on_every_endpoint(api, tenant):
    from tests.strategies import nested_json_text

    api.post("/api/v1/subjects/alice/turns", {"text": "hello"}, format="json")  # the end-user exists
    deep = '{"text": "hi", "metadata": ' + nested_json_text(5000) + "}"
    operations = _operations()
    assert len(operations) >= 15
    for method, path, takes_body in operations:
        response = api.generic(method.upper(), path, data=deep, content_type="application/json")
        assert response.status_code < 500, (method, path, response.content[:300])
        if takes_body:
            error = _error(response, 400, "parse_error")
            assert "levels deep" in error["message"], (method, path, error)


def test_a_body_nested_within_the_limit_is_read(api):
    from api.parsers import MAX_JSON_DEPTH
    from tests.strategies import nested_json

    # The body and its metadata object are two levels: metadata's values may nest the rest.
    fine = {"text": "deep but fine", "metadata": {"a": nested_json(MAX_JSON_DEPTH - 2)}}
    written = api.post("/api/v1/subjects/alice/turns", fine, format="json")
    assert written.status_code == 201, written.content[:300]
    deeper = {"text": "too deep", "metadata": {"a": nested_json(MAX_JSON_DEPTH - 1)}}
    _error(api.post("/api/v1/subjects/alice/turns", deeper, format="json"), 400, "parse_error")


@pytest.mark.parametrize("occurred_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2024-02-30T10:00:00Z"])
def test_an_occurred_at_outside_the_calendar_is_refused_and_stores_nothing(api, occurred_at):
    for path, body in (("turns", {"text": "edge"}), ("memories", {"type": "episodic", "text": "edge"}),
                       ("episodes:import", {"episodes": [{"text": "edge"}]})):
        if path == "episodes:import":
            body["episodes"][0]["occurred_at"] = occurred_at
        else:
            body["occurred_at"] = occurred_at
        response = api.post(f"/api/v1/subjects/edge/{path}", body, format="json")
        assert response.status_code == 400, (path, response.content[:300])
    _error(api.get("/api/v1/subjects/edge/export"), 404, "not_found")  # not even the end-user was created


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_recall_window_outside_the_calendar_is_refused(api, since):
    api.post("/api/v1/subjects/alice/turns", {"text": "hello"}, format="json")
    for field in ("since", "until"):
        error = _error(api.post("/api/v1/subjects/alice/recall", {"query": "hello", field: since}, format="json"),
                       400, "invalid_datetime")
        assert error["details"] == {"field": field}


_SHORT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=8)


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.sampled_from(["ok", "t" * 61]), context=st.sampled_from([None, "before", "c" * 61]),
       session_id=st.sampled_from([None, "s1"]),
       metadata=st.one_of(st.none(), st.dictionaries(_SHORT, _SHORT, max_size=6)))
def test_the_rest_edge_and_the_direct_service_refuse_an_episode_alike(api, tenant, settings, text, context,
                                                                       session_id, metadata):
    """The edge checks a turn once, and what it refuses the service refuses with the same code
    when called directly (the eval, seed, consolidation), whichever of several bad fields comes
    first: one cleaning constructor for both. (Values the serializer itself refuses, ``invalid``,
    are left out: they never reach the shared check.)"""
    from memory_app.services.episodes import episode_write
    from tenants.services.subjects import subject_get_or_create

    settings.ENGRAM_MAX_TEXT_CHARS, settings.ENGRAM_MAX_METADATA_BYTES = 60, 60
    payload = {"text": text, "context": context, "session_id": session_id, "metadata": metadata}
    response = api.post("/api/v1/subjects/alike/turns", payload, format="json")
    assert response.status_code in (201, 400), response.content
    edge = response.json()["error"]["code"] if response.status_code == 400 else None
    subject = subject_get_or_create(tenant=tenant, external_id="alike", lifetimes=KeyLifetimes.from_settings())
    try:
        episode_write(subject=subject, **payload)
        direct = None
    except ValidationFailed as exc:
        direct = exc.code
    assert edge == direct


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["semantic", "procedural"]), text=st.sampled_from(["ok", "t" * 61]),
       supersedes=st.sampled_from([None, [], ["abcdefgh\u0001ij"]]),
       metadata=st.one_of(st.none(), st.dictionaries(_SHORT, _SHORT, max_size=6)))
def test_the_rest_edge_and_the_direct_services_refuse_a_fact_or_a_playbook_alike(api, tenant, settings, kind, text,
                                                                                supersedes, metadata):
    """As for episodes: a fact or a playbook the edge refuses, ``fact_write`` / ``playbook_write``
    called directly (consolidation, the eval) refuse with the same code."""
    from memory_app.services.facts import fact_write, playbook_write
    from tenants.services.subjects import subject_get_or_create

    settings.ENGRAM_MAX_TEXT_CHARS, settings.ENGRAM_MAX_METADATA_BYTES = 60, 60
    fields = {"text": text} if kind == "semantic" else {"trigger": "when asked", "steps": text}
    payload = {**fields, "supersedes": supersedes, "metadata": metadata}
    response = api.post("/api/v1/subjects/alike/memories", {"type": kind, **payload}, format="json")
    assert response.status_code in (201, 400), response.content
    edge = response.json()["error"]["code"] if response.status_code == 400 else None
    subject = subject_get_or_create(tenant=tenant, external_id="alike", lifetimes=KeyLifetimes.from_settings())
    try:
        (fact_write if kind == "semantic" else playbook_write)(subject=subject, **payload)
        direct = None
    except ValidationFailed as exc:
        direct = exc.code
    assert edge == direct

@pytest.mark.parametrize("as_of", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
def test_a_recall_as_of_at_the_calendars_edges_is_answered(api, as_of):
    """The moments the calendar holds: a question is read as asked then (its date arithmetic held at
    the calendar's edge: "now - 30 days", a window's end plus its grace raised OverflowError, a 500)."""
    api.post("/api/v1/subjects/alice/turns", {"text": "I moved to Lyon", "occurred_at": "2025-01-01T00:00:00Z"},
             format="json")
    for query in ("what happened yesterday", "where did I live in 2024"):
        answer = api.post("/api/v1/subjects/alice/recall", {"query": query, "as_of": as_of}, format="json")
        assert answer.status_code == 200, answer.content


# ---------------------------------------------------------------- any JSON value in any field

from hypothesis import HealthCheck, example, given, settings as hypothesis_settings, strategies as st  # noqa: E402

from tests.strategies import json_scalars, nested_json, texts  # noqa: E402

# tests.strategies.json_values, nested at most a few hundred levels (json.dumps writes them; the parser
# refuses past 128 either way).
_any_json = st.one_of(st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                                   | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12),
                      st.integers(100, 300).map(nested_json))

# Each JSON-body operation with a body it accepts: the property puts a JSON value of any type in
# some of its fields (a known field, an unknown one, or the whole body), as a client may.
_EPISODE = {"text": "I moved to Lyon", "occurred_at": "2025-01-01T00:00:00Z", "role": "user", "session_id": "s1",
            "context": "before", "metadata": {"k": 1}, "id": "client-0001"}
_BODIES = {
    "/api/v1/subjects": {"external_id": "typed", "display_name": "T"},
    "/api/v1/subjects/typed/turns": {"text": "I moved to Lyon", "occurred_at": "2025-01-01T00:00:00Z",
                                     "session_id": "s1", "context": "c", "metadata": {"k": 1}, "k": 3,
                                     "types": ["semantic"], "include_superseded": False, "explain": True,
                                     "timezone": "Europe/Paris"},
    "/api/v1/subjects/typed/recall": {"query": "Lyon", "k": 3, "types": ["episodic"],
                                      "since": "2024-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z",
                                      "as_of": "2025-06-01T00:00:00Z", "include_superseded": True, "explain": True,
                                      "timezone": "UTC"},
    "/api/v1/subjects/typed/memories": {"type": "semantic", "text": "Lives in Lyon", "confidence": 0.5,
                                        "supersedes": ["abcdefgh"], "contradiction": "harsh", "metadata": {"k": 1},
                                        "supporting_episode_ids": ["abcdefgh"]},
    "/api/v1/subjects/typed/memories#procedural": {"type": "procedural", "trigger": "Wi-Fi drops",
                                                   "steps": ["Reboot"], "confidence": 1, "supersedes": None,
                                                   "contradiction": "natural", "metadata": None},
    "/api/v1/subjects/typed/playbooks/abcdefgh/outcome": {"success": True, "refined_steps": "Reboot twice"},
    "/api/v1/subjects/typed/episodes:import": {"episodes": [_EPISODE]},
    "/api/v1/subjects/typed/episodes:import#episode": _EPISODE,  # the fields of one episode
    "/api/v1/subjects/typed/consolidate": {"dry_run": True, "extractor": "rules"},
    "/api/v1/catalog/entries": {"title": "Moving", "text": "How to move", "metadata": {"k": [1, 2]}},
}


@st.composite
def _typed_requests(draw) -> tuple[str, object]:
    target = draw(st.sampled_from(sorted(_BODIES)))
    body = dict(_BODIES[target])
    if draw(st.integers(0, 9)) == 0:
        changed: object = draw(_any_json)
    else:
        for name in draw(st.lists(st.sampled_from(sorted(body)) | st.text(max_size=8), min_size=1, max_size=3)):
            body[name] = draw(_any_json)
        changed = body
    path = target.split("#")[0]
    if target.endswith("#episode"):
        changed = {"episodes": [changed]}
    return path, changed


@hypothesis_settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                             HealthCheck.too_slow, HealthCheck.data_too_large])
@given(request=_typed_requests(), idempotent=st.booleans())
def test_a_value_of_any_json_type_in_any_field_is_refused_or_taken_never_a_500(api, request, idempotent):
    """The class of the nested "type" list (a TypeError answered 500): whatever JSON a field holds,
    the answer is the operation's or a 4xx in the error format, never a server error."""
    from django.core.cache import cache

    cache.clear()  # the per-token and import rate limits: every example reaches its view
    path, body = request
    headers = {"HTTP_IDEMPOTENCY_KEY": f"typed-{abs(hash(json.dumps(body, default=str)))}"} if idempotent else {}
    response = api.post(path, json.dumps(body), content_type="application/json", **headers)
    assert response.status_code < 500, (path, body, response.content[:500])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"code", "message", "details"}, error


# What a WSGI server hands Django: a header's bytes read as Latin-1, whatever the client wrote.
_header_values = st.one_of(texts, st.text(st.characters(max_codepoint=255), max_size=12),
                           st.integers(-5, 10**30).map(str)).map(
    lambda t: t.encode("utf-8", "surrogatepass").decode("latin-1"))
_REST_HEADERS = ("CONTENT_LENGTH", "CONTENT_TYPE", "HTTP_IDEMPOTENCY_KEY", "HTTP_ACCEPT", "HTTP_X_FORWARDED_FOR",
                 "HTTP_ORIGIN", "HTTP_X_FORWARDED_PROTO")


@hypothesis_settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                             HealthCheck.too_slow])
@example(headers={"CONTENT_LENGTH": "\u00b2"}, path="/api/v1/subjects")  # "²".isdigit(), but int("²") raised ValueError: a 500
@given(headers=st.dictionaries(st.sampled_from(_REST_HEADERS), _header_values, max_size=3),
       path=st.sampled_from(["/api/v1/subjects/typed/turns", "/api/v1/subjects/typed/recall", "/api/v1/subjects"]))
def test_any_header_value_is_refused_or_taken_never_a_500(api, headers, path):
    from django.core.cache import cache

    cache.clear()
    body = {"/api/v1/subjects": {"external_id": "typed"}, "/api/v1/subjects/typed/turns": {"text": "hello"},
            "/api/v1/subjects/typed/recall": {"query": "hello"}}[path]
    response = api.generic("POST", path, json.dumps(body), **{"CONTENT_TYPE": "application/json", **headers})
    assert response.status_code < 500, (headers, response.content[:500])
