"""Embedding and reranking providers, chosen by settings (``ENGRAM_EMBEDDER``, ``ENGRAM_RERANKER``
and their options, listed in ``memory_app/config/settings/base.py``).

``get_embedder()`` and ``get_reranker()`` build the configured provider once per process;
``clear_cache()`` forgets it; weights load on first use or at ``warm_up()``."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .base import Embedder, EmbeddingError, Reranker

__all__ = ["Embedder", "EmbeddingError", "Reranker", "clear_cache", "get_embedder", "get_reranker", "warm_up"]


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
        from .minilm import MiniLMEmbedder

        try:
            return MiniLMEmbedder(batch_size=batch_size, query_cache_size=cache_size, query_cache_seconds=cache_seconds,
                                  runtime=str(_setting("ENGRAM_EMBEDDER_RUNTIME", "onnx-int8")).lower(),
                                  threads=int(_setting("ENGRAM_EMBEDDER_THREADS", 1)),
                                  workers=int(_setting("ENGRAM_EMBEDDER_WORKERS", 0)),
                                  arena=bool(_setting("ENGRAM_EMBEDDER_ARENA", False)))
        except EmbeddingError as exc:
            raise ImproperlyConfigured(f"ENGRAM_EMBEDDER_RUNTIME: {exc}") from exc
    if kind == "openai":
        from .openai import OpenAIEmbedder

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
        from .rerankers import HttpReranker

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
        from .rerankers import CrossEncoderReranker

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
