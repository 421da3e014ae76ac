"""The median of several scale runs: ``scale.json`` files in, one ``scale.md``, ``scale.json`` and
the two plots out, every figure the median of the runs' (benchmarks/scale_data.median_of_runs).

    for run in 1 2 3; do scripts/bench --scale --out docs/bench/runs/$run; done
    python benchmarks/scale_median.py docs/bench/runs/*/scale.json --out docs/bench
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_load  # noqa: E402
import scale_data  # noqa: E402


def markdown(median: dict) -> str:
    top = median["rows"][-1]["memories"]
    lines = [f"Scale curve, {median['label']}; each figure is the median of the runs' figures.", ""]
    for n, run in enumerate(median["runs"], start=1):
        new, heavy = run["recall_new"][-1], run["heavy_new"][-1]
        minutes = f"{run['minutes']:.1f} min" if run.get("minutes") is not None else "duration not recorded"
        machine = run.get("machine")
        speed = (f"embedder {machine['embed_sentences_per_s']:.0f} sentences/s at the start" if machine
                 else "machine not recorded")
        lines.append(f"- run {n}: {run['label']}; {minutes}; {speed}; at {top:,} memories recall (new question) "
                     f"p50 / p95 {new['p50']:.1f} / {new['p95']:.1f} ms, heavy end-user {heavy['p50']:.1f} / "
                     f"{heavy['p95']:.1f} ms; bulk import {run['import_eps'][-1]:.0f} episodes/s")
    lines += ["", scale_data.markdown_table(median["rows"])]
    if median["http"]:
        lines += ["", f"HTTP at {top:,} memories:", "", http_load.markdown(median["http"])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="scale.json of each run")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    median = scale_data.median_of_runs([json.loads(p.read_text()) for p in args.runs])
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(median)
    (args.out / "scale.md").write_text(text + "\n")
    (args.out / "scale.json").write_text(json.dumps(median, indent=2) + "\n")
    scale_data.plots(median["rows"], median["http"], out=args.out, label=median["label"])
    print(text)


if __name__ == "__main__":
    main()
