"""Rerankers: a remote rerank API over HTTP, or a local BERT cross-encoder in numpy."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tokenizers import Tokenizer

from ._bert import BertConfig, BertEncoder, load_tokenizer
from .base import EmbeddingError
from .openai import make_client, post_json

RerankApi = Literal["cohere", "tei"]


class HttpReranker:
    """A :class:`~embeddings.base.Reranker` backed by a rerank HTTP endpoint.

    ``api="cohere"`` (Cohere, Jina, Voyage-style, vLLM, LiteLLM): POST
    ``{"model", "query", "documents", "top_n"}`` and read ``{"results": [{"index",
    "relevance_score"}]}``. ``api="tei"`` (Hugging Face text-embeddings-inference
    ``/rerank``): POST ``{"query", "texts"}`` and read ``[{"index", "score"}]``. ``url``
    is the full endpoint. Texts go in requests of at most ``batch_size`` (TEI refuses more
    than 32 by default); a cross-encoder scores each pair on its own, so scores from
    different requests compare.
    """

    def __init__(
        self,
        *,
        url: str,
        model: str = "",
        api_key: str = "",
        api: RerankApi = "cohere",
        batch_size: int = 32,
        timeout: float = 10.0,
    ) -> None:
        if not url:
            raise ValueError("HttpReranker needs a url")
        if api not in ("cohere", "tei"):
            raise ValueError(f"unknown rerank api {api!r}: expected 'cohere' or 'tei'")
        self.url = url
        self.model = model
        self.api = api
        self.batch_size = max(1, batch_size)
        self._client = make_client(api_key, timeout)

    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]:
        if self.api == "tei":
            return {"query": query, "texts": texts}
        payload: dict[str, Any] = {"query": query, "documents": texts, "top_n": len(texts)}
        if self.model:
            payload["model"] = self.model
        return payload

    def _rerank_batch(self, query: str, texts: list[str]) -> list[float]:
        body = post_json(self._client, self.url, self._payload(query, texts), "rerank service")
        what = f"rerank service at {self.url}"
        key = "score" if self.api == "tei" else "relevance_score"
        scores: list[float | None] = [None] * len(texts)
        try:
            results = body if self.api == "tei" else body["results"]
            for item in results:
                index = int(item["index"])
                if not 0 <= index < len(texts):
                    raise EmbeddingError(f"{what} returned index {index} for {len(texts)} texts")
                scores[index] = float(item[key])
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{what} returned an unexpected response ({exc!r}): {str(body)[:300]}") from exc
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            raise EmbeddingError(f"{what} returned no score for texts {missing[:10]}")
        return [s for s in scores if s is not None]

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order (higher = more relevant)."""
        texts = list(texts)
        out: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._rerank_batch(query, texts[start : start + self.batch_size]))
        return out

    def close(self) -> None:
        """Close the underlying HTTP connection pool."""
        self._client.close()


class CrossEncoderReranker:
    """A local BERT-family cross-encoder (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) in numpy.

    ``path`` holds a Hugging Face ``BertForSequenceClassification`` export: config.json,
    model.safetensors and tokenizer.json. Each (query, text) pair is encoded as
    ``[CLS] query [SEP] text [SEP]`` (truncated to ``max_length`` tokens, longest first),
    then score = classifier(tanh(pooler([CLS]))) — the raw logit, as the ms-marco models
    are used. Only single-logit (num_labels == 1) heads are supported. Loads lazily and
    thread-safely on first use.
    """

    def __init__(self, path: str | Path, *, batch_size: int = 32, max_length: int = 512) -> None:
        self.path = Path(path)
        self.config = BertConfig.from_dir(self.path)
        if self.config.num_labels != 1:
            raise EmbeddingError(f"{self.path}: cross-encoder must have one output label, has {self.config.num_labels}")
        self.batch_size = max(1, batch_size)
        self.max_length = min(max_length, self.config.max_position_embeddings)
        self._lock = threading.Lock()
        self._loaded: tuple[Tokenizer, BertEncoder, np.ndarray, np.ndarray] | None = None

    @property
    def is_loaded(self) -> bool:
        """Whether the weights and tokenizer have been loaded."""
        return self._loaded is not None

    def load(self) -> None:
        """Load the weights and tokenizer now instead of on first use (servers do at start)."""
        self._load()

    def _load(self) -> tuple[Tokenizer, BertEncoder, np.ndarray, np.ndarray]:
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    tokenizer = load_tokenizer(self.path, self.max_length)
                    encoder = BertEncoder(self.path, self.config)
                    try:
                        weight, bias = encoder.extra["classifier.weight"], encoder.extra["classifier.bias"]
                    except KeyError as exc:
                        raise EmbeddingError(f"{self.path}: no classifier head ({exc} missing)") from exc
                    if weight.shape != (1, self.config.hidden_size):
                        raise EmbeddingError(f"{self.path}: classifier.weight has shape {weight.shape}")
                    if encoder.pooler_w is None:
                        raise EmbeddingError(f"{self.path}: no pooler weights")
                    self._loaded = (tokenizer, encoder, np.ascontiguousarray(weight.T), bias)
        return self._loaded

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance logit per text, in input order (higher = more relevant)."""
        texts = list(texts)
        if not texts:
            return []
        tokenizer, encoder, weight, bias = self._load()
        encodings = tokenizer.encode_batch([(query, text) for text in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        scores = np.empty(len(texts), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            ids, types, mask = BertEncoder.pad([encodings[i] for i in rows])
            pooled = encoder.pool(encoder.forward(ids, types, mask))
            scores[rows] = (pooled @ weight + bias)[:, 0]
        return scores.tolist()
