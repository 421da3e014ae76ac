"""What counts as an Elasticsearch outage (queue the write, stop the replay), and the one error
every interface (REST, MCP, a turn's recall) reports it with."""

from __future__ import annotations

from elasticsearch import ApiError, ConnectionError, ConnectionTimeout, SSLError

from engram_core.errors import ServiceUnavailable

_ES_BUSY = {429, 502, 503, 504}


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
    # 401: a restarted node refuses every credential until its security index is available again.
    # 403 cluster_block_exception: an index whose writes are blocked while es_setup copies it into
    # its next version (engram_core.es.schema); the write lands in that version once it is done.
    return exc.meta.status == 401 or exc.meta.status in _ES_BUSY or (exc.meta.status == 403 and _blocked(exc))


def _blocked(exc: ApiError) -> bool:
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    return isinstance(error, dict) and error.get("type") == "cluster_block_exception"


def outage_error(exc: BaseException) -> ServiceUnavailable:
    """The one answer to an outage, for every interface (REST, MCP, a turn's recall)."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    return ServiceUnavailable("Elasticsearch is unreachable; retry later", code="elasticsearch_unreachable")
