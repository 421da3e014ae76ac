"""Which replay failures a retry may fix: pure, no service."""

from __future__ import annotations

import pytest
from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
from elasticsearch import ApiError, ConflictError
from elasticsearch import ConnectionError as ESConnectionError

from engram_core.errors import Conflict, NotFound, ServiceUnavailable, ValidationFailed
from embeddings import EmbeddingError
from memory_app.outbox.failures import failure_kind


def _meta(status: int) -> ApiResponseMeta:
    return ApiResponseMeta(status=status, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "localhost", 9200))


@pytest.mark.parametrize("exc, kind", [
    (ServiceUnavailable("down"), "outage"),
    (ESConnectionError("refused"), "outage"),
    (ApiError("busy", meta=_meta(503), body={}), "outage"),
    (ApiError("a shard failed", meta=_meta(500), body={"error": {"type": "x"}}), "transient"),
    (ConflictError("version conflict", meta=_meta(409), body={}), "transient"),
    (Conflict("keeps changing", code="concurrent_update"), "permanent"),  # the replay reads Conflict's code itself
    (EmbeddingError("server away"), "transient"),
    (EmbeddingError("busy", status_code=429), "transient"),
    (EmbeddingError("text refused", status_code=413), "permanent"),
    (TimeoutError("slow"), "transient"),
    (ApiError("mapper_parsing_exception", meta=_meta(400), body={"error": {"type": "mapper_parsing_exception"}}),
     "permanent"),
    (ValidationFailed("bad"), "permanent"),
    (NotFound("gone"), "permanent"),
    (OverflowError("date value out of range"), "permanent"),
    (TypeError("a bug"), "permanent"),
    (KeyError("text"), "permanent"),
])
def test_failure_kinds(exc, kind):
    assert failure_kind(exc) == kind
