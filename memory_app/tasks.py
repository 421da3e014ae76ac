"""Outbox replay, idempotency-record expiry and consolidation. Thin: the work is in the services."""

import logging

from celery import shared_task
from django.conf import settings

from engram_core.errors import EngramError
from memory_app.idempotency import idempotency_purge
from memory_app.consolidation.services import consolidation_dispatch as consolidation_dispatch_service
from memory_app.consolidation.services import consolidation_cancel, consolidation_run
from memory_app.models import ConsolidationRun
from memory_app.outbox import outbox_replay
from engram_core.es.outage import is_outage
from tenants.models import Subject

log = logging.getLogger(__name__)

# A run that meets an outage (Elasticsearch unreachable, say) tries again this many times (1 s, 2 s, 4 s ... apart).
_OUTAGE_RETRIES = 6


@shared_task(ignore_result=True)
def replay_outbox() -> dict:
    """Apply writes accepted during an Elasticsearch outage, in order. Periodic, and kicked after
    each enqueue; a run that finds another one holding the lease does nothing."""
    return outbox_replay().as_dict()


@shared_task(ignore_result=True)
def purge_idempotency_records() -> int:
    return idempotency_purge(ttl_hours=settings.ENGRAM_IDEMPOTENCY_TTL_HOURS)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def consolidate_subject(self, subject_id: int, run_id: int | None = None, extractor: str | None = None) -> None:
    """Consolidate one end-user. Acknowledged only when done: a worker killed mid-run gets the
    task again (same task id, which takes its lease back at once); the rerun's writes upsert."""
    subject = Subject.objects.select_related("tenant").filter(pk=subject_id, erased_at__isnull=True).first()
    if subject is None:  # erased meanwhile (its row stays, a tombstone): nothing is read or written
        consolidation_cancel(run_id=run_id, code="subject_erased")
        return
    try:
        consolidation_run(subject=subject, run_id=run_id, extractor=extractor, holder=self.request.id,
                          trigger=ConsolidationRun.Trigger.SCHEDULE)
    except ConsolidationRun.DoesNotExist:  # a message outliving its run's row (a database restored, say)
        log.warning("consolidation of subject %s: run %s does not exist; nothing to do", subject_id, run_id)
    except EngramError as exc:
        if exc.code == "writes_queued":  # the run follows the end-user's queued writes: again once replayed
            raise self.retry(countdown=exc.details["retry_after"], max_retries=None) from exc
        if is_outage(exc) and self.request.retries < _OUTAGE_RETRIES:
            raise self.retry(countdown=min(60, 2 ** self.request.retries), max_retries=_OUTAGE_RETRIES) from exc
        log.warning("consolidation of subject %s failed: %s", subject_id, exc.message)
        # A failure before the run started (the cluster unreachable, say) would leave it queued for good.
        consolidation_cancel(run_id=run_id, code=exc.code, message=exc.message)


@shared_task(ignore_result=True)
def consolidation_dispatch() -> int:
    """Queue runs for end-users with enough waiting episodes, or quiet for long enough."""
    return consolidation_dispatch_service()
