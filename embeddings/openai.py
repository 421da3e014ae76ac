"""Embeddings from any OpenAI-compatible ``POST {url}/embeddings`` endpoint.

That covers OpenAI itself, Azure-style proxies, vLLM, Ollama's /v1, LiteLLM, TEI's
OpenAI route and similar. Request ``{"model", "input": [...]}``; response
``{"data": [{"index", "embedding"}, ...]}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from ._bert import l2_normalize
from .base import EmbeddingError, QueryCache

_BODY_SNIPPET = 300


def post_json(client: httpx.Client, url: str, payload: dict[str, Any], what: str) -> Any:
    """POST ``payload`` as JSON and return the decoded JSON body.

    Raises EmbeddingError naming ``what`` on transport errors (with the exception text),
    non-2xx statuses (with the status and the start of the body) and non-JSON bodies.
    """
    try:
        response = client.post(url, json=payload)
    except httpx.HTTPError as exc:
        raise EmbeddingError(f"{what} request to {url} failed: {type(exc).__name__}: {exc}") from exc
    if not response.is_success:
        snippet = response.text[:_BODY_SNIPPET]
        raise EmbeddingError(
            f"{what} at {url} returned HTTP {response.status_code}: {snippet}", status_code=response.status_code
        )
    try:
        return response.json()
    except ValueError as exc:
        raise EmbeddingError(f"{what} at {url} returned a non-JSON body: {response.text[:_BODY_SNIPPET]}") from exc


def make_client(api_key: str, timeout: float) -> httpx.Client:
    """An httpx client with a bearer token (if any) and one timeout for connect/read/write/pool."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(headers=headers, timeout=httpx.Timeout(timeout))


class OpenAIEmbedder:
    """An :class:`~embeddings.base.Embedder` backed by an OpenAI-compatible HTTP API.

    ``dims`` is configured, not discovered, since the Elasticsearch mapping is created from
    it: a response of any other width raises EmbeddingError. Vectors are L2-normalised here
    even if the service already does so. Thread-safe (httpx.Client is).
    """

    def __init__(
        self,
        *,
        url: str,
        model: str,
        dims: int,
        api_key: str = "",
        batch_size: int = 32,
        timeout: float = 10.0,
        query_cache_size: int = 1024,
        query_cache_seconds: float = 0.0,
    ) -> None:
        if not url or not model or dims <= 0:
            raise ValueError("OpenAIEmbedder needs a url, a model and positive dims")
        self.endpoint = url.rstrip("/") + "/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self.space = f"{self.name} {dims}"  # one model at another width is another space
        self.dims = dims
        self.batch_size = max(1, batch_size)
        self.query_cache = QueryCache(query_cache_size, ttl=query_cache_seconds)
        self._client = make_client(api_key, timeout)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        body = post_json(self._client, self.endpoint, {"model": self.model, "input": texts}, "embedding service")
        what = f"embedding service at {self.endpoint}"
        try:
            items = sorted(body["data"], key=lambda item: int(item["index"]))
            if [int(item["index"]) for item in items] != list(range(len(texts))):
                raise EmbeddingError(f"{what} returned indices that do not match the {len(texts)} inputs")
            vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"{what} returned an unexpected response ({exc!r}): {str(body)[:_BODY_SNIPPET]}"
            ) from exc
        if vectors.shape != (len(texts), self.dims):
            expected = (len(texts), self.dims)
            raise EmbeddingError(f"{what} returned vectors of shape {vectors.shape}, expected {expected}")
        if not np.isfinite(vectors).all():
            raise EmbeddingError(f"{what} returned non-finite values")
        return l2_normalize(vectors)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in input order, in requests of at most ``batch_size`` inputs."""
        texts = list(texts)
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._embed_batch(texts[start : start + self.batch_size]).tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        """The unit vector for ``text``, from the query cache when possible."""
        return self.query_cache.get_or_compute(text, lambda t: self._embed_batch([t])[0].tolist())

    def close(self) -> None:
        """Close the underlying HTTP connection pool."""
        self._client.close()
