"""A user turn: its episode is written (through ``write_submit``) while a recall on its text runs."""

from __future__ import annotations

import contextvars
import logging
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from engram_core.db import as_request
from engram_core.errors import EngramError, NotFound, PermissionDenied
from engram_core.observability.tracing import traced
from engram_core.threads import LazyPool
from memory_app import timing
from embeddings import EmbeddingError
from memory_app.providers import get_embedder
from memory_app.freshness import refresh_ensure
from memory_app.outbox.dispatch import Op
from memory_app.outbox.outage import is_outage, outage_error
from memory_app.outbox.submit import Submitted, write_submit
from memory_app.services.store import new_memory_id
from memory_app.recall import memory_recall
from memory_app.usage import usage_record_recalled
from memory_app.validation import clean_k, clean_timezone, clean_types, write_validate
from tenants.models import AgentToken, Tenant
from tenants.selectors import subject_find, subject_get
from tenants.services.clients import subject_es_client

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnResult:
    submitted: Submitted
    recall: list[dict[str, Any]] | None  # None: recall was not possible (see recall_error)
    recall_error: EngramError | None = None


# A turn's pre-recall runs here while the request thread writes the turn.
_turn_recalls = LazyPool(name="turn-recall")


def _recall_in_thread(**kwargs) -> list[dict[str, Any]]:
    return as_request(memory_recall, **kwargs)  # the recall reads the facts' use counts


@traced("engram.turn")
def turn_submit(*, tenant: Tenant, external_id: str, text: str, memory_id: str = "", token: AgentToken | None = None,
                occurred_at: datetime | str | None = None, session_id: str | None = None,
                context: str | None = None, metadata: dict | None = None, k: int = 5,
                types: list[str] | None = None, include_superseded: bool = False,
                explain: bool = False, timezone: str | None = None, with_recall: bool = True) -> TurnResult:
    """Store the verbatim user turn as an episode and recall on the same text (its first
    ``ENGRAM_MAX_QUERY_CHARS`` characters), leaving out the turn itself. For a known end-user the
    recall runs on a pool thread while this thread writes (the turn is left out of the recall
    either way, so neither waits for the other); a new end-user's recall follows its first write.
    The write decides the outcome: once it is applied or queued, a recall failure is reported in
    ``recall_error`` instead of being raised (the turn must not be sent again). Without
    ``with_recall`` (a token that may not read memory) only the turn is written."""
    clean_k(k)
    clean_types(types)
    clean_timezone(timezone)  # the recall's; checked before anything is written
    payload = {"text": text, "occurred_at": occurred_at, "role": "user", "session_id": session_id,
               "context": context, "metadata": metadata}
    write_validate(operation=Op.EPISODE, payload=payload)  # a bad turn starts no recall either
    # The turn's id, fixed now: the recall leaves the turn out before it sets copies aside (when the
    # user repeats a line, the line said before is what the recall should give back).
    memory_id = memory_id or new_memory_id()
    if not with_recall:
        submitted = write_submit(tenant=tenant, external_id=external_id, operation=Op.EPISODE, payload=payload,
                                 memory_id=memory_id, token=token, defer_refresh=True)
        return TurnResult(submitted=submitted, recall=None, recall_error=PermissionDenied(
            "the turn was stored; no recall: this agent token lacks the memory:read scope",
            details={"required_scope": ["memory:read"]}, code="insufficient_scope"))
    known = subject_find(tenant=tenant, external_id=external_id)
    # Earlier turns stored without waiting must be visible to this turn's derived context and to
    # its recall; this turn need not be (it is left out of the recall anyway), so its write does
    # not wait for a refresh either.
    if known is not None:
        try:
            refresh_ensure(subject=known)  # one refresh, when one is pending, serves both below
        except Exception as exc:
            if not is_outage(exc):
                raise  # in an outage the write below is accepted into the outbox, the mark kept
    recall = dict(query=text.strip()[:settings.ENGRAM_MAX_QUERY_CHARS], k=k,
                  types=types, include_superseded=include_superseded, explain=explain, timezone=timezone,
                  ensure_fresh=False, exclude=memory_id)
    concurrent: Future | None = None
    if known is not None:
        try:  # the write and the recall both need the turn's vector: computed once, before they split
            with timing.timed("embed"):
                get_embedder().embed_query(recall["query"])
        except EmbeddingError as exc:  # the recall reports it; the write is still accepted
            log.info("turn text not embedded ahead: %s", exc)
        try:
            # bound: the recall's phases count in this request's Server-Timing (memory_app.timing).
            pool = _turn_recalls.get(workers=settings.ENGRAM_TURN_RECALL_THREADS)
            # In this request's context (a measurement's scratch indices are a context variable).
            concurrent = pool.submit(contextvars.copy_context().run, timing.bound(_recall_in_thread),
                                     subject=known, es=subject_es_client(subject=known), **recall)
        except Exception as exc:  # no client (e.g. an outage): the recall below reports it
            log.info("turn recall not started concurrently: %s", exc)
    with timing.timed("write"):
        submitted = write_submit(tenant=tenant, external_id=external_id, operation=Op.EPISODE, payload=payload,
                                 memory_id=memory_id, token=token, defer_refresh=True, subject=known)
    who = known
    try:
        if concurrent is not None:
            hits = concurrent.result()
        else:
            who = subject_get(tenant=tenant, external_id=external_id)
            hits = memory_recall(subject=who, **recall)
    except NotFound:  # the subject exists only in the outbox so far: nothing to recall
        return TurnResult(submitted=submitted, recall=[])
    except Exception as exc:
        if is_outage(exc):
            return TurnResult(submitted=submitted, recall=None,
                              recall_error=exc if isinstance(exc, EngramError) else outage_error(exc))
        log.exception("pre-recall failed after the turn was stored")
        return TurnResult(submitted=submitted, recall=None,
                          recall_error=EngramError("recall failed", code="recall_failed"))
    usage_record_recalled(subject=who, memories=hits)  # handed to the agent: its facts count as used
    return TurnResult(submitted=submitted, recall=hits)
