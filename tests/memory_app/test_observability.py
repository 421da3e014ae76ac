"""/metrics: behind the monitor token; request latency by URL pattern (never a path), error codes,
recalls, turns, writes, per-tenant requests by id only, the outbox by state (whatever states
exist), Elasticsearch errors and retries, consolidation and key metrics."""

from __future__ import annotations

import re
import uuid

import pytest
from elastic_transport import ConnectionError
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from engram_core.es.client import base_client
from memory_app.consolidation.services import consolidation_run
from memory_app.models import OutboxEntry, TenantUsageDay
from memory_app.metering import usage_flush
from tests.api.conftest import (  # noqa: F401 - the API's fixtures
    api, es_down, make_token, memory, module_indices, tenant)


def _scrape(monitor_headers) -> str:
    response = APIClient().get("/metrics", headers=monitor_headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return response.content.decode()


def _value(text: str, name: str, **labels: str) -> float:
    """The sample ``name`` whose labels include ``labels`` (0 when absent)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}])
def test_metrics_need_the_monitor_token(db, headers):
    response = APIClient().get("/metrics", headers=headers)
    assert response.status_code == 401 and b"engram_" not in response.content


def test_no_monitor_token_configured_means_no_metrics(db, settings):
    settings.ENGRAM_MONITOR_TOKEN = ""
    assert APIClient().get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401


def test_requests_are_measured_by_route_status_and_tenant_id_never_by_path_or_name(api, tenant, monitor_headers):
    external_id = f"metrics-{uuid.uuid4().hex[:8]}@example.com"
    before = _scrape(monitor_headers)
    route = "api/v1/subjects/<str:external_id>/turns"
    assert api.post(f"/api/v1/subjects/{external_id}/turns", {"text": "I moved to Ghent."},
                    format="json").status_code == 201
    assert api.post(f"/api/v1/subjects/{external_id}/recall", {"query": "where do I live"},
                    format="json").status_code == 200
    assert api.post("/api/v1/subjects/nobody-here/recall", {"query": "x"}, format="json").status_code == 404
    text = _scrape(monitor_headers)

    def grew(name, **labels):
        return _value(text, name, **labels) - _value(before, name, **labels)

    assert grew("engram_http_request_duration_seconds_count", route=route, method="POST", status="201") == 1
    assert grew("engram_api_errors_total", code="not_found", status="404", surface="rest") == 1
    assert grew("engram_recalls_total", surface="rest") == 1 and grew("engram_recalls_total", surface="turn") == 1
    assert grew("engram_turns_total", status="applied") == 1
    assert grew("engram_writes_total", operation="episode", status="applied") == 1
    assert grew("engram_tenant_requests_total", tenant_id=str(tenant.pk), surface="rest") == 3
    assert grew("engram_keys_minted_total", kind="subject") >= 1  # the new end-user's key
    # Labels carry ids and URL patterns: no end-user's id, no tenant's slug or name, no text.
    for leaked in (external_id, "metrics-", tenant.slug, tenant.name, "Ghent"):
        assert leaked not in text
    tenant_labels = set(re.findall(r'engram_tenant_requests_total\{[^}]*tenant_id="([^"]*)"', text))
    assert tenant_labels and all(label.isdigit() for label in tenant_labels)


def test_the_outbox_is_counted_by_every_state_found(api, tenant, monitor_headers):
    for status in ("pending", "failed", "failed", "parked"):  # "parked": a state added later is counted too
        OutboxEntry.objects.create(tenant=tenant, external_id="x", operation="episode", payload={}, actor="t",
                                   reason="outage", status=status)
    text = _scrape(monitor_headers)
    assert _value(text, "engram_outbox_entries", state="pending") >= 1
    assert _value(text, "engram_outbox_entries", state="failed") >= 2
    assert _value(text, "engram_outbox_entries", state="parked") == 1
    assert _value(text, "engram_outbox_entries", state="done") == 0  # every known state, even at zero
    assert _value(text, "engram_outbox_oldest_pending_seconds") >= 0


def test_elasticsearch_errors_and_retries_are_counted(api, es_down, monitor_headers):
    assert api.post("/api/v1/subjects/someone/turns", {"text": "hello"}, format="json").status_code == 201
    before = _scrape(monitor_headers)
    es_down.start()
    try:
        assert api.post("/api/v1/subjects/someone/recall", {"query": "x"}, format="json").status_code == 503
        with pytest.raises(ConnectionError):
            base_client().search(index="anything")  # the client's own retries: 2 after the first attempt
    finally:
        es_down.restore()
    text = _scrape(monitor_headers)

    def grew(name, **labels):
        return _value(text, name, **labels) - _value(before, name, **labels)

    assert grew("engram_es_errors_total", kind="connection") >= 4
    assert grew("engram_es_requests_total", outcome="connection_error") == grew("engram_es_errors_total",
                                                                                kind="connection")
    assert grew("engram_es_retries_total") >= 2
    assert grew("engram_api_errors_total", status="503", surface="rest") == 1


def test_a_consolidation_run_is_measured_and_counted_for_its_tenant(api, tenant, monitor_headers):
    from tenants.selectors import subject_get

    external_id = "consolidated"
    for text in ("My name is Ada.", "I live in Lisbon.", "I work as a nurse."):
        assert api.post(f"/api/v1/subjects/{external_id}/turns", {"text": text}, format="json").status_code == 201
    before = _scrape(monitor_headers)
    run = consolidation_run(subject=subject_get(tenant=tenant, external_id=external_id)).run
    assert run.status == "succeeded" and run.facts_created > 0
    text = _scrape(monitor_headers)
    assert (_value(text, "engram_consolidation_runs_total", trigger="manual", status="succeeded")
            - _value(before, "engram_consolidation_runs_total", trigger="manual", status="succeeded")) == 1
    assert (_value(text, "engram_consolidation_facts_total", change="created")
            - _value(before, "engram_consolidation_facts_total", change="created")) == run.facts_created
    assert _value(text, "engram_consolidation_duration_seconds_count", extractor="rules") >= 1
    usage_flush()
    [day] = TenantUsageDay.objects.filter(tenant=tenant)
    assert (day.requests, day.consolidation_runs) == (3, 1)
    assert day.memories_stored == 3 + run.facts_created + run.playbooks_created
