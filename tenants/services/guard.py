"""The capability guard: Engram serves memory only from a cluster that enforces document-level
security (``require_dls``); the probe is cached in-process."""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings

from engram_core.errors import ServiceUnavailable
from engram_core.es.capabilities import Capabilities, probe_capabilities

log = logging.getLogger(__name__)

_caps_lock = threading.Lock()
_caps_cache: tuple[float, Capabilities] | None = None


@dataclass(frozen=True)
class GuardOptions:
    """How the guard decides: how long a probe is trusted, and whether memory may be served
    without document-level security (a development switch that production refuses at start)."""

    cache_seconds: float
    allow_insecure: bool


@functools.cache
def _options() -> GuardOptions:
    # The deployment's, fixed for the process like its client: not a parameter, so that no
    # caller can turn isolation off for itself (dropped with the probe when settings change).
    return GuardOptions(cache_seconds=settings.ENGRAM_CAPABILITIES_CACHE_SECONDS,
                        allow_insecure=settings.ENGRAM_ALLOW_INSECURE_NO_DLS)


def _capabilities() -> Capabilities:
    global _caps_cache
    with _caps_lock:
        cached = _caps_cache
    if cached and time.monotonic() - cached[0] < _options().cache_seconds:
        return cached[1]
    caps = probe_capabilities()
    if caps.reachable:  # an outage is not cached: recovery is noticed on the next call
        with _caps_lock:
            _caps_cache = (time.monotonic(), caps)
    return caps


def require_dls() -> Capabilities:
    """Return the cluster's capabilities if Engram may serve memory from it.

    Raises ServiceUnavailable (code ``elasticsearch_unreachable``) when the cluster cannot be
    reached, and (code ``isolation_unavailable``) when it cannot enforce document-level
    security, unless ``ENGRAM_ALLOW_INSECURE_NO_DLS`` is set, in which case every call logs
    an error-level warning. The probe is cached for ``ENGRAM_CAPABILITIES_CACHE_SECONDS``.
    """
    caps = _capabilities()
    if not caps.reachable:
        raise ServiceUnavailable("Elasticsearch is unreachable", code="elasticsearch_unreachable",
                                 details={"errors": caps.errors})
    if caps.dls:
        return caps
    if _options().allow_insecure:
        log.error("INSECURE: serving memory WITHOUT document-level security (ENGRAM_ALLOW_INSECURE_NO_DLS=True): "
                  "end-users are separated by query filters only. %s", "; ".join(caps.errors))
        return caps
    raise ServiceUnavailable(
        "Elasticsearch cannot enforce document-level security, so Engram refuses to serve memory",
        code="isolation_unavailable",
        details={"errors": caps.errors, "licence": caps.licence, "security": caps.security},
    )


def keys_supported() -> bool:
    """Whether the cluster has API keys to mint (security on); raises as ``require_dls`` does."""
    return require_dls().security


def capabilities_forget() -> None:
    """Drop the cached probe and options: the next call reads the settings and probes the cluster again."""
    global _caps_cache
    with _caps_lock:
        _caps_cache = None
    _options.cache_clear()
