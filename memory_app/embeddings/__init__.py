"""Embedding and reranking providers, chosen by Django settings.

``get_embedder()`` and ``get_reranker()`` build the configured provider on first call and
return that same instance afterwards; ``clear_cache()`` forgets it (tests, settings
changes). Building is cheap: model weights load lazily on first use, or at once with
``warm_up()``, which the WSGI and ASGI entry points call (``ENGRAM_WARM_UP``, default on), so a
server's first requests do not wait seconds for a local model to load.

Settings (all optional):

- ``ENGRAM_EMBEDDER``: "minilm" (default, local all-MiniLM-L6-v2, 384 dims) or "openai".
- ``ENGRAM_EMBEDDER_RUNTIME``: for "minilm", "onnx-int8" (default: int8 MatMul weights), "onnx"
  or "numpy" (the float weights; the same vectors);
  ``ENGRAM_EMBEDDER_THREADS`` (onnxruntime's intra-op threads per batch, 1) and
  ``ENGRAM_EMBEDDER_WORKERS`` (batches of one call run at once, 0: min(CPUs, 4)).
- ``ENGRAM_EMBEDDER_BATCH_SIZE`` (32), ``ENGRAM_EMBEDDER_QUERY_CACHE_SIZE`` (1024).
- ``ENGRAM_OPENAI_EMBEDDINGS_URL`` ("https://api.openai.com/v1"), ``..._MODEL``
  ("text-embedding-3-small"), ``..._API_KEY`` (""), ``..._DIMS`` (1536).
- ``ENGRAM_RERANKER``: "none" (default), "http" or "cross-encoder".
- ``ENGRAM_RERANKER_API``: "cohere" (default; also Jina) or "tei"; ``ENGRAM_RERANKER_URL``,
  ``ENGRAM_RERANKER_MODEL``, ``ENGRAM_RERANKER_API_KEY``, ``ENGRAM_RERANKER_BATCH_SIZE`` (32).
- ``ENGRAM_RERANKER_PATH``: directory of a local BERT cross-encoder (for "cross-encoder").
- ``ENGRAM_HTTP_TIMEOUT`` (10.0 seconds) for both HTTP providers.
"""

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
                                  workers=int(_setting("ENGRAM_EMBEDDER_WORKERS", 0)))
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
