"""What ``es_setup`` changes in documents as it copies them into a new index version: ids of
imported episodes namespaced, concepts and episodes' dates added, vectors computed again by today's embedder."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from elasticsearch import Elasticsearch

from engram_core.es.schema import VECTOR_FIELDS, MemoryType
from memory_app.providers import get_embedder
from memory_app.providers import concepts_of_memory
from memory_app.services import context as derived
from memory_app.services.store import client_memory_id, embedding_text, episode_dates
from tenants.models import Subject


_SERVER_ID = re.compile(r"[0-9a-f]{32}(-\d+)?")


def client_id_rekey(doc_id: str, source: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """es_setup's migration of an imported episode stored under a client's raw id (before ids were
    namespaced): its new, namespaced id, and the raw id kept as ``client_id``. Ids Engram
    assigned, and documents of end-users no longer known, are left as they are."""
    if (source.get("memory_type") != MemoryType.EPISODIC.value or source.get("source") != "import"
            or source.get("client_id") or _SERVER_ID.fullmatch(doc_id)):
        return None
    subject = Subject.objects.filter(tenant__slug=source.get("tenant_id"), user_id=source.get("user_id")).first()
    if subject is None:
        return None
    return (client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id, client_id=doc_id),
            {**source, "client_id": doc_id})


def migration_rekey(doc_id: str, source: dict[str, Any], *, concepts: bool) -> tuple[str, dict[str, Any]] | None:
    """es_setup's change to a migrated document (None: none): ``client_id_rekey``, and the concepts
    of a memory stored before they existed (language.concepts; with ``concepts`` on, as es_setup
    reads ENGRAM_CONCEPTS) and the dates of an episode stored before them (``store.episode_dates``),
    computed as a write computes them."""
    rekeyed = client_id_rekey(doc_id, source)
    doc_id, source = rekeyed or (doc_id, source)
    if not isinstance(source.get("text"), str):
        return rekeyed
    added: dict[str, Any] = {}
    if "concepts" not in source and concepts:
        added["concepts"] = concepts_of_memory(source)
    if (source.get("memory_type") == MemoryType.EPISODIC.value and "states_time" not in source
            and (occurred := _stored_time(source.get("occurred_at"))) is not None):
        added.update(episode_dates(text=source["text"], occurred_at=occurred))
    return (doc_id, {**source, **added}) if added else rekeyed


def _stored_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def vectors_rebuild(es: Elasticsearch, index: str, memory_type: MemoryType, hits: list[dict[str, Any]]) -> None:
    """Compute the vector fields of documents again, in place in each hit's ``_source``, as a write
    of them would today: an index migration calls this when the embedder changed
    (``engram_core.es.schema``). An episode's context is its explicit ``context`` or the texts of
    its ``context_ids`` still in ``index``, as on the write path."""
    sources = [hit["_source"] for hit in hits]
    for source in sources:
        for field in VECTOR_FIELDS:
            source.pop(field, None)
    if memory_type is not MemoryType.EPISODIC:
        vectors = get_embedder().embed_documents([embedding_text(memory_type, s) for s in sources])
        for source, vector in zip(sources, vectors, strict=True):
            source["embedding"] = vector
        return
    texts = derived.resolve(es=es, index=index, ids=[i for s in sources if s.get("context") is None
                                                    for i in s.get("context_ids") or ()])
    items = [(s["text"], [s["context"]] if s.get("context") is not None
              else [texts[i] for i in s.get("context_ids") or () if i in texts]) for s in sources]
    options = derived.ContextOptions.from_settings()  # a rebuild's entry: the settings of today's writes
    for source, fields in zip(sources, derived.episode_vectors(items, options=options), strict=True):
        source.update(fields)
