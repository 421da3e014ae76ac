"""Recall: the k most useful memories for a question, in one pass of four stages, each with a data
type of its own: **read** the question once (``Reading``) → **search** every leg in one
``_msearch`` (``Searched``) → **rank** the hits → **explain** them. What the stages need from the
world (settings, the ranking, validation, the end-user's key, the embedder, a reranker) is met
here, at the edge, and handed down.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone as django_timezone

from elasticsearch import Elasticsearch
from engram_core.errors import ValidationFailed
from engram_core.es.schema import MemoryType, alias_name
from engram_core.observability.tracing import traced
from memory_app.providers import get_embedder, get_reranker
from memory_app.freshness import refresh_ensure
from language.names import person_name_words
from memory_app.recall.explain import EntityReading, entities_explain, ranked_explain
from memory_app.recall.options import RecallOptions
from memory_app.recall.ranking import RankingConfig
from memory_app.recall.rank import hits_rank
from memory_app.recall.read import Reading, query_read, reading_moment
from memory_app.recall.search import HOP_HITS, Allowed, hop_leg, legs_search, with_leg
from memory_app.timing import timed
from memory_app.validation import clean_datetime, clean_k, clean_text, clean_timezone, clean_types
from tenants.models import Subject
from tenants.selectors import index_prefix_for, memory_scope
from tenants.services.clients import subject_es_client
from tenants.services.guard import require_dls


@dataclass(frozen=True)
class Recall:
    """A recall's hits (as ``memory_recall`` returns them), the reading of the question they were
    ranked by, and what the search made of each name it names."""

    hits: list[dict[str, Any]]
    reading: Reading
    entities: tuple[EntityReading, ...]


@traced("engram.recall")
def memory_recall(*, subject: Subject, query: str, k: int = 10, types: list[str] | None = None,
                  since: datetime | str | None = None, until: datetime | str | None = None,
                  include_superseded: bool = False, explain: bool = False,
                  now: datetime | None = None, timezone: str | None = None, ensure_fresh: bool = True,
                  es: Elasticsearch | None = None, exclude: str = "",
                  as_of: datetime | str | None = None, ranking: RankingConfig | None = None
                  ) -> list[dict[str, Any]]:
    """The k most useful memories for ``query``: hybrid BM25 + kNN over every requested type and
    the tenant catalog in one ``_msearch``, through the end-user's own key, fused and weighted
    (memory_app.recall.rank). ``timezone``: the end-user's IANA zone, whose calendar days the
    dates a query names are read in (default UTC).

    A memory is listed once per content (explain names the copies left out). ``exclude``: a memory
    id left out before that (a turn's own episode). ``explain`` adds per hit its ranks, fused score
    and every multiplier. A read only: facts handed to an agent are counted as used by the caller
    (``usage.usage_record_recalled``), so a preview, an eval or a probe counts nothing. ``es``: the
    end-user's own client, resolved by the caller (a turn runs this on a pool thread).
    ``as_of``: what was true then: the facts valid at that moment (superseded since or not),
    episodes and playbooks up to it, ranked as if asked then. ``ranking``: how to rank (default:
    the deployment's, ``options.ranking_config``; the eval passes its ablations).
    ValidationFailed for bad input."""
    return memory_recall_with_reading(
        subject=subject, query=query, k=k, types=types, since=since, until=until,
        include_superseded=include_superseded, explain=explain, now=now, timezone=timezone,
        ensure_fresh=ensure_fresh, es=es, exclude=exclude, as_of=as_of, ranking=ranking).hits


def memory_recall_with_reading(*, subject: Subject, query: str, k: int = 10, types: list[str] | None = None,
                               since: datetime | str | None = None, until: datetime | str | None = None,
                               include_superseded: bool = False, explain: bool = False,
                               now: datetime | None = None, timezone: str | None = None, ensure_fresh: bool = True,
                               es: Elasticsearch | None = None, exclude: str = "",
                               as_of: datetime | str | None = None, ranking: RankingConfig | None = None
                               ) -> Recall:
    """``memory_recall``, with the reading of the question its hits were ranked by (the
    inspector shows both)."""
    options = RecallOptions.from_settings(ranking)
    query = clean_text(query, field="query", limit=options.max_query_chars)
    k = clean_k(k, limit=options.max_k)
    memory_types = clean_types(types)
    since = clean_datetime(since, field="since")
    until = clean_datetime(until, field="until")
    if since and until and since > until:
        raise ValidationFailed("since must not be after until", details={"field": "since"}, code="invalid_time_range")
    as_of = clean_datetime(as_of, field="as_of")
    tz = clean_timezone(timezone)
    require_dls()
    now = as_of or now or django_timezone.now()
    if ensure_fresh:
        refresh_ensure(subject=subject)  # the end-user's last turn, stored without waiting, is found
    es = es or subject_es_client(subject=subject)

    # The question is read at ``now`` held inside the calendar, once, here (an as_of may be year 1 or 9999).
    reading = query_read(query=query, now=reading_moment(now, grace_days=options.temporal_grace_days), tz=tz,
                         options=options,
                         name_words=person_name_words(display_name=subject.display_name,
                                                      external_id=subject.external_id))
    embedder = get_embedder()
    with timed("embed"):
        vector = embedder.embed_query(reading.query)

    def topic_vector() -> list[float]:
        # Inside an entity's filter every memory names the entity, so its name in the query vector
        # ranks nothing there: the entity kNN legs search the topic, as its BM25 legs do.
        return embedder.embed_query(reading.topic) if options.entity_topic_vector else vector

    prefix = index_prefix_for(tenant=subject.tenant)
    # Facts found credit the episodes they came from (rank.facts_credit), also where no fact is asked for.
    crediting = (MemoryType.SEMANTIC,) if options.fact_credit > 0 and MemoryType.EPISODIC in memory_types \
        and MemoryType.SEMANTIC not in memory_types else ()
    allowed = Allowed(types=memory_types, index_for={t: alias_name(t, prefix=prefix)
                                                     for t in (*memory_types, *crediting)},
                      scope=memory_scope(subject=subject), include_superseded=include_superseded,
                      since=since, until=until, crediting=crediting,
                      stale_index=alias_name(MemoryType.SEMANTIC, prefix=prefix), as_of=as_of)
    searched = legs_search(es=es, reading=reading, vector=vector, topic_vector=topic_vector, allowed=allowed,
                           explain=explain, owner=str(subject.user_id), options=options)
    reranker = get_reranker()
    rerank = reranker.rerank if reranker else None
    ranked = hits_rank(searched, reading=reading, now=now, k=max(k, HOP_HITS) if reading.gathers else k,
                       exclude=exclude, rerank=rerank, options=options)
    if reading.gathers:  # a second hop from the first hits found (search.hop_leg), then ranked again
        first = [(h.id, h.source.get("session_id")) for h in ranked.hits if h.memory_type is MemoryType.EPISODIC]
        hop = hop_leg(es=es, first=first[:HOP_HITS], allowed=allowed, options=options)
        searched = with_leg(searched, hop) if hop is not None else searched
        ranked = hits_rank(searched, reading=reading, now=now, k=k, exclude=exclude, rerank=rerank, options=options)
    return Recall(hits=ranked_explain(ranked, explain=explain, passages_max=options.passages_max), reading=reading,
                  entities=entities_explain(reading, searched, options=options))
