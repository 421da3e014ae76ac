"""The interfaces every embedding and reranking provider implements, and their shared error."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable


class EmbeddingError(Exception):
    """A provider failed: unreachable service, HTTP error, malformed response or unusable model files.

    ``status_code`` is the HTTP status when the failure was an HTTP error response, else None.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors for an Elasticsearch ``dense_vector`` field (cosine similarity).

    Contract: every vector has exactly ``dims`` floats and unit L2 norm; ``embed_documents``
    returns one vector per input text, in input order; the same text always yields the same
    vector whether embedded alone or in a batch (up to float rounding); failures raise
    :class:`EmbeddingError`. ``name`` identifies the model, so vectors from different models
    are never mixed in one index. Implementations are safe to share between threads.
    """

    name: str
    dims: int

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order; batched internally. An empty input gives []."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The unit vector for a search query (may be served from a cache)."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, text) pairs for relevance.

    Contract: one float per text, in input order, higher = more relevant. Scores are
    comparable within a call only. Failures raise :class:`EmbeddingError`.
    """

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Relevance score of each text for ``query``. An empty ``texts`` gives []."""
        ...


class QueryCache:
    """A thread-safe LRU cache of query vectors, with hit/miss counters. ``maxsize <= 0`` disables it.

    It holds no text: entries are keyed by the SHA-256 digest of the text, since the texts are
    turns and their sentences as well as questions, and a forgotten memory's text must not stay
    in a process's memory. Entries expire ``ttl`` seconds after they were computed (0: never), which
    bounds how long any process keeps a forgotten text's vector; ``clear`` drops them at once (the
    process that runs a forget or an erase does).
    """

    def __init__(self, maxsize: int, *, ttl: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.maxsize = maxsize
        self.ttl = ttl
        self.hits = 0
        self.misses = 0
        self._clock = clock
        self._data: OrderedDict[bytes, tuple[float, tuple[float, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def _fresh(self, stored_at: float) -> bool:
        return self.ttl <= 0 or self._clock() - stored_at < self.ttl

    def get_or_compute(self, text: str, compute: Callable[[str], list[float]]) -> list[float]:
        """The cached vector for ``text``, else ``compute(text)`` (stored). Returns a fresh list each time."""
        if self.maxsize <= 0:
            return compute(text)
        key = self._key(text)
        with self._lock:
            entry = self._data.get(key)
            if entry is not None and self._fresh(entry[0]):
                self._data.move_to_end(key)
                self.hits += 1
                return list(entry[1])
            self.misses += 1
        # Computed outside the lock: concurrent misses for one text may both compute, which is harmless.
        vector = compute(text)
        with self._lock:
            self._data[key] = (self._clock(), tuple(vector))
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return vector

    def __contains__(self, text: str) -> bool:
        entry = self._data.get(self._key(text))
        return entry is not None and self._fresh(entry[0])

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)
