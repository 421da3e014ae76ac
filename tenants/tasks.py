"""Periodic key maintenance. Thin: the work is in tenants.services."""

from celery import shared_task

from .services.keys import keys_maintain


@shared_task(ignore_result=True)
def maintain_keys() -> dict:
    """Rotate subject keys near expiry, invalidate keys past their grace, renew the writer key."""
    result = keys_maintain()
    return {"rotated": result.rotated, "invalidated": result.invalidated,
            "writer_invalidated": result.writer_invalidated}
