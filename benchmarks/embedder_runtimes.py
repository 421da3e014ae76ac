"""The MiniLM embedder's runtimes against onnxruntime's own quantisation tool, each in a fresh
process, variants taking turns:

    python -m benchmarks embedder_runtimes [--rounds 3] [--singles 200]

- ``numpy``: the numpy BERT (the float reference: every cosine is to its vectors);
- ``onnx``: the same weights as the hand-built float ONNX graph;
- ``onnx-int8``: the hand-built int8 graph (the default runtime);
- ``ort-dynamic``: the float graph through ``onnxruntime.quantization.quantize_dynamic`` (weights
  int8 per channel, MatMuls with constant weights only, as ``onnx-int8``), the maintained tool.

Each process builds its embedder as a web process does (malloc arenas capped, heap trimmed), one
onnxruntime thread and one batch at a time, then embeds the fixture corpus's sentences (episodes,
facts and questions) in batches of 32, then its first ``--singles`` sentences one by one. Measured:
build time, CPU per text in batches and alone, RSS at rest and after, cosine to the float
vectors, how far a text's vector moves with its batch-mates (1 − cosine of alone to batched), and
how often a question's nearest sentence is the float vectors' one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.harness import ROOT, log

STORES = False  # no database, no Elasticsearch
VARIANTS = ("numpy", "onnx", "onnx-int8", "ort-dynamic")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, help="rounds of every variant (default 3; --quick 1)")
    parser.add_argument("--singles", type=int, help="sentences embedded one by one (default 200; --quick 20)")


def sentences() -> tuple[list[str], int]:
    """The fixture corpus's memories, then its questions; and the number of memories."""
    from engram_eval.corpora import EVAL_CORPUS

    corpus = json.loads(EVAL_CORPUS.read_text())
    memories = [m["text"] for s in corpus["subjects"] for m in s["episodic"] + s["semantic"]]
    return memories + [q["question"] for q in corpus["questions"]], len(memories)


def ort_dynamic_embedder():
    """A MiniLMEmbedder whose forward pass is the float graph quantised by onnxruntime's tool."""
    import os

    from onnxruntime.quantization import QuantType, quantize_dynamic

    from embeddings._bert import word_embeddings_mapped
    from embeddings._onnx import build_bert_graph, make_session
    from embeddings.minilm import MiniLMEmbedder

    class OrtDynamic(MiniLMEmbedder):
        def _build_forward(self, encoder):
            words = word_embeddings_mapped(self.model_dir)
            graph = build_bert_graph(encoder, int8=False)
            with tempfile.TemporaryDirectory() as scratch:
                source, target = os.path.join(scratch, "float.onnx"), os.path.join(scratch, "int8.onnx")
                Path(source).write_bytes(graph.SerializeToString())
                quantize_dynamic(source, target, per_channel=True, weight_type=QuantType.QInt8,
                                 op_types_to_quantize=["MatMul"], extra_options={"MatMulConstBOnly": True})
                session = make_session(Path(target).read_bytes(), threads=self.threads, arena=self.arena)

            def forward(ids, types, mask):
                feeds = {"word_embeddings": words[ids], "token_type_ids": types, "attention_mask": mask}
                return session.run(["last_hidden_state"], feeds)[0]

            return forward

    return OrtDynamic(runtime="onnx", workers=1, query_cache_size=0)


def child(variant: str, singles: int, out: str) -> None:
    """One variant in this process: prints its figures as JSON, writes its vectors to ``out``."""
    import time

    from config.serving import malloc_arenas_limit, malloc_release
    from embeddings.minilm import MiniLMEmbedder

    def rss() -> float:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))

    malloc_arenas_limit(2)
    texts, _ = sentences()
    embedder = (ort_dynamic_embedder() if variant == "ort-dynamic"
                else MiniLMEmbedder(runtime=variant, workers=1, query_cache_size=0))
    began = time.perf_counter()
    embedder.load()
    built = time.perf_counter() - began
    malloc_release()
    rest = rss()
    cpu = time.process_time()
    batched = embedder.embed_array(texts)
    batch_ms = (time.process_time() - cpu) / len(texts) * 1000
    cpu = time.process_time()
    alone = np.stack([embedder.embed_array([text])[0] for text in texts[:singles]])
    single_ms = (time.process_time() - cpu) / singles * 1000
    np.save(out, batched)
    drift = 1.0 - (alone * batched[:singles]).sum(axis=1)
    print(json.dumps({"build_s": round(built, 2), "rss_rest_mb": round(rest), "rss_after_mb": round(rss()),
                      "batch_cpu_ms": round(batch_ms, 2), "single_cpu_ms": round(single_ms, 2),
                      "batch_drift_max": float(drift.max())}))


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    rounds = args.rounds or (1 if args.quick else 3)
    singles = args.singles or (20 if args.quick else 200)
    texts, memories = sentences()
    results: dict = {"sentences": len(texts), "singles": singles, "rounds": rounds,
                     "runs": {v: [] for v in VARIANTS}}
    with tempfile.TemporaryDirectory() as scratch:
        reference = None
        for round_ in range(rounds):
            for variant in VARIANTS:
                vectors = Path(scratch) / f"{variant}.npy"
                code = ("import sys; from benchmarks.embedder_runtimes import child; "
                        "child(sys.argv[1], int(sys.argv[2]), sys.argv[3])")
                done = subprocess.run([sys.executable, "-c", code, variant, str(singles), str(vectors)], cwd=ROOT,
                                      capture_output=True, text=True, check=True)
                run_ = json.loads(done.stdout.strip().splitlines()[-1])
                got = np.load(vectors)
                if reference is None:  # numpy runs first: the float vectors
                    reference = got
                cosines = (got * reference).sum(axis=1)
                nearest = (np.argmax(got[memories:] @ got[:memories].T, axis=1)
                           == np.argmax(reference[memories:] @ reference[:memories].T, axis=1))
                run_.update(cosine_mean=float(cosines.mean()), cosine_min=float(cosines.min()),
                            same_nearest=float(nearest.mean()))
                results["runs"][variant].append(run_)
                log(f"round {round_ + 1} {variant}: {run_}")
                save(results)
    return results


_COLUMNS = (("build_s", "build s", "{:.2f}"), ("rss_rest_mb", "RSS at rest MB", "{:.0f}"),
            ("rss_after_mb", "RSS after MB", "{:.0f}"), ("batch_cpu_ms", "CPU ms per text, batches of 32", "{:.2f}"),
            ("single_cpu_ms", "CPU ms per text alone", "{:.2f}"), ("cosine_mean", "cosine to float, mean", "{:.4f}"),
            ("cosine_min", "cosine to float, worst", "{:.4f}"), ("batch_drift_max", "moved by batch-mates, worst",
                                                                  "{:.5f}"),
            ("same_nearest", "questions' nearest as float", "{:.3f}"))


def markdown(data: dict) -> str:
    lines = [f"{data['sentences']} fixture sentences ({data['singles']} of them also one by one), "
             f"the median of {data['rounds']} rounds, each variant a fresh process per round, taking turns:", "",
             "| runtime | " + " | ".join(label for _, label, _ in _COLUMNS) + " |",
             "|---|" + "---:|" * len(_COLUMNS)]
    for variant, runs in data["runs"].items():
        if runs:
            cells = [fmt.format(statistics.median(r[key] for r in runs)) for key, _, fmt in _COLUMNS]
            lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
