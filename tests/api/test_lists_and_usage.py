"""The list endpoints the LangGraph store reads (end-users, one type of memory, by a client's key)
and the tenant's usage per day (tenant:admin), including what bad input gets: a 400, never a 5xx."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

from engram_client import EngramAPIError
from memory_app.metering import usage_add, usage_count, usage_flush
from memory_app.models import TenantUsageDay
from tests.strategies import long_numbers


def test_end_users_are_listed_by_external_id_with_their_counts(engram, make_client):
    for who in ("b-user", "a-user", "c-other"):
        engram.write_fact(who, f"{who} likes tea.")
    engram.turn("a-user", "I had coffee today.")
    page = engram.list_subjects(limit=2)
    assert [s["external_id"] for s in page["subjects"]] == ["a-user", "b-user"] and page["next_offset"] == 2
    assert page["subjects"][0]["memory_counts"] == {"episodic": 1, "semantic": 1, "procedural": 0}
    assert [s["external_id"] for s in engram.list_subjects(offset=2)["subjects"]] == ["c-other"]
    assert [s["external_id"] for s in engram.list_subjects(prefix="c-")["subjects"]] == ["c-other"]
    with pytest.raises(EngramAPIError) as refused:  # a token without memory:read
        make_client("memory:write").list_subjects()
    assert (refused.value.status, refused.value.code) == (403, "insufficient_scope")


def test_memories_of_one_type_newest_first_and_by_a_clients_key(engram):
    first = engram.write_fact("u", "The user lives in Ghent.", metadata={"key": "home"})
    engram.write_fact("u", "The user likes jazz.")
    second = engram.write_fact("u", "The user lives in Bruges.", supersedes=[first["id"]], metadata={"key": "home"})
    engram.import_episodes("u", [{"id": "my-episode-1", "text": "We met on Monday.",
                                  "occurred_at": "2025-03-03T10:00:00Z"}])
    current = engram.list_memories("u", "semantic")
    assert [m["id"] for m in current][0] == second["id"] and len(current) == 2
    assert len(engram.list_memories("u", "semantic", include_superseded=True)) == 3
    assert [m["id"] for m in engram.list_memories("u", "semantic", key="home")] == [second["id"]]
    assert [m["id"] for m in engram.list_memories("u", "semantic", key="home", include_superseded=True)] == [
        second["id"], first["id"]]
    [episode] = engram.list_memories("u", "episodic", key="my-episode-1")
    assert episode["client_id"] == "my-episode-1"
    assert engram.list_memories("u", "episodic", key="another") == []
    assert [m["id"] for m in engram.list_memories("u", "semantic", limit=1, offset=1)] == [current[1]["id"]]


@pytest.mark.parametrize("params, field", [
    ({"type": "catalog"}, "type"), ({}, "type"), ({"type": "semantic", "limit": "0"}, "limit"),
    ({"type": "semantic", "limit": "201"}, "limit"), ({"type": "semantic", "offset": "-1"}, "offset"),
    ({"type": "semantic", "sort": "x"}, "sort")])
def test_a_bad_list_query_is_a_400_naming_the_field(api, params, field):
    api.post("/api/v1/subjects/u/memories", {"type": "semantic", "text": "x"}, format="json")
    response = api.get("/api/v1/subjects/u/memories", params)
    assert response.status_code == 400 and field in response.json()["error"]["details"]["fields"]


def test_offset_beyond_elasticsearchs_window_is_a_400(api):
    api.post("/api/v1/subjects/u/memories", {"type": "semantic", "text": "x"}, format="json")
    response = api.get("/api/v1/subjects/u/memories", {"type": "semantic", "offset": "9990", "limit": "50"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_offset"


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.dictionaries(st.sampled_from(["type", "key", "limit", "offset", "include_superseded", "prefix",
                                              "days", "x"]),
                             st.one_of(st.text(max_size=30), st.integers(-10**12, 10**12).map(str), long_numbers),
                             max_size=4))
@example(query={"offset": "9" * 300})  # found by schemathesis: past PostgreSQL's bigint, the end-user list answered 500
@example(query={"type": "semantic", "offset": "9" * 300})
def test_no_list_or_usage_query_answers_5xx(api, query):
    query = {k: v.replace("\x00", "") for k, v in query.items()}
    for path in ("/api/v1/subjects", "/api/v1/subjects/nobody/memories", "/api/v1/usage"):
        assert api.get(path, query).status_code in (200, 400, 404)


def test_usage_per_day_for_a_tenant_admin_token_only(engram, make_client, tenant):
    engram.turn("u", "Hello there.")
    engram.import_episodes("u", [{"text": f"episode {n}", "occurred_at": "2025-01-01T00:00:00Z"} for n in range(3)])
    usage_add(tenant_id=tenant.pk, day=timezone.now().date() - timedelta(days=2), consolidation_runs=2,
              llm_tokens_in=120, llm_tokens_out=30)
    usage_flush()
    days = engram.usage(days=3)
    assert [d["date"] for d in days] == [(timezone.now().date() - timedelta(days=n)).isoformat() for n in range(3)]
    today, yesterday, before = days
    assert (today["requests"], today["memories_stored"]) == (2, 4)  # this usage call is counted after it answers
    assert yesterday == {**yesterday, "requests": 0, "memories_stored": 0, "consolidation_runs": 0}
    assert (before["consolidation_runs"], before["llm_tokens_in"], before["llm_tokens_out"]) == (2, 120, 30)
    with pytest.raises(EngramAPIError) as refused:
        make_client("memory:read", "memory:write").usage()
    assert refused.value.status == 403
    with pytest.raises(EngramAPIError) as refused:
        engram.usage(days=367)
    assert refused.value.status == 400


@hsettings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=8))
def test_counts_added_up_in_the_process_are_written_whole(tenant, batches):
    TenantUsageDay.objects.filter(tenant=tenant).delete()
    for requests, stored in batches:
        usage_count(tenant_id=tenant.pk, requests=requests, memories_stored=stored)
    usage_flush()
    row = TenantUsageDay.objects.filter(tenant=tenant).first()
    got = (row.requests, row.memories_stored) if row else (0, 0)
    assert got == (sum(r for r, _ in batches), sum(s for _, s in batches))
