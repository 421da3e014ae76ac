"""Periodic key maintenance and audit checkpoints. Thin: the work is in tenants.services."""

import logging

from celery import shared_task

from .services.audit_checkpoints import audit_checkpoint_write
from .services.keys import KeyLifetimes, keys_maintain

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def maintain_keys() -> dict:
    """Rotate subject keys near expiry, invalidate keys past their grace, renew the writer key."""
    result = keys_maintain(lifetimes=KeyLifetimes.from_settings())
    return {"rotated": result.rotated, "invalidated": result.invalidated,
            "writer_invalidated": result.writer_invalidated}


@shared_task(ignore_result=True)
def audit_checkpoint(chains: list[str] | None = None) -> dict:
    """Checkpoint every audit chain that moved (or ``chains``); a refused chain is logged as an error."""
    results = audit_checkpoint_write(chains=chains)
    for result in results:
        if result.state == "refused":
            log.error("audit chain %s not checkpointed: %s", result.label, result.reason)
    return {result.chain: result.state for result in results}
