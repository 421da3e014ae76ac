"""What metrics and traces cost a request: CPU per request in this process, in-process requests
through Django's test client (no network, so nothing but Engram's own work is timed), each
variant in turn, several rounds. Run on the test stack:

    scripts/test benchmarks/observability_cost.py -s -p no:cacheprovider

Variants: ``bare`` (the metrics middleware removed: no request histogram, no per-tenant counts;
the counters inside the services stay, see ``counters`` below), ``metrics`` (as shipped, tracing
off), ``traced`` (ENGRAM_TRACING on, spans redacted and handed to an exporter that drops them).
Requests: an API request that does no work (an agent token's GET of an unknown operation: auth,
rate limit, a 404) and a recall of one end-user with 30 memories (Elasticsearch included)."""

from __future__ import annotations

import statistics
import time
import uuid

import pytest
from django.test import override_settings
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from rest_framework.test import APIClient

from engram_core.observability import metrics
from engram_core.observability.tracing import tracing_setup, tracing_stop
from tests.api.conftest import make_token, memory, module_indices, tenant  # noqa: F401
from tests.conftest import es_admin, invalidate_minted_keys  # noqa: F401

ROUNDS, N = 5, 400


class _Drop(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def _cpu_per_request(client: APIClient, request, n: int = N) -> float:
    request(client)  # the handler's middleware chain is built on the first request
    start = time.thread_time()
    for _ in range(n):
        request(client)
    return (time.thread_time() - start) / n * 1e6


@pytest.mark.django_db
def test_cost(make_token, settings):
    token = make_token()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    for n in range(30):
        assert api.post("/api/v1/subjects/bench/memories", {"type": "semantic", "text": f"Fact {n} about tea."},
                        format="json").status_code == 201
    requests = {
        "no-work": lambda c: c.get(f"/api/v1/operations/{uuid.uuid4()}"),
        "recall": lambda c: c.post("/api/v1/subjects/bench/recall", {"query": "tea"}, format="json"),
    }
    bare = [m for m in settings.MIDDLEWARE if m != "memory_app.observability.MetricsMiddleware"]
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(ROUNDS):
        for variant in ("bare", "metrics", "traced"):
            if variant == "traced":
                tracing_setup(exporter=_Drop(), batch=False)
            with override_settings(MIDDLEWARE=bare if variant == "bare" else settings.MIDDLEWARE):
                for name, request in requests.items():
                    client = APIClient()
                    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
                    results.setdefault((name, variant), []).append(_cpu_per_request(client, request))
            if variant == "traced":
                tracing_stop()
    counter = metrics.RECALLS.labels("bench")
    start = time.thread_time()
    for _ in range(100_000):
        counter.inc()
    inc_us = (time.thread_time() - start) / 100_000 * 1e6
    print(f"\nCPU per request, median of {ROUNDS} rounds of {N} (us):")
    for name in requests:
        row = {v: statistics.median(results[(name, v)]) for v in ("bare", "metrics", "traced")}
        print(f"  {name:8} bare {row['bare']:8.0f}  metrics {row['metrics']:8.0f} ({row['metrics'] - row['bare']:+.0f})"
              f"  traced {row['traced']:8.0f} ({row['traced'] - row['metrics']:+.0f} over metrics)")
    print(f"  counters: one labelled increment {inc_us:.2f} us")
    # The middleware alone, around a view that does nothing: what it adds to every request.
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.urls import resolve

    from memory_app.observability import MetricsMiddleware

    request = RequestFactory().get(f"/api/v1/operations/{uuid.uuid4()}")
    request.resolver_match = resolve(request.path)
    request.engram_tenant_id = 1
    response = HttpResponse(status=404)
    middleware = MetricsMiddleware(lambda r: response)
    start = time.thread_time()
    for _ in range(100_000):
        middleware(request)
    print(f"  the metrics middleware alone: {(time.thread_time() - start) / 100_000 * 1e6:.1f} us per request")
