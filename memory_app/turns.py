"""The turn service: a user turn is stored as an episode (through the outbox's ``write_submit``,
which keeps it through an outage) while a recall on its text runs; what was recalled counts as used."""

from __future__ import annotations

import contextvars
import logging
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from embeddings import EmbeddingError
from engram_core.db import as_request
from engram_core.errors import EngramError, NotFound, PermissionDenied
from engram_core.observability.tracing import traced
from engram_core.threads import LazyPool
from memory_app import timing
from memory_app.commands import Turn
from memory_app.freshness import refresh_ensure
from engram_core.es.outage import is_outage, outage_error
from memory_app.outbox.submit import Submitted, write_submit
from memory_app.providers import get_embedder
from memory_app.recall import memory_recall
from memory_app.usage import usage_record_recalled
from tenants.models import AgentToken, Subject, Tenant
from tenants.services.clients import subject_es_client

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnResult:
    submitted: Submitted
    recall: list[dict[str, Any]] | None  # None: recall was not possible (see recall_error)
    recall_error: EngramError | None = None
    subject: Subject | None = None  # the end-user the recall read (None: none was read)


# A turn's pre-recall runs here while the request thread writes the turn.
_turn_recalls = LazyPool(name="turn-recall")


def _recall_in_thread(**kwargs) -> list[dict[str, Any]]:
    return as_request(memory_recall, **kwargs)  # the recall reads the facts' use counts


@traced("engram.turn")
def turn_create(*, tenant: Tenant, turn: Turn, token: AgentToken | None = None,
                with_recall: bool = True) -> TurnResult:
    """Store the verbatim user turn as an episode and recall on the same text, leaving out the
    turn itself; ``turn`` was checked at the edge (``commands.turn_command``), its end-user read
    or created then. The recall runs on a pool thread while this thread writes (the turn is left
    out of the recall either way, so neither waits for the other). The write decides the outcome:
    once it is applied or queued, a recall failure is reported in ``recall_error`` instead of
    being raised (the turn must not be sent again). Without ``with_recall`` (a token that may not
    read memory) only the turn is written."""
    subject = turn.write.subject  # None: an end-user not created yet (an outage): nothing to recall
    started = _recall_start(turn=turn, subject=subject) if with_recall and subject is not None else None
    with timing.timed("write"):
        submitted = write_submit(tenant=tenant, write=turn.write, token=token, defer_refresh=True)
    if not with_recall:
        return TurnResult(submitted=submitted, recall=None, recall_error=PermissionDenied(
            "the turn was stored; no recall: this agent token lacks the memory:read scope",
            details={"required_scope": ["memory:read"]}, code="insufficient_scope"))
    return _recall_finish(turn=turn, submitted=submitted, subject=subject, started=started)


def _recall_start(*, turn: Turn, subject: Subject) -> Future | None:
    """Start the recall of a known end-user's turn on a pool thread (None: it could not start; the
    recall then runs after the write)."""
    # Earlier turns stored without waiting must be visible to this turn's derived context and to
    # its recall; this turn need not be (it is left out of the recall anyway), so its write does
    # not wait for a refresh either.
    try:
        refresh_ensure(subject=subject)  # one refresh, when one is pending, serves both
    except Exception as exc:
        if not is_outage(exc):
            raise  # in an outage the write is accepted into the outbox, the mark kept
    try:  # the write and the recall both need the turn's vector: computed once, before they split
        with timing.timed("embed"):
            get_embedder().embed_query(turn.query)
    except EmbeddingError as exc:  # the recall reports it; the write is still accepted
        log.info("turn text not embedded ahead: %s", exc)
    try:
        # bound: the recall's phases count in this request's Server-Timing (memory_app.timing).
        pool = _turn_recalls.get(workers=settings.ENGRAM_TURN_RECALL_THREADS)
        # In this request's context (a measurement's scratch indices are a context variable).
        return pool.submit(contextvars.copy_context().run, timing.bound(_recall_in_thread),
                           subject=subject, es=subject_es_client(subject=subject), **turn.recall,
                           ensure_fresh=False)
    except Exception as exc:  # noqa: BLE001 - no client (e.g. an outage): the recall after the write reports it
        log.info("turn recall not started concurrently: %s", exc)
        return None


def _recall_finish(*, turn: Turn, submitted: Submitted, subject: Subject | None,
                   started: Future | None) -> TurnResult:
    """The turn's recall, once its write is applied or queued: a recall failure is reported, never
    raised; what the agent is handed counts as used."""
    try:
        if subject is None:  # the end-user exists only in the outbox so far: nothing to recall
            return TurnResult(submitted=submitted, recall=[])
        if started is not None:
            hits = started.result()
        else:
            hits = memory_recall(subject=subject, **turn.recall, ensure_fresh=False)
    except NotFound:  # nothing of the end-user's to recall
        return TurnResult(submitted=submitted, recall=[])
    except Exception as exc:
        if is_outage(exc):
            return TurnResult(submitted=submitted, recall=None,
                              recall_error=exc if isinstance(exc, EngramError) else outage_error(exc))
        log.exception("pre-recall failed after the turn was stored")
        return TurnResult(submitted=submitted, recall=None,
                          recall_error=EngramError("recall failed", code="recall_failed"))
    usage_record_recalled(subject=subject, memories=hits)  # handed to the agent: its facts count as used
    return TurnResult(submitted=submitted, recall=hits, subject=subject)
