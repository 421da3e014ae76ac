"""The Elasticsearch client's attempts, errors and retries, counted where the client makes them.

elastic-transport retries inside one ``Transport.perform_request`` (a connection error, a timeout,
429/502/503/504), each attempt one node request: the node class counts attempts and their outcome,
the transport class counts the attempts beyond the first of each call."""

from __future__ import annotations

import threading
from typing import Any

from elastic_transport import ConnectionTimeout, Transport, TransportError, Urllib3HttpNode

from engram_core.observability.metrics import ES_ERRORS, ES_REQUESTS, ES_RETRIES

# 404 (a realtime get of a forgotten memory) and 409 (a create that finds its own id) are answers
# Engram asks for and handles: not errors of the cluster.
_EXPECTED = {404, 409}
_attempts = threading.local()


class CountingNode(Urllib3HttpNode):
    def perform_request(self, *args: Any, **kwargs: Any):
        _attempts.n = getattr(_attempts, "n", 0) + 1
        try:
            response = super().perform_request(*args, **kwargs)
        except ConnectionTimeout:
            ES_REQUESTS.labels("timeout").inc()
            ES_ERRORS.labels("timeout").inc()
            raise
        except TransportError:
            ES_REQUESTS.labels("connection_error").inc()
            ES_ERRORS.labels("connection").inc()
            raise
        status = response.meta.status
        ES_REQUESTS.labels(f"{status // 100}xx").inc()
        if status >= 300 and status not in _EXPECTED:
            ES_ERRORS.labels(f"http_{status}").inc()
        return response


class CountingTransport(Transport):
    def perform_request(self, *args: Any, **kwargs: Any):
        _attempts.n = 0
        try:
            return super().perform_request(*args, **kwargs)
        finally:
            if (made := getattr(_attempts, "n", 0)) > 1:
                ES_RETRIES.inc(made - 1)
            _attempts.n = 0
