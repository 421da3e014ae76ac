"""The contexts step of a forget: the other episodes' contexts (derived from a session, or stored
by the client) lose a forgotten memory and are embedded again, in one read, one embedding batch
and one write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elasticsearch import Elasticsearch

from language.phrases import phrases_redacted
from memory_app.services import context as derived
from memory_app.services.forget.forgetting import Forgetting
from memory_app.services.store import episodic_alias, subject_writes
from tenants.models import Subject
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client

# One episode's new context: (its id, its text, the context's parts to embed it with, the fields).
_Change = tuple[str, str, list[str], dict[str, Any]]


def contexts_forget(forgetting: Forgetting) -> int:
    """A forgotten episode leaves the derived contexts it was part of, and its words leave the
    explicit contexts that quote them. Returns how many episodes changed."""
    subject = forgetting.subject
    # Turns stored without waiting for a refresh must be found by the searches that follow.
    with subject_writes(subject=subject) as target:
        target.writer.indices.refresh(index=episodic_alias(subject=subject))
    es, index = subject_es_client(subject=subject), episodic_alias(subject=subject)
    scope = memory_scope(subject=subject)
    # Disjoint: an episode with an explicit context gets no derived one (episodes.episode_write).
    changes = (_without_episode(es=es, index=index, scope=scope, memory_id=forgetting.memory_id)
               + _without_quotes(es=es, index=index, scope=scope, phrases=forgetting.own_phrases))
    return _contexts_write(subject=subject, index=index, changes=changes, options=forgetting.context)


def contexts_redact(*, subject: Subject, phrases: Sequence[str], options: derived.ContextOptions) -> int:
    """Remove the forgotten ``phrases`` (``context.phrases_of``) from the explicit contexts clients
    stored with the subject's other episodes: each quote becomes ``[forgotten]`` and the episode is
    embedded again (``options``: the context settings read at the forget's entry). Returns how many
    episodes changed."""
    es, index = subject_es_client(subject=subject), episodic_alias(subject=subject)
    scope = memory_scope(subject=subject)
    return _contexts_write(subject=subject, index=index,
                           changes=_without_quotes(es=es, index=index, scope=scope, phrases=phrases), options=options)


def _without_episode(*, es: Elasticsearch, index: str, scope: dict[str, str], memory_id: str) -> list[_Change]:
    """The episodes whose derived context held ``memory_id``, with it left out."""
    response = es.search(index=index, size=1000, source={"includes": ["text", "context_ids"]},
                         query={"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}},
                                                    {"term": {"user_id": scope["user_id"]}},
                                                    {"term": {"context_ids": memory_id}}]}})
    dependents = [{"id": h["_id"], **h["_source"]} for h in response["hits"]["hits"]]
    if not dependents:
        return []
    texts = derived.resolve(es=es, index=index, ids=[i for d in dependents for i in d["context_ids"] if i != memory_id])
    changes: list[_Change] = []
    for dep in dependents:
        ids = [i for i in dep["context_ids"] if i != memory_id and i in texts]
        changes.append((dep["id"], dep["text"], [texts[i] for i in ids],
                        {"context_ids": ids or None, "derived_context": "\n".join(texts[i] for i in ids) or None}))
    return changes


def _without_quotes(*, es: Elasticsearch, index: str, scope: dict[str, str], phrases: Sequence[str]) -> list[_Change]:
    """The episodes whose explicit context quotes one of ``phrases`` (found by a phrase search, then
    replaced on word boundaries whatever its case and spacing), each quote replaced."""
    if not phrases:
        return []
    response = es.search(index=index, size=1000, source={"includes": ["text", "context"]},
                         query={"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}},
                                                    {"term": {"user_id": scope["user_id"]}}],
                                         "should": [{"match_phrase": {"context": p}} for p in phrases[:100]],
                                         "minimum_should_match": 1}})
    quoting = [{"id": h["_id"], **h["_source"]} for h in response["hits"]["hits"] if h["_source"].get("context")]
    return [(dep["id"], dep["text"], [new], {"context": new}) for dep in quoting
            if (new := phrases_redacted(dep["context"], phrases)) != dep["context"]]


def _contexts_write(*, subject: Subject, index: str, changes: list[_Change], options: derived.ContextOptions) -> int:
    if not changes:
        return 0
    vectors = derived.episode_vectors([(text, parts) for _id, text, parts, _fields in changes], options=options)
    with subject_writes(subject=subject) as target:
        # One client for the loop (``.options()`` builds one per call); one forgotten meanwhile is fine.
        writer = target.writer.options(ignore_status=404)
        for (memory_id, _text, _parts, fields), vector in zip(changes, vectors, strict=True):
            writer.update(index=index, id=memory_id, doc={**fields, **vector})
        writer.indices.refresh(index=index)
    return len(changes)
