"""Outbox replay and idempotency-record expiry. Thin: the work is in memory_app.outbox and the API."""

from celery import shared_task

from memory_app.api.idempotency import idempotency_purge
from memory_app.outbox import outbox_replay


@shared_task(ignore_result=True)
def replay_outbox() -> dict:
    """Apply writes accepted during an Elasticsearch outage, in order. Periodic, and kicked after
    each enqueue; a run that finds another one holding the lease does nothing."""
    return outbox_replay().as_dict()


@shared_task(ignore_result=True)
def purge_idempotency_records() -> int:
    return idempotency_purge()
