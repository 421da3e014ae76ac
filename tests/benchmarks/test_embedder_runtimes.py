"""benchmarks/embedder_runtimes.py: onnxruntime's own quantiser as the suite builds it, and the report."""

from __future__ import annotations

import numpy as np

from benchmarks import embedder_runtimes
from embeddings.minilm import MiniLMEmbedder


def test_the_quantisers_variant_is_close_to_float_and_moves_with_its_batch_mates():
    """What the suite measures it for: its vectors near the float ones, each one's own scale gone
    (one per batch tensor), so a text's vector depends on what else is in its batch."""
    texts, _ = embedder_runtimes.sentences()
    texts = texts[:24]
    quantised = embedder_runtimes.ort_dynamic_embedder()
    batched = quantised.embed_array(texts)
    alone = np.stack([quantised.embed_array([text])[0] for text in texts])
    reference = MiniLMEmbedder(runtime="numpy").embed_array(texts)
    assert (batched * reference).sum(axis=1).min() > 0.97
    assert (1 - (alone * batched).sum(axis=1)).max() > 1e-4


def test_the_report_gives_each_runtimes_median():
    run = {"build_s": 1.0, "rss_rest_mb": 131, "rss_after_mb": 215, "batch_cpu_ms": 2.2, "single_cpu_ms": 4.0,
           "cosine_mean": 0.999, "cosine_min": 0.998, "batch_drift_max": 0.0, "same_nearest": 0.978}
    text = embedder_runtimes.markdown({"sentences": 385, "singles": 200, "rounds": 3, "runs": {
        "onnx-int8": [run, {**run, "batch_cpu_ms": 2.6}, {**run, "batch_cpu_ms": 9.0}], "ort-dynamic": []}})
    assert "| onnx-int8 | 1.00 | 131 | 215 | 2.60 | 4.00 | 0.9990 | 0.9980 | 0.00000 | 0.978 |" in text
    assert "ort-dynamic" not in text.split("\n", 2)[2]  # no runs, no row
