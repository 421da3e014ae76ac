"""OpenTelemetry traces, exported only when configured, with no memory text, query text or
external id in anything they export.

Django's, Celery's and httpx's instrumentations make the spans of a request, a task and an
outbound call; the Elasticsearch client makes its own (its built-in instrumentation, body capture
off). Those libraries record what they see: a request's path (which names the end-user), an
Elasticsearch URL, an exception's message (which may quote what was sent). So every span passes
one gate before any exporter sees it, ``redact``: an attribute is kept only if its key is on a
short list of keys that hold methods, routes, statuses, node addresses and ids (or Engram's own
``engram.*``, set only from ids and counts), an exception event keeps its type only, and a status
keeps its code, not its description. One mechanism, so an attribute a library adds next year is
dropped until someone reads it and lists it.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Link, Status

log = logging.getLogger(__name__)

TRACER_NAME = "engram"

# Keys whose values are methods, URL patterns, statuses, node addresses, index names and ids.
KEPT_ATTRIBUTES = frozenset({
    "http.method", "http.request.method", "http.route", "http.status_code", "http.response.status_code",
    "http.scheme", "url.scheme", "http.flavor", "network.protocol.version",
    "server.address", "server.port", "net.host.port", "net.peer.name", "net.peer.port",
    "db.system", "db.system.name", "db.operation.name", "db.response.status_code",
    "db.operation.parameter.index",
    "celery.action", "celery.task_name", "celery.state", "messaging.message.id", "messaging.system",
    "messaging.operation", "messaging.destination", "messaging.destination.name",
    "error.type", "exception.type", "exception.escaped",
})
KEPT_PREFIXES = ("engram.",)


def _kept(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if k in KEPT_ATTRIBUTES or k.startswith(KEPT_PREFIXES)}


def redact(span: ReadableSpan) -> ReadableSpan:
    """The span as it may leave the process: listed attributes only (on the span, its events and
    its links), no status description."""
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=_kept(span.attributes),
        events=[Event(e.name, _kept(e.attributes), e.timestamp) for e in span.events],
        links=[Link(link.context, _kept(link.attributes)) for link in span.links],
        kind=span.kind, status=Status(span.status.status_code), start_time=span.start_time,
        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope)


class RedactingSpanProcessor(SpanProcessor):
    """Hands each finished span, redacted, to the exporting processor (replaceable: tests swap in
    an in-memory exporter)."""

    def __init__(self) -> None:
        self.delegate: SpanProcessor | None = None

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self.delegate is not None:
            self.delegate.on_end(redact(span))

    def shutdown(self) -> None:
        if self.delegate is not None:
            self.delegate.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.delegate.force_flush(timeout_millis) if self.delegate is not None else True


_lock = threading.Lock()
_gate: RedactingSpanProcessor | None = None
_instrumented = False


def tracing_setup(*, exporter: SpanExporter | None = None, service_name: str = "engram",
                  batch: bool = True) -> None:
    """Trace this process: spans go through ``redact`` to ``exporter`` (default: OTLP over HTTP,
    configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables). Instruments Django, Celery and
    httpx once; a later call only replaces the exporter."""
    global _gate, _instrumented
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    with _lock:
        if _gate is None:
            _gate = RedactingSpanProcessor()
            provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
            provider.add_span_processor(_gate)
            trace.set_tracer_provider(provider)
        if not _instrumented:
            _instrument()
            _instrumented = True
        previous, _gate.delegate = _gate.delegate, processor
    if previous is not None:
        previous.shutdown()


def tracing_stop() -> None:
    """Stop exporting and remove the instrumentations (tests; the provider itself stays: OpenTelemetry
    sets it once per process)."""
    global _instrumented
    with _lock:
        if _gate is not None and _gate.delegate is not None:
            _gate.delegate.shutdown()
            _gate.delegate = None
        if _instrumented:
            from opentelemetry.instrumentation.celery import CeleryInstrumentor
            from opentelemetry.instrumentation.django import DjangoInstrumentor
            from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

            DjangoInstrumentor().uninstrument()
            CeleryInstrumentor().uninstrument()
            HTTPXClientInstrumentor().uninstrument()
            _instrumented = False


def tracing_enabled() -> bool:
    return _gate is not None and _gate.delegate is not None


def tracing_flush() -> None:
    if _gate is not None:
        _gate.force_flush()


def _instrument() -> None:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    DjangoInstrumentor().instrument()
    CeleryInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def traceparent() -> str:
    """The current span's W3C ``traceparent`` ("" when nothing is traced): what a queued write
    or a queued consolidation run carries to the process that applies it."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent", "")


def _span_context(value: str) -> trace.SpanContext | None:
    if not value:
        return None
    context = trace.get_current_span(propagate.extract({"traceparent": value})).get_span_context()
    return context if context.is_valid else None


@contextmanager
def span_continuing(name: str, parent: str, *, attributes: Mapping[str, Any] | None = None) -> Iterator[trace.Span]:
    """A span in the trace ``parent`` (a traceparent) belongs to, linked to the current span: a
    queued write replayed later is part of the turn's trace, and points at the replay that did it."""
    here = trace.get_current_span().get_span_context()
    links = [Link(here)] if here.is_valid else []
    parent_context = _span_context(parent)
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent_context)) if parent_context else None
    with tracer().start_as_current_span(name, context=context, links=links, attributes=attributes) as span:
        yield span


@contextmanager
def span_linked(name: str, origin: str, *, attributes: Mapping[str, Any] | None = None) -> Iterator[trace.Span]:
    """A span in the current trace, linked to ``origin`` (a traceparent): a consolidation run is
    queued outside the request's trace (``detached``: it may run minutes later, for minutes), so
    its task starts a trace of its own, which points at the request that queued it."""
    origin_context = _span_context(origin)
    links: Sequence[Link] = [Link(origin_context)] if origin_context else []
    with tracer().start_as_current_span(name, links=links, attributes=attributes) as span:
        yield span


@contextmanager
def detached() -> Iterator[None]:
    """No current span inside: a task sent from here does not join the caller's trace (Celery's
    instrumentation would make the task a child of the request)."""
    token = otel_context.attach(otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


def traced(name: str):
    """Run the decorated function inside a span named ``name`` (a no-op span when tracing is off)."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with tracer().start_as_current_span(name):
                return fn(*args, **kwargs)
        return inner
    return wrap


def annotate(**attributes: str | int | float | bool) -> None:
    """Set ``engram.<name>`` attributes on the current span. Ids, codes and counts only: never
    memory text, a query or an external id (``redact`` keeps every ``engram.*`` attribute)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({f"engram.{k}": v for k, v in attributes.items()})
