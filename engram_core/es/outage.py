"""What counts as an Elasticsearch outage (queue the write, stop the replay), and the one error
every interface (REST, MCP, a turn's recall) reports it with."""

from __future__ import annotations

from elasticsearch import ApiError, ConnectionError, ConnectionTimeout, SSLError

from engram_core.errors import ServiceUnavailable
from engram_core.es.client import unavailable_answer


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` means "Elasticsearch cannot take requests right now" (unreachable, still
    starting, overloaded, unable to enforce isolation, or an index write-blocked by a migration), as
    opposed to a refusal of this request.
    Writes meeting such an error are queued; a replay meeting one stops and tries again later."""
    if isinstance(exc, ServiceUnavailable):
        return True
    if isinstance(exc, SSLError):  # a TLS misconfiguration is not an outage
        return False
    if isinstance(exc, (ConnectionError, ConnectionTimeout)):
        return True
    if not isinstance(exc, ApiError):
        return False
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    return unavailable_answer(exc.meta.status, error.get("type") if isinstance(error, dict) else None)


def outage_error(exc: BaseException) -> ServiceUnavailable:
    """The one answer to an outage, for every interface (REST, MCP, a turn's recall)."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    return ServiceUnavailable("Elasticsearch is unreachable; retry later", code="elasticsearch_unreachable")
