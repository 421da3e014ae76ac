"""The embedder's memory and speed in a process of its own, this tree against an earlier revision,
side by side: each round starts a fresh process per tree that builds the int8 embedder as a web
process does (malloc arenas capped and the heap trimmed when the tree has them), then embeds from
``--threads`` threads for ``--seconds`` (single texts and small batches); RSS at rest and after.

    python -m benchmarks embedder [--before main] [--rounds 3] [--seconds 20] [--threads 8]

The earlier tree is ``git archive``'d into a scratch directory and run with this virtualenv.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import ROOT, log

STORES = False  # no database, no Elasticsearch

# Run with the tree as the working directory, so that its packages are the ones imported.
_CHILD = """
import json, random, sys, threading, time

seconds, threads, single = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
batch, arenas = int(sys.argv[4]), int(sys.argv[5])

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))

try:
    from config.serving import malloc_arenas_limit, malloc_release
except ImportError:  # before the layout of issue 66, or before the arenas were capped
    try:
        from memory_app.config.serving import malloc_arenas_limit, malloc_release
    except ImportError:
        malloc_arenas_limit = malloc_release = None
if malloc_arenas_limit:
    malloc_arenas_limit(arenas)
try:
    from embeddings.minilm import MiniLMEmbedder
except ImportError:  # a tree from before the embeddings package left memory_app
    from memory_app.embeddings.minilm import MiniLMEmbedder

embedder = MiniLMEmbedder(runtime="onnx-int8", threads=1, workers=0, query_cache_size=0)
embedder.embed_query("load the model")
if malloc_release:
    malloc_release()
rest = rss()
words = ("the a of my she he went bought visited doctor garden music paris sister brother yesterday week coffee "
         "book running dog cat school work project meeting friend birthday trip mountain river concert").split()
stop, lock, latencies, texts = time.monotonic() + seconds, threading.Lock(), [], [0]

def client(seed):
    rng = random.Random(seed)
    while time.monotonic() < stop:
        if rng.random() < single:
            began = time.perf_counter()
            embedder.embed_query(" ".join(rng.choice(words) for _ in range(rng.randint(6, 30))))
            with lock:
                latencies.append((time.perf_counter() - began) * 1000)
                texts[0] += 1
        else:
            batch_texts = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 60)))
                           for _ in range(rng.randint(1, batch))]
            embedder.embed_documents(batch_texts)
            with lock:
                texts[0] += len(batch_texts)

began = time.monotonic()
pool = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
for thread in pool:
    thread.start()
for thread in pool:
    thread.join()
latencies.sort()
print(json.dumps({"rss_rest_mb": round(rest), "rss_after_mb": round(rss()),
                  "texts_per_s": round(texts[0] / (time.monotonic() - began), 1),
                  "single_p50_ms": round(latencies[len(latencies) // 2], 1),
                  "single_p95_ms": round(latencies[int(len(latencies) * 0.95)], 1)}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--before", default="main", help="the revision to compare against (default main)")
    parser.add_argument("--rounds", type=int, help="before/after pairs (default 3; --quick 1)")
    parser.add_argument("--seconds", type=float, help="load per process (default 20; --quick 3)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--single-share", type=float, default=0.8, help="share of calls that embed one text")
    parser.add_argument("--batch", type=int, default=8, help="largest batch of the other calls")
    parser.add_argument("--arenas", type=int, default=2, help="malloc arenas, as ENGRAM_MALLOC_ARENAS")


def tree_at(revision: str, into: Path) -> Path:
    """The packages the embedder imports, as they were at ``revision`` (those it had of them)."""
    names = subprocess.run(["git", "ls-tree", "--name-only", revision], cwd=ROOT, check=True, capture_output=True,
                           text=True).stdout.split()
    packages = [p for p in ("embeddings", "config", "memory_app", "engram_core", "tenants") if p in names]
    archive = subprocess.run(["git", "archive", revision, *packages], cwd=ROOT,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(tree: Path, *, seconds: float, threads: int, single: float, batch: int, arenas: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(seconds), str(threads), str(single), str(batch),
                          str(arenas)], cwd=tree, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    rounds = args.rounds or (1 if args.quick else 3)
    seconds = args.seconds or (3 if args.quick else 20)
    data: dict = {"before": args.before, "threads": args.threads, "seconds": seconds, "single_share": args.single_share,
                  "batch": args.batch, "runs": {"before": [], "after": []}}
    with tempfile.TemporaryDirectory(prefix="engram-embedder-") as scratch:
        trees = {"before": tree_at(args.before, Path(scratch)), "after": ROOT}
        for n in range(rounds):
            for kind, tree in trees.items():
                data["runs"][kind].append(measure(tree, seconds=seconds, threads=args.threads,
                                                  single=args.single_share, batch=args.batch, arenas=args.arenas))
                log(f"round {n + 1} {kind}: {data['runs'][kind][-1]}")
                save(data)
    return data


def markdown(data: dict) -> str:
    lines = [f"The int8 embedder in a fresh process, {data['threads']} threads for {data['seconds']} s "
             f"({data['single_share']:.0%} single texts, else batches of up to {data['batch']}); "
             f"before: {data['before']}, after: this tree; one value per round.", "",
             "| | RSS at rest, MB | RSS after the load, MB | texts/s | single text p50 / p95 ms |",
             "|---|---:|---:|---:|---|"]
    for kind in ("before", "after"):
        runs = data["runs"][kind]
        lines.append(f"| {kind} | {', '.join(str(r['rss_rest_mb']) for r in runs)} | "
                     f"{', '.join(str(r['rss_after_mb']) for r in runs)} | "
                     f"{', '.join(str(r['texts_per_s']) for r in runs)} | "
                     f"{', '.join(str(r['single_p50_ms']) + ' / ' + str(r['single_p95_ms']) for r in runs)} |")
    return "\n".join(lines)
