"""Traces without content: a turn, a recall, a forget, a queued write replayed later and a
consolidation, each carrying a canary string in its text, its query, its end-user's external id
and a forget note, traced by the instrumentations production uses; the canary is in no exported
span, event, link or resource, while the raw spans (before the gate) hold it. And the traces'
shape: one trace per turn from the request to Elasticsearch, a queued write's replay in the trace
of the request that queued it, a consolidation run in a trace of its own, linked to the request."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from rest_framework.test import APIClient

from engram_core.observability.tracing import redact, tracing_setup, tracing_stop
from memory_app.tasks import consolidate_subject, replay_outbox
from tests.api.conftest import make_token, memory, module_indices, tenant  # noqa: F401 - the API's fixtures


@pytest.fixture
def spans():
    """(exported spans, raw spans): what leaves the process, and what the libraries recorded."""
    exported, raw = InMemorySpanExporter(), InMemorySpanExporter()
    tracing_setup(exporter=exported, batch=False)
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    tap = SimpleSpanProcessor(raw)  # beside the gate, to show what the gate takes out
    provider._active_span_processor.add_span_processor(tap)
    yield exported, raw
    provider._active_span_processor._span_processors = tuple(
        p for p in provider._active_span_processor._span_processors if p is not tap)
    tracing_stop()


def _everything(span) -> str:
    return span.to_json(indent=None)  # name, context, attributes, events, links, status and resource


def test_no_canary_in_any_span_and_one_trace_per_turn(spans, make_token, settings):
    exported, raw = spans
    canary = f"zebracanary{uuid.uuid4().hex[:10]}"
    external_id = f"user-{canary}@example.com"
    base = f"/api/v1/subjects/{external_id}"
    api = APIClient()  # made after tracing_setup: its handler loads the tracing middleware
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token()}")
    turn = api.post(f"{base}/turns", {"text": f"My locker code is {canary} and I live in Oslo."}, format="json")
    assert turn.status_code == 201
    assert api.post(f"{base}/recall", {"query": f"what is {canary}?", "explain": True},
                    format="json").status_code == 200
    fact = api.post(f"{base}/memories", {"type": "semantic", "text": f"The user's password hint is {canary}."},
                    format="json")
    assert fact.status_code == 201
    forget = api.delete(f"{base}/memories/{fact.json()['id']}?reason=sensitive&note=it+said+{canary}")
    assert forget.status_code == 200
    # A write queued behind the request (a background import), replayed by the worker's task.
    settings.ENGRAM_API_IMPORT_SYNC_MAX = 1
    queued = api.post(f"{base}/episodes:import", {"episodes": [
        {"text": f"{canary} one", "occurred_at": "2025-01-01T10:00:00Z"},
        {"text": f"{canary} two", "occurred_at": "2025-01-01T11:00:00Z"}]}, format="json")
    assert queued.status_code == 202
    assert replay_outbox.apply().get()["applied"] == 1
    # A consolidation queued by a request, run by the worker's task.
    consolidate = api.post(f"{base}/consolidate", {}, format="json")
    assert consolidate.status_code == 202
    from tenants.models import Subject

    subject = Subject.objects.get(external_id=external_id)
    consolidate_subject.apply(kwargs={"subject_id": subject.pk, "run_id": consolidate.json()["run"]["id"]})

    out = exported.get_finished_spans()
    # The test would see a leak: the libraries recorded the canary (paths, URLs) before the gate.
    assert any(canary in _everything(s) for s in raw.get_finished_spans())
    assert len(out) == len(raw.get_finished_spans()) > 20
    assert [s.name for s in out if canary in _everything(s)] == []

    servers = {s.attributes.get("http.route"): s for s in out if s.kind is SpanKind.SERVER}
    turn_span = servers["api/v1/subjects/<str:external_id>/turns"]
    in_turn = [s for s in out if s.context.trace_id == turn_span.context.trace_id]
    names = {s.name for s in in_turn}
    assert {"engram.turn", "engram.write", "engram.recall"} <= names
    assert any(s.attributes.get("db.system.name") == "elasticsearch" for s in in_turn)  # down to Elasticsearch
    write = next(s for s in in_turn if s.name == "engram.write")
    assert write.attributes["engram.operation"] == "episode" and write.attributes["engram.status"] == "applied"

    import_span = servers["api/v1/subjects/<str:external_id>/episodes:import"]
    [applied] = [s for s in out if s.name == "engram.outbox.apply"]
    assert applied.context.trace_id == import_span.context.trace_id  # the replay joins the request's trace
    replay_task = next(s for s in out if s.name.endswith("memory_app.tasks.replay_outbox"))
    assert [link.context.span_id for link in applied.links] == [replay_task.context.span_id]
    assert any(s.context.trace_id == import_span.context.trace_id and s.attributes.get("db.system.name")
               for s in out if s.start_time >= applied.start_time)

    consolidate_span = servers["api/v1/subjects/<str:external_id>/consolidate"]
    [run] = [s for s in out if s.name == "engram.consolidation"]
    assert run.context.trace_id != consolidate_span.context.trace_id  # a trace of its own
    assert [link.context.span_id for link in run.links] == [consolidate_span.context.span_id]
    assert run.attributes["engram.status"] == "succeeded"


def test_the_gate_keeps_listed_attributes_only():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("GET", attributes={
            "http.route": "api/v1/subjects/<str:external_id>/recall", "http.target": "/api/v1/subjects/alice/recall",
            "url.full": "http://es:9200/engram-episodic/_doc/1?q=alice", "db.query.text": "{\"query\": \"alice\"}",
            "engram.tenant_id": 7, "user_agent.original": "alice's agent"}) as span:
        span.add_event("exception", {"exception.type": "ValueError", "exception.message": "alice said hi",
                                     "exception.stacktrace": "... alice ..."})
        span.set_status(trace.Status(trace.StatusCode.ERROR, "alice said hi"))
    [kept] = [redact(s) for s in exporter.get_finished_spans()]
    assert dict(kept.attributes) == {"http.route": "api/v1/subjects/<str:external_id>/recall", "engram.tenant_id": 7}
    assert [dict(e.attributes) for e in kept.events] == [{"exception.type": "ValueError"}]
    assert kept.status.status_code is trace.StatusCode.ERROR and not kept.status.description
    assert "alice" not in kept.to_json()
