"""Read-your-writes without waiting for a refresh on the write's response path.

A turn stores its episode without ``refresh=wait_for`` (the write is durable once acknowledged;
only its visibility to search waits for the next refresh, up to ``refresh_interval``). It marks
the subject "refresh pending" in the shared cache (Redis when configured, so every worker
process sees it); the next recall of that subject finds the mark and refreshes the index first,
and only then. After ``ENGRAM_REFRESH_PENDING_SECONDS`` the periodic refresh has made the write
visible anyway (a search-idle shard refreshes before it answers a search), so the mark expires.

The mark names the pending document when there is one (a turn's episode). The recall then first
asks whether the periodic refresh has already made it searchable (a ``realtime=false`` GET, which
reads what search reads) and refreshes only when it has not: under load a subject's next request
usually comes after a periodic refresh, and forcing a refresh per request would cut the index
into many tiny segments (each flushed with its share of the HNSW graph) that merges then redo.
Every index holds one shard, so the newest pending document being searchable means every earlier
write to that index is too.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.cache import cache
from elasticsearch import AuthorizationException

from engram_core.es.schema import MemoryType, alias_name
from tenants.models import Subject
from tenants.selectors import index_prefix_for
from tenants.services import writer_es_client

log = logging.getLogger(__name__)


def _key(subject: Subject) -> str:
    return f"engram:refresh-pending:{subject.pk}"


def refresh_defer(*, subject: Subject, memory_type: MemoryType, memory_id: str = "") -> None:
    """Record that ``subject`` has a write in ``memory_type`` (the document ``memory_id``, when one
    is named) not yet visible to search."""
    cache.set(_key(subject), f"{memory_type.value}:{memory_id}", timeout=settings.ENGRAM_REFRESH_PENDING_SECONDS)


def refresh_ensure(*, subject: Subject) -> bool:
    """Make the subject's deferred writes visible before a recall: when a write is pending and
    not yet searchable, a refresh of its index. Returns whether a refresh was made."""
    pending = cache.get(_key(subject))
    if pending is None:
        return False
    memory_type, _, memory_id = pending.partition(":")
    try:
        prefix = index_prefix_for(tenant=subject.tenant)
        writer = writer_es_client(prefix=prefix)
        index = alias_name(MemoryType(memory_type), prefix=prefix)
        if memory_id and writer.options(ignore_status=404).get(index=index, id=memory_id, realtime=False,
                                                                source=False).get("found"):
            cache.delete(_key(subject))  # a periodic refresh made it searchable already
            return False
        writer.indices.refresh(index=index)
    except AuthorizationException:
        # A writer key minted before it could refresh: wait out the refresh interval instead.
        log.warning("the writer key cannot refresh (minted before it could); waiting for the periodic refresh")
        time.sleep(1.0)
    cache.delete(_key(subject))
    return True
