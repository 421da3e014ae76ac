"""What the connected cluster can do, probed rather than assumed.

Used at start-up (``es_setup``) and by ``GET /healthz``. Isolation depends on document-level
security, which needs security enabled and a licence that grants it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.conf import settings
from elasticsearch import ApiError, TransportError

from engram_core.es.client import monitor_client


@dataclass(frozen=True)
class Capabilities:
    reachable: bool
    version: str | None = None
    licence: str | None = None
    licence_status: str | None = None
    security: bool = False
    dls: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def major(self) -> int | None:
        return int(self.version.split(".")[0]) if self.version else None

    def as_dict(self) -> dict:
        return asdict(self)


def probe_capabilities(*, timeout: float = 3.0) -> Capabilities:
    """Ask the cluster for its version, licence and security state. Never raises."""
    es = monitor_client().options(request_timeout=timeout, max_retries=0)
    try:
        # The CI node has no `GET /`; the local node's info carries the version.
        nodes = es.nodes.info(node_id="_local", metric="_none", filter_path="nodes.*.version")
        version = next(iter(nodes["nodes"].values()))["version"]
        licence = es.license.get()["license"]
    except TransportError as exc:
        return Capabilities(reachable=False, errors=[f"elasticsearch unreachable at {settings.ES_URL}: {exc}"])
    except ApiError as exc:
        return Capabilities(reachable=True, errors=[f"elasticsearch refused the probe: {exc.meta.status} {exc.message}"])
    errors = []
    try:
        security = bool(es.security.authenticate().get("username"))
    except ApiError:  # security disabled: the API itself is refused
        security = False
    licence_type, licence_status = licence.get("type"), licence.get("status")
    dls = security and licence_status == "active" and licence_type in settings.ES_DLS_LICENCES
    if not dls:
        errors.append(
            f"document-level security unavailable (security={'on' if security else 'off'}, "
            f"licence={licence_type}/{licence_status}); memory isolation cannot be enforced"
        )
    return Capabilities(
        reachable=True,
        version=version,
        licence=licence_type,
        licence_status=licence_status,
        security=security,
        dls=dls,
        errors=errors,
    )
