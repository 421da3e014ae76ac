"""The scale curve: at 1k, 10k and 100k memories over 100 tenants x 4 end-users and a heavy one,
the latency suite's figures (benchmarks/latency.py: recall, turn, supersession, import rate,
footprint), then at the largest size the ASGI server under 1, 2, 4 and 8 concurrent HTTP clients
(benchmarks/http_load.py: a third turns, the rest recalls, over every ordinary end-user of every
tenant, the corpus's questions as text). One corpus, grown in place; two plots beside the result.

    scripts/bench scale [--sizes 1000 10000 100000] [--clients 1 2 4 8] [--http-seconds 30] [--no-http]
    for run in 1 2 3; do scripts/bench scale --out runs/$run; done
    python -m benchmarks median runs/* --out DIR     # every figure the median of the runs'
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Callable
from pathlib import Path

from benchmarks import http_load, latency, load
from benchmarks.harness import log, rss_mb


def add_arguments(parser: argparse.ArgumentParser) -> None:
    latency.corpus_arguments(parser)
    parser.add_argument("--sizes", type=int, nargs="+", help="memories, growing (default 1000 10000 100000; "
                                                             "--quick 1000 5000)")
    parser.add_argument("--queries", type=int, help="recalls per kind and size (default 300; --quick 40)")
    parser.add_argument("--writes", type=int, help="turns and fact supersessions per size (default 60; --quick 10)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--http-seconds", type=float, help="per HTTP step (default 30; --quick 5)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("ENGRAM_WEB_WORKERS", "2")))
    parser.add_argument("--no-http", action="store_true")


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    sizes = args.sizes or ([1000, 5000] if args.quick else [1000, 10000, 100000])
    queries = args.queries or (40 if args.quick else 300)
    writes = args.writes or (10 if args.quick else 60)
    seconds = args.http_seconds or (5 if args.quick else 30)
    rng = random.Random(args.seed)
    corpus, created = latency.corpus_create(args)
    asked = latency.questions(args.seed)
    data = {"tenants": corpus.n_tenants, "users_per_tenant": corpus.users_per_tenant, "created_s": round(created, 1),
            "queries": queries, "writes": writes, "rows": [], "http": [], "http_seconds": seconds,
            "workers": args.workers}
    for size in sizes:
        data["rows"].append(latency.size_row(corpus, size, queries=queries, writes=writes, rng=rng, questions=asked))
        save(data)
    if not args.no_http:
        targets = corpus.targets()
        with http_load.asgi_server(workers=args.workers) as (url, server):
            # Unmeasured: the workers load the model and each end-user's key once.
            load.run_load(sender=lambda: load.http_sender(url), targets=targets, clients=2,
                               seconds=max(5.0, seconds / 3), texts=asked)
            for c in args.clients:
                data["http"].append(load.run_load(sender=lambda: load.http_sender(url), targets=targets,
                                                       clients=c, seconds=seconds, texts=asked))
                log(f"HTTP, {c} clients: {data['http'][-1]['throughput_rps']} req/s")
            data["rss_mb"] = {**load.server_rss(server), "benchmark process": [rss_mb()]}
    plots(data, out=args.out, label=f"{corpus.n_tenants} tenants")
    return data


def markdown(data: dict) -> str:
    text = [latency.markdown(data)]
    if data["http"]:
        text += ["", f"HTTP at {data['rows'][-1]['memories']:,} memories, {data['workers']} ASGI workers, "
                 f"{data['http_seconds']:.0f} s per step, a third turns and the rest recalls over "
                 f"{data['tenants'] * data['users_per_tenant']} end-users:", "", load.steps_table(data["http"])]
        if data.get("rss_mb"):
            text += ["", load.rss_line(data["rss_mb"])]
    return "\n".join(text)


def plots(data: dict, *, out: Path, label: str) -> None:
    """``scale_latency.png`` (recall latency against corpus size) and, with HTTP steps,
    ``scale_throughput.png`` (throughput and p95 against clients)."""
    import matplotlib  # a development dependency: only the plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, http = data["rows"], data["http"]
    sizes = [r["memories"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (title, key) in zip(axes, [("ordinary end-users", "recall_new"), ("heavy end-user", "heavy_new")],
                                strict=True):
        for p, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ax.plot(sizes, [r[key][p] for r in rows], style, label=f"new question {p}")
        ax.plot(sizes, [r[key.replace("new", "repeated")]["p50"] for r in rows], "x-", label="repeated question p50")
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
        ax.set_xlabel("memories in the corpus")
        ax.set_title(f"recall, {title}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("latency, ms")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Engram recall latency vs corpus size (service level), {label}", fontsize=10)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "scale_latency.png", dpi=110)
    plt.close(fig)
    if not http:
        return
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    clients = [r["clients"] for r in http]
    ax.plot(clients, [r["throughput_rps"] for r in http], "o-", color="tab:blue", label="requests/s (all)")
    ax.set_xlabel("concurrent HTTP clients")
    ax.set_ylabel("requests/s", color="tab:blue")
    ax.set_xticks(clients)
    ax2 = ax.twinx()
    for kind, style in (("recall", "s--"), ("turn", "^:")):
        ax2.plot(clients, [r[kind].get("p95") for r in http], style, color="tab:red", label=f"{kind} p95 ms")
    ax2.set_ylabel("p95 latency, ms", color="tab:red")
    handles = [h for a in (ax, ax2) for h in a.get_legend_handles_labels()[0]]
    ax2.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    ax.set_title(f"HTTP at {sizes[-1]:,} memories, {label}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "scale_throughput.png", dpi=110)
    plt.close(fig)
