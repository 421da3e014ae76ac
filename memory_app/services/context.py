"""Derived episode context: the turns just before an episode in its session.

An episode with a ``session_id`` and no explicit ``context`` gets the ``ContextOptions.turns``
(ENGRAM_DERIVED_CONTEXT_TURNS) episodes of its session that precede it: their ids as ``context_ids`` (returned) and their text as
``derived_context`` (searched and embedded, never returned: it is a copy of other memories). When
one of them is forgotten, every episode naming it is re-indexed without its text, and an explicit
``context`` (the client's own text) loses its quotes of it (``services.forget.contexts``; what is
looked for: ``phrases_of``).

The operator's settings for this are read once, at the entry of a write, forget or rebuild
(``ContextOptions.from_settings``), and passed down.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from elasticsearch import Elasticsearch

from memory_app.providers import get_embedder
from language.passages import passages_of


@dataclass(frozen=True)
class ContextOptions:
    """How an episode's context is derived and embedded: the settings, as read at an entry."""

    turns: int  # ENGRAM_DERIVED_CONTEXT_TURNS: the session's turns before an episode that are its context
    embed: str  # ENGRAM_EMBED_CONTEXT, as set (``embed_context_mode`` reads it where it is used)
    weight: float  # ENGRAM_EMBED_CONTEXT_WEIGHT
    passages: bool  # ENGRAM_EMBED_PASSAGES: a text of several sentences gets a vector per sentence
    passages_max: int  # ENGRAM_PASSAGES_MAX

    @classmethod
    def from_settings(cls) -> ContextOptions:
        return cls(turns=settings.ENGRAM_DERIVED_CONTEXT_TURNS, embed=str(settings.ENGRAM_EMBED_CONTEXT),
                   weight=settings.ENGRAM_EMBED_CONTEXT_WEIGHT, passages=bool(settings.ENGRAM_EMBED_PASSAGES),
                   passages_max=settings.ENGRAM_PASSAGES_MAX)


@dataclass(frozen=True)
class Derived:
    ids: list[str]
    texts: tuple[str, ...]

    @property
    def text(self) -> str:
        return _join(self.texts)


def _join(texts: Sequence[str]) -> str:
    return "\n".join(texts)


def _session_episodes(*, es: Elasticsearch, index: str, scope: dict[str, str], session_ids: Sequence[str],
                      until: datetime, size: int) -> dict[str, list[dict[str, Any]]]:
    """The stored episodes of each session that occurred at or before ``until``, latest first
    (one ``_msearch``, read through the subject's own key)."""
    body: list[dict] = []
    for session_id in session_ids:
        body += [{"index": index},
                 {"size": size, "_source": ["text", "occurred_at", "created_at"],
                  "query": {"bool": {"filter": [
                      {"term": {"tenant_id": scope["tenant_id"]}}, {"term": {"user_id": scope["user_id"]}},
                      {"term": {"session_id": session_id}},
                      {"range": {"occurred_at": {"lte": until.isoformat()}}}]}},
                  "sort": [{"occurred_at": "desc"}, {"created_at": "desc"}]}]
    out: dict[str, list[dict[str, Any]]] = {}
    if not body:
        return out
    for session_id, response in zip(session_ids, es.msearch(searches=body)["responses"], strict=True):
        if "error" in response:
            raise RuntimeError(f"context lookup failed: {response['error']}")
        out[session_id] = [{"id": h["_id"], **h["_source"]} for h in response["hits"]["hits"]]
    return out


def context_for_turn(*, es: Elasticsearch, index: str, scope: dict[str, str], session_id: str | None,
                     occurred_at: datetime, turns: int) -> Derived | None:
    """The derived context of one new episode (None without a session or predecessors): its
    session's ``turns`` episodes before it."""
    if not session_id or turns <= 0:
        return None
    stored = _session_episodes(es=es, index=index, scope=scope, session_ids=[session_id], until=occurred_at, size=turns)
    before = list(reversed(stored[session_id]))  # oldest first
    if not before:
        return None
    return Derived(ids=[e["id"] for e in before], texts=tuple(e["text"] for e in before))


def contexts_for_batch(*, es: Elasticsearch, index: str, scope: dict[str, str], episodes: Sequence[Any],
                       turns: int) -> list[Derived | None]:
    """Derived contexts for an import batch, in its order. ``episodes`` have ``id``, ``text``,
    ``occurred_at``, ``session_id`` and ``context``. An episode's predecessors are the stored
    episodes of its session and the batch's own, by occurred_at, stored ones first at equal
    times (they arrived earlier), batch ones in batch order. Episodes with an explicit context
    still count as predecessors of later ones. ``turns``: as in ``context_for_turn``."""
    result: list[Derived | None] = [None] * len(episodes)
    if turns <= 0:
        return result
    by_session: dict[str, list[int]] = defaultdict(list)
    for n, e in enumerate(episodes):
        if e.session_id:
            by_session[e.session_id].append(n)
    if not by_session:
        return result
    sessions = list(by_session)
    latest = max(e.occurred_at for e in episodes if e.session_id)
    # Enough stored predecessors for every batch episode of the session, however they interleave.
    stored = _session_episodes(es=es, index=index, scope=scope, session_ids=sessions, until=latest,
                               size=min(10000, turns * max(len(v) for v in by_session.values()) + turns))
    for session_id, positions in by_session.items():
        timeline = [(datetime.fromisoformat(s["occurred_at"]), 0, n, s["id"], s["text"])
                    for n, s in enumerate(reversed(stored[session_id]))]
        timeline += [(episodes[n].occurred_at, 1, n, episodes[n].id, episodes[n].text) for n in positions]
        timeline.sort(key=lambda t: (t[0], t[1], t[2]))
        for place, (_when, from_batch, n, _id, _text) in enumerate(timeline):
            if not from_batch or episodes[n].context is not None:
                continue
            before = timeline[max(0, place - turns):place]
            if before:
                result[n] = Derived(ids=[t[3] for t in before], texts=tuple(t[4] for t in before))
    return result


def phrases_of(texts: Iterable[str], *, passages_max: int) -> list[str]:
    """What of forgotten texts is looked for in explicit contexts: each text whole, and each of its
    sentences of three words or more (a client may quote one sentence of a turn; the first
    ``passages_max``, as the passages are cut when a text is embedded)."""
    phrases = [t.strip() for t in texts if t.strip()]
    phrases += [p.strip() for t in texts for p in passages_of(t, limit=passages_max) if len(p.split()) >= 3]
    return sorted(dict.fromkeys(phrases), key=len, reverse=True)  # the longest replaced first


def resolve(*, es: Elasticsearch, index: str, ids: Sequence[str]) -> dict[str, str]:
    """Texts of the given episodes that still exist (through the subject's key)."""
    if not ids:
        return {}
    docs = es.mget(index=index, ids=list(dict.fromkeys(ids)), source=["text"])["docs"]
    return {d["_id"]: d["_source"]["text"] for d in docs if d.get("found")}


def embed_context_mode(value: str) -> str:
    """ENGRAM_EMBED_CONTEXT's ``value`` as one of "composed", "joint" or "off" ("true"/"false" are
    read as "composed"/"off")."""
    mode = value.strip().lower()
    aliases = {"true": "composed", "1": "composed", "yes": "composed", "false": "off", "0": "off", "no": "off"}
    mode = aliases.get(mode, mode)
    if mode not in ("composed", "joint", "off"):
        raise ImproperlyConfigured(f"ENGRAM_EMBED_CONTEXT must be 'composed', 'joint' or 'off', not {mode!r}")
    return mode


def episode_vectors(items: Sequence[tuple[str, Sequence[str]]], *, options: ContextOptions,
                    cached: bool = False) -> list[dict[str, Any]]:
    """The vector fields of each episode given as (its text, its context): the explicit context as
    one part, or the texts of the derived context's episodes, oldest first. Each is a dict with
    ``embedding`` (the episode's vector) and ``passages`` (one vector per passage, searched by the
    recall's passage leg; ``language.passages``; only for a text of several sentences), to merge
    into the stored document.

    ``options.embed``, ``composed`` (default): unit(v(text) + ``options.weight`` · mean(v(part))), each
    text embedded on its own. The turn stays the vector's anchor, as on the BM25 side (context at
    ENGRAM_CONTEXT_BOOST), and a text is embedded once however many later turns carry it as
    context: an import embeds each turn once instead of three turns' worth of tokens, and a
    turn whose predecessors were embedded recently (``cached``: through the embedder's vector cache, which
    the turn's own recall shares) embeds only itself. ``joint``: context and text embedded as
    one text (the previous default). ``off``: the text alone.

    With ``options.passages`` (composed and off modes) a text of several sentences is embedded
    sentence by sentence: v(text) is the unit sum of its passages' vectors, and passage i's vector
    is unit(v(passage i) + 0.5 · v(text) + weight · mean(v(part))), i.e. the sentence anchored in
    its turn and its context. A one-sentence text gets no passages: its one passage would be the
    episode's own vector, which the whole-vector search already finds with the same score, and
    every stored passage is one more vector to index and scan.
    """
    embedder = get_embedder()
    mode = embed_context_mode(options.embed)
    if mode == "joint":
        return [{"embedding": v} for v in embedder.embed_documents([_join([*parts, text]) for text, parts in items])]
    if mode == "off":
        items = [(text, ()) for text, _parts in items]
    texts = list(dict.fromkeys(t for text, parts in items for t in (text, *parts)))
    split = {t: passages_of(t, limit=options.passages_max) if options.passages else [t] for t in texts}
    unique = list(dict.fromkeys(p for t in texts for p in split[t]))
    if cached:  # the providers here are symmetric: a query's vector is its document vector
        found = [embedder.embed_query(t) for t in unique]
    else:
        found = embedder.embed_documents(unique)
    sentence = dict(zip(unique, np.asarray(found, dtype=np.float64), strict=True))
    whole = {t: _unit(np.sum([sentence[p] for p in split[t]], axis=0)) for t in texts}
    weight = options.weight
    out = []
    for text, parts in items:
        context = weight * np.mean([whole[p] for p in parts], axis=0) if parts and weight > 0 else 0.0
        vector = _unit(whole[text] + context)
        fields: dict[str, Any] = {"embedding": vector.tolist()}
        if len(split[text]) > 1:
            fields["passages"] = [{"embedding": _unit(sentence[p] + 0.5 * whole[text] + context).tolist()}
                                  for p in split[text]]
        out.append(fields)
    return out


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / (np.linalg.norm(vector) or 1.0)
