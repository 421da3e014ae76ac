"""The interfaces every embedding and reranking provider implements, and their shared error."""

from __future__ import annotations

import hashlib
import os
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
    :class:`EmbeddingError`. ``name`` identifies the model; ``space`` identifies the vectors:
    two embedders with the same ``space`` give the same vector for a text (up to float rounding).
    Each index records the space its vectors were made in, and an index of another space is
    re-embedded by ``es_setup``, so vectors of two spaces never mix in one index.
    Implementations are safe to share between threads.
    """

    name: str
    space: str
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
    """A thread-safe cache of query vectors, with hit/miss counters. ``maxsize <= 0`` disables it.

    It holds no text: entries are keyed by the SHA-256 digest of the text, since the texts are
    turns and their sentences as well as questions, and a forgotten memory's text must not stay
    in a process's memory. With ``ttl`` > 0 an entry expires ``ttl`` seconds after it was
    computed and is dropped by the next use of the cache or, in an idle process, by a sweeper
    thread within a quarter of ``ttl`` more, which bounds how long any process keeps a forgotten
    text's vector; ``clear`` drops them all at once (the process that runs a forget or an erase
    does). Entries leave in the order they were computed (oldest first, also when ``maxsize`` is
    reached): a hit does not extend an entry's life.
    """

    def __init__(self, maxsize: int, *, ttl: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.maxsize = maxsize
        self.ttl = ttl
        self.hits = 0
        self.misses = 0
        self._clock = clock
        self._data: OrderedDict[bytes, tuple[float, tuple[float, ...]]] = OrderedDict()
        self._lock = threading.Lock()
        self._sweeper_pid: int | None = None

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def _expire(self) -> None:
        # Called under the lock. Entries are in the order they were stored, so the expired ones lead.
        if self.ttl <= 0:
            return
        cutoff = self._clock() - self.ttl
        while self._data:
            key, (stored_at, _vector) = next(iter(self._data.items()))
            if stored_at > cutoff:
                break
            del self._data[key]

    def _sweep_forever(self) -> None:
        while True:
            time.sleep(max(1.0, self.ttl / 4))
            with self._lock:
                self._expire()

    def _ensure_sweeper(self) -> None:
        # One daemon thread per process (a forked worker starts its own), only once something is stored.
        if self.ttl > 0 and self._sweeper_pid != os.getpid():
            self._sweeper_pid = os.getpid()
            threading.Thread(target=self._sweep_forever, name="engram-vector-cache-expiry", daemon=True).start()

    def get_or_compute(self, text: str, compute: Callable[[str], list[float]]) -> list[float]:
        """The cached vector for ``text``, else ``compute(text)`` (stored). Returns a fresh list each time."""
        if self.maxsize <= 0:
            return compute(text)
        key = self._key(text)
        with self._lock:
            self._expire()
            entry = self._data.get(key)
            if entry is not None:
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
            self._ensure_sweeper()
        return vector

    def __contains__(self, text: str) -> bool:
        with self._lock:
            self._expire()
            return self._key(text) in self._data

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._data)
