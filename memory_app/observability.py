"""Engram's side of metrics and traces: the request middleware, ``/metrics`` (behind the monitor
token), the outbox's gauges, a Celery worker's own exporter, and tracing at start-up."""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from socketserver import ThreadingMixIn

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from engram_core.observability import metrics
from engram_core.observability.metrics import metrics_registry, multiprocess
from memory_app.metering import usage_count
from memory_app.models import OutboxEntry

log = logging.getLogger(__name__)

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def monitor_authorized(authorization: str) -> bool:
    """``Authorization: Bearer <ENGRAM_MONITOR_TOKEN>``; never when no token is configured."""
    expected = settings.ENGRAM_MONITOR_TOKEN
    scheme, _, token = authorization.partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode("utf-8", "surrogateescape"), expected.encode())


# ---------------------------------------------------------------- requests


def request_tenant(request: HttpRequest, tenant_id: int) -> None:
    """Name the tenant an agent token authenticated for (its id), for the per-tenant counts."""
    request.engram_tenant_id = tenant_id


class MetricsMiddleware:
    """Each request's time inside Django by URL pattern (never the path: it names end-users),
    method and status; error answers by code; agent-token requests per tenant (id only)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        match = request.resolver_match
        route = match.route if match is not None else "<unrouted>"
        method = request.method if request.method in _METHODS else "other"
        status = response.status_code
        metrics.HTTP_REQUEST_SECONDS.labels(route, method, str(status)).observe(elapsed)
        if status >= 400 and (code := _error_code(response)):
            metrics.API_ERRORS.labels(code, str(status), "rest").inc()
        if (tenant_id := getattr(request, "engram_tenant_id", None)) is not None:
            metrics.TENANT_REQUESTS.labels(str(tenant_id), "rest").inc()
            usage_count(tenant_id=tenant_id, requests=1)
        return response


def _error_code(response: HttpResponse) -> str | None:
    data = getattr(response, "data", None)  # a DRF Response: the API's one error shape
    if isinstance(data, dict) and isinstance(error := data.get("error"), dict):
        code = error.get("code")
        return code if isinstance(code, str) and len(code) <= 64 else "other"
    return None


# ---------------------------------------------------------------- the outbox, read at scrape time


class OutboxCollector:
    """Outbox entries by state (every state found, so a state added later is counted too) and the
    age of the oldest pending one, read from the database when scraped."""

    def collect(self) -> Iterator[Metric]:
        entries = GaugeMetricFamily("engram_outbox_entries", "Outbox entries by state (pending: the backlog; "
                                    "failed: writes that will not be applied).", labels=["state"])
        counts = {s: 0 for s in OutboxEntry.Status.values}
        counts |= dict(OutboxEntry.objects.values_list("status").annotate(n=Count("id")).order_by())
        for state, n in sorted(counts.items()):
            entries.add_metric([state], n)
        yield entries
        oldest = (OutboxEntry.objects.filter(status=OutboxEntry.Status.PENDING)
                  .aggregate(oldest=Min("created_at"))["oldest"])
        age = GaugeMetricFamily("engram_outbox_oldest_pending_seconds",
                                "Age of the oldest pending outbox entry (0: none pending).")
        age.add_metric([], (timezone.now() - oldest).total_seconds() if oldest else 0.0)
        yield age


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition of this server (all its processes in multiprocess mode) and the outbox."""
    if not monitor_authorized(request.headers.get("Authorization", "")):
        response = HttpResponse("metrics need the monitor token (Authorization: Bearer ...)\n", status=401,
                                content_type="text/plain; charset=utf-8")
        response["WWW-Authenticate"] = 'Bearer realm="engram-metrics"'
        return response
    response = HttpResponse(generate_latest(metrics_registry(OutboxCollector())), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


# ---------------------------------------------------------------- a Celery worker's own exporter


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # the base class's name
        pass


def worker_metrics_start(*, concurrency: int | None = None, pool: str = "") -> int | None:
    """Serve this worker's metrics (every pool process's, in multiprocess mode) on
    ``ENGRAM_WORKER_METRICS_PORT``, behind the monitor token. Called in the worker's main process
    before its pool starts. Returns the port, or None when none is configured."""
    port = settings.ENGRAM_WORKER_METRICS_PORT
    if not port:
        return None
    if not multiprocess() and pool == "prefork" and (concurrency or 0) > 1:
        log.error("this worker's pool processes record metrics its exporter cannot see: set "
                  "PROMETHEUS_MULTIPROC_DIR (a folder of this worker's own) before starting it")
    exposition = make_wsgi_app(metrics_registry())

    def app(environ, start_response):
        if not monitor_authorized(environ.get("HTTP_AUTHORIZATION", "")):
            start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                                ("WWW-Authenticate", 'Bearer realm="engram-metrics"')])
            return [b"metrics need the monitor token\n"]
        return exposition(environ, start_response)

    server = make_server(settings.ENGRAM_WORKER_METRICS_ADDR, port, app, _ThreadingServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="engram-worker-metrics", daemon=True).start()
    log.info("worker metrics on http://%s:%s/metrics", settings.ENGRAM_WORKER_METRICS_ADDR, port)
    return port


def worker_process_exited(pid: int) -> None:
    """A pool process ended: its live gauges no longer count (multiprocess mode)."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(pid)


# ---------------------------------------------------------------- tracing at start-up


def tracing_start() -> None:
    """Trace this process when ``ENGRAM_TRACING`` says so (``otlp``); off, nothing is instrumented."""
    mode = settings.ENGRAM_TRACING
    if mode in ("", "off"):
        return
    if mode != "otlp":
        raise ValueError(f"ENGRAM_TRACING must be 'off' or 'otlp', not {mode!r}")
    from engram_core.observability.tracing import tracing_setup

    tracing_setup(service_name=settings.ENGRAM_TRACING_SERVICE_NAME)
