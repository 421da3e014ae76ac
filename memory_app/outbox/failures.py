"""How a replayed write's failure is classified: an outage (the cluster cannot take requests:
stop, retry later, never counted against the write), transient (a retry may fix it: retried a
bounded number of times) or permanent (invalid data, a bug's exception: no retry fixes it, the
write ends failed at once and stops holding back its end-user's later writes)."""

from __future__ import annotations

from typing import Literal

from django.db import InterfaceError, OperationalError
from elasticsearch import ApiError, ConflictError, TransportError

from engram_core.errors import EngramError
from embeddings import EmbeddingError
from engram_core.es.outage import is_outage

Kind = Literal["outage", "transient", "permanent"]


def failure_kind(exc: BaseException) -> Kind:
    if is_outage(exc):
        return "outage"
    if isinstance(exc, EngramError):
        return "transient" if exc.status >= 500 else "permanent"
    if isinstance(exc, ConflictError):  # a concurrent change of the same document
        return "transient"
    if isinstance(exc, ApiError):  # a 4xx is Elasticsearch refusing this request's data
        return "transient" if exc.meta.status >= 500 or exc.meta.status == 429 else "permanent"
    if isinstance(exc, EmbeddingError):  # an embedding server's 4xx refuses the text; else it is away or busy
        return "permanent" if exc.status_code is not None and 400 <= exc.status_code < 500 \
            and exc.status_code != 429 else "transient"
    if isinstance(exc, (TransportError, OperationalError, InterfaceError, ConnectionError, TimeoutError)):
        return "transient"
    return "permanent"  # a bug's exception (TypeError, OverflowError, KeyError, ...): the same input fails again
