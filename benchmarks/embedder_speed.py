"""MiniLM runtimes side by side: single-query latency, batch throughput, CPU cost, and agreement.

    python benchmarks/embedder_speed.py [--runtimes numpy,onnx,onnx-int8] [--queries 150] [--docs 512]
                                        [--int8-graph-from REV] [--layouts 2x1,1x2]

No Elasticsearch needed. The runtimes take turns query by query, so a machine shared with
other jobs slows them alike; CPU milliseconds per query (process time, all threads) are given
beside wall time because they move much less with contention. Agreement: cosine of each
runtime's vectors with the numpy runtime's on the fixture corpus's sentences and questions.
``--int8-graph-from REV`` adds the int8 graph as commit REV built it (``git show
REV:memory_app/embeddings/_onnx.py``), as the runtime ``onnx-int8@REV``, so that two versions
of the graph are measured in one sitting, taking turns. ``--layouts TxW,...`` adds the int8
runtime with T onnxruntime threads per batch and W batches at once (``ENGRAM_EMBEDDER_THREADS``,
``ENGRAM_EMBEDDER_WORKERS``), as the runtime ``onnx-int8 TxW``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import memory_app.embeddings._onnx as onnx_graph  # noqa: E402
from memory_app.embeddings.minilm import MiniLMEmbedder  # noqa: E402

CORPUS = ROOT / "engram_eval" / "corpora" / "eval_corpus.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", default="numpy,onnx,onnx-int8")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads per batch")
    parser.add_argument("--layouts", default="", help="also onnx-int8 as TxW: T threads per batch, W batches at once")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--docs", type=int, default=512)
    parser.add_argument("--int8-graph-from", metavar="REV", help="also the int8 graph of this git revision")
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
    for layout in filter(None, args.layouts.split(",")):
        threads, workers = (int(n) for n in layout.split("x"))
        runtime = f"onnx-int8 {threads}x{workers}"
        embedders[runtime] = MiniLMEmbedder(runtime="onnx-int8", threads=threads, workers=workers, query_cache_size=0)
        embedders[runtime].embed_query("load")
        runtimes.append(runtime)
    if args.int8_graph_from:
        runtime = f"onnx-int8@{args.int8_graph_from}"
        embedders[runtime] = _embedder_with_graph_of(args.int8_graph_from, threads=args.threads)
        runtimes.append(runtime)
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
    batch_cpu: dict[str, list[float]] = {r: [] for r in runtimes}
    for _ in range(3):
        for runtime, embedder in embedders.items():
            started, c = time.perf_counter(), time.process_time()
            embedder.embed_array(docs)
            rates[runtime].append(len(docs) / (time.perf_counter() - started))
            batch_cpu[runtime].append((time.process_time() - c) * 1000.0 / len(docs))
    reference = MiniLMEmbedder(runtime="numpy").embed_array(sentences + questions)
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    print("| runtime | query p50 ms | query p95 ms | query CPU ms (mean) | batch sentences/s (median of 3) "
          "| batch CPU ms per sentence | cosine to numpy: mean / min |")
    print("|---|---|---|---|---|---|---|")
    for runtime, embedder in embedders.items():
        q = statistics.quantiles(sorted(wall[runtime]), n=100, method="inclusive")
        cos = (embedder.embed_array(sentences + questions) * reference).sum(axis=1)
        print(f"| {runtime} | {q[49]:.1f} | {q[94]:.1f} | {statistics.fmean(cpu[runtime]):.1f} "
              f"| {statistics.median(rates[runtime]):.0f} | {statistics.median(batch_cpu[runtime]):.2f} "
              f"| {np.mean(cos):.5f} / {np.min(cos):.5f} |")


def _embedder_with_graph_of(rev: str, *, threads: int) -> MiniLMEmbedder:
    """An int8 MiniLM embedder whose ONNX graph is built by ``_onnx.py`` as it was at ``rev``."""
    source = subprocess.run(["git", "show", f"{rev}:memory_app/embeddings/_onnx.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("memory_app.embeddings._onnx_at_rev", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "memory_app.embeddings"
    exec(compile(source, f"{rev}:_onnx.py", "exec"), module.__dict__)  # noqa: S102  (our own history)
    current = onnx_graph.build_bert_graph
    onnx_graph.build_bert_graph = module.build_bert_graph  # read when the session is built, just below
    try:
        embedder = MiniLMEmbedder(runtime="onnx-int8", threads=threads, query_cache_size=0)
        embedder.embed_query("load")
    finally:
        onnx_graph.build_bert_graph = current
    return embedder


if __name__ == "__main__":
    main()
