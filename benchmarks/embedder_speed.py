"""MiniLM runtimes side by side: single-query latency, batch throughput, CPU cost, and agreement.

    python benchmarks/embedder_speed.py [--runtimes numpy,onnx,onnx-int8] [--queries 150] [--docs 512]

No Elasticsearch needed. The runtimes take turns query by query, so a machine shared with
other jobs slows them alike; CPU milliseconds per query (process time, all threads) are given
beside wall time because they move much less with contention. Agreement: cosine of each
runtime's vectors with the numpy runtime's on the fixture corpus's sentences and questions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory_app.embeddings.minilm import MiniLMEmbedder  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "eval_corpus.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", default="numpy,onnx,onnx-int8")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--docs", type=int, default=512)
    args = parser.parse_args()
    corpus = json.loads(CORPUS.read_text())
    sentences = [m["text"] for s in corpus["subjects"] for m in s["episodic"] + s["semantic"]]
    questions = [q["question"] for q in corpus["questions"]]
    runtimes = args.runtimes.split(",")
    embedders = {}
    for runtime in runtimes:
        started = time.perf_counter()
        embedders[runtime] = MiniLMEmbedder(runtime=runtime, threads=args.threads, query_cache_size=0)
        embedders[runtime].embed_query("load")
        print(f"{runtime}: first use (load / build graph) {time.perf_counter() - started:.1f} s", file=sys.stderr)
    wall: dict[str, list[float]] = {r: [] for r in runtimes}
    cpu: dict[str, list[float]] = {r: [] for r in runtimes}
    for question in (questions * 2)[: args.queries]:
        for runtime, embedder in embedders.items():
            w, c = time.perf_counter(), time.process_time()
            embedder.embed_query(question)
            wall[runtime].append((time.perf_counter() - w) * 1000.0)
            cpu[runtime].append((time.process_time() - c) * 1000.0)
    docs = (sentences * 8)[: args.docs]
    rates: dict[str, list[float]] = {r: [] for r in runtimes}
    for _ in range(3):
        for runtime, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_array(docs)
            rates[runtime].append(len(docs) / (time.perf_counter() - started))
    reference = MiniLMEmbedder(runtime="numpy").embed_array(sentences + questions)
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    print("| runtime | query p50 ms | query p95 ms | query CPU ms (mean) | batch sentences/s (median of 3) "
          "| cosine to numpy: mean / min |")
    print("|---|---|---|---|---|---|")
    for runtime, embedder in embedders.items():
        q = statistics.quantiles(sorted(wall[runtime]), n=100, method="inclusive")
        cos = (embedder.embed_array(sentences + questions) * reference).sum(axis=1)
        print(f"| {runtime} | {q[49]:.1f} | {q[94]:.1f} | {statistics.fmean(cpu[runtime]):.1f} "
              f"| {statistics.median(rates[runtime]):.0f} | {np.mean(cos):.5f} / {np.min(cos):.5f} |")


if __name__ == "__main__":
    main()
