"""The Prometheus metrics Engram records, in one place (names, labels, buckets).

Every label is bounded: routes are URL patterns (never a path), tenants are ids (never a slug or
a name), error codes come from the API's own list. Under a multi-process server or a pre-forking
Celery worker, set ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode: a folder
of that server's or worker's own, emptied before it starts); ``metrics_registry`` then collects
every process's values. docs/operations.md
describes each metric."""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterable, Iterator

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir"))


if multiprocess():  # the folder must exist before the first metric writes its file into it
    Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ["prometheus_multiproc_dir"]).mkdir(
        parents=True, exist_ok=True)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

HTTP_REQUEST_SECONDS = Histogram(
    "engram_http_request_duration_seconds", "Time a request spent inside Django, by URL pattern, method and status.",
    ["route", "method", "status"], buckets=_LATENCY_BUCKETS)
TENANT_REQUESTS = Counter(
    "engram_tenant_requests", "Agent-token requests per tenant (REST and MCP), labelled by tenant id only.",
    ["tenant_id", "surface"])
API_ERRORS = Counter(
    "engram_api_errors", "Error answers of the API by error code (the body's error.code) and HTTP status.",
    ["code", "status", "surface"])
RECALLS = Counter("engram_recalls", "Recalls handed to an agent: REST, MCP, and each turn's pre-recall.",
                  ["surface"])
TURNS = Counter("engram_turns", "Turns stored, by what became of the write (applied now, or queued).", ["status"])
WRITES = Counter("engram_writes", "Writes accepted through the one submit path, by operation and outcome.",
                 ["operation", "status"])

ES_REQUESTS = Counter("engram_es_requests", "Attempts sent to an Elasticsearch node, by outcome.", ["outcome"])
ES_ERRORS = Counter(
    "engram_es_errors", "Failed Elasticsearch attempts: connection, timeout, or an HTTP status other than 2xx, "
    "404 and 409 (the answers Engram expects and handles).", ["kind"])
ES_RETRIES = Counter("engram_es_retries", "Elasticsearch attempts that repeated a failed one (the client's retries).")

CONSOLIDATION_RUNS = Counter("engram_consolidation_runs", "Consolidation runs finished, by trigger and status.",
                             ["trigger", "status"])
CONSOLIDATION_SECONDS = Histogram(
    "engram_consolidation_duration_seconds", "Duration of finished consolidation runs, by extractor.",
    ["extractor"], buckets=(0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0))
CONSOLIDATION_FACTS = Counter(
    "engram_consolidation_facts", "Facts consolidation produced, by change (created, merged, superseded, flagged).",
    ["change"])
LLM_TOKENS = Counter("engram_llm_tokens", "Tokens sent to (in) and received from (out) the consolidation LLM.",
                     ["direction"])

KEYS_MINTED = Counter("engram_keys_minted", "Elasticsearch API keys minted, by kind (subject, writer).", ["kind"])
KEYS_ROTATED = Counter("engram_keys_rotated", "Elasticsearch API keys rotated, by kind (subject, writer).", ["kind"])


class _Collectors:
    """This process's metrics (or, in multiprocess mode, every process's) and the given collectors,
    as one registry for ``generate_latest``."""

    def __init__(self, extra: Iterable):
        if multiprocess():
            self._base = CollectorRegistry()
            MultiProcessCollector(self._base)
        else:
            self._base = REGISTRY
        self._extra = list(extra)

    def collect(self) -> Iterator[Metric]:
        yield from self._base.collect()
        for collector in self._extra:
            yield from collector.collect()


def metrics_registry(*extra) -> _Collectors:
    """What a scrape returns: the process's (or processes') metrics, then ``extra`` collectors
    (computed at scrape time, e.g. the outbox backlog)."""
    return _Collectors(extra)
