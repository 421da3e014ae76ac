"""``python -m benchmarks <suite> [args]``: run one suite in this process and write its result.

``scripts/bench <suite> [args]`` starts the services the suite needs first. ``python -m benchmarks
median RESULT.json ... --out DIR`` merges several runs of one suite into their median.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import django

from benchmarks import harness
from benchmarks.machine import probe

SUITES = {  # name: (module, what it measures)
    "latency": ("benchmarks.latency", "service-level recall, turn and supersession latency at corpus sizes; RSS"),
    "http": ("benchmarks.http_load", "the ASGI server under concurrent turns and recalls; optionally the same mix "
                                     "at the service level"),
    "scale": ("benchmarks.scale", "latency at 1k, 10k and 100k memories, then HTTP at the largest"),
    "import": ("benchmarks.bulk_import", "bulk import: episodes/s and CPU per episode"),
    "floor": ("benchmarks.floor", "the CPU floor of one request: an API request, an embedding, one hybrid search"),
    "peers": ("benchmarks.peers", "Engram against Mem0 OSS on LoCoMo conversations, same node and embedder"),
    "inspector": ("benchmarks.inspector_pages", "server render time of the inspector's pages at scale"),
    "machine": ("benchmarks.machine", "the machine's own speed over time (no services)"),
    "embedder": ("benchmarks.embedder_memory", "the embedder's RSS and speed, this tree against an earlier "
                                               "revision (no services)"),
    "embedder_runtimes": ("benchmarks.embedder_runtimes", "the MiniLM runtimes (numpy, the hand-built float and "
                                                         "int8 graphs) against onnxruntime's quantize_dynamic: "
                                                         "vectors, CPU, RSS (no services)"),
    "refresh_modes": ("benchmarks.refresh_modes", "read-your-writes: Elasticsearch's refresh=wait_for and "
                                                  "refresh=true against Engram's deferred refresh"),
    "bridge": ("benchmarks.bridge", "the ASGI -> WSGI bridge on its own against a2wsgi alone: CPU per request "
                                    "(no services)"),
    "audit_links": ("benchmarks.audit_links", "the audit chain's links: HMAC-SHA256 against Ed25519, sign and "
                                              "verify per event (no services)"),
}


def usage() -> str:
    lines = [__doc__.strip(), "", "suites (each takes --help, --quick and --out):"]
    lines += [f"  {name:<10} {about}" for name, (_, about) in SUITES.items()]
    return "\n".join(lines)


def suite_parser(name: str) -> tuple[ModuleType, argparse.ArgumentParser]:
    """The suite's module and its command line: its own arguments, ``--quick`` and ``--out``."""
    suite = importlib.import_module(SUITES[name][0])
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=suite.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes and short steps: proves the suite end to end")
    parser.add_argument("--out", type=Path, help="directory for <suite>.json and <suite>.md "
                                                 "(default: .engram/bench/<suite>-<time>)")
    suite.add_arguments(parser)
    return suite, parser


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*SUITES, "median"):
        print(usage(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        sys.exit(0 if not argv or argv[0] in ("-h", "--help") else 2)
    name, rest = argv[0], argv[1:]
    harness.configure_environment()  # before Django reads its settings
    django.setup()
    if name == "median":
        median(rest)
        return
    suite, parser = suite_parser(name)
    args = parser.parse_args(rest)
    out = args.out = args.out or harness.default_out(name)
    began = datetime.now(UTC)
    record = {"suite": name, "argv": rest, "began": began.isoformat(), "minutes": 0.0,
              "machine": harness.machine_record(probe)}

    def save(results: dict, *, final: bool = False) -> str:
        """Write what is measured so far: a run cut short keeps its finished parts."""
        record.update(results=results, minutes=round((datetime.now(UTC) - began).total_seconds() / 60, 1))
        if final:
            record["probe_end_ms"] = probe()
        text = suite.markdown(results)
        harness.write_result(record, text, out)
        return text

    # Imported once Django is set up: it imports Engram's models.
    from benchmarks.engram import stores

    # A suite runs on the run's own database and indices unless it says it needs neither.
    with stores() if getattr(suite, "STORES", True) else nullcontext():
        text = save(suite.run(args, save), final=True)
    print(harness.header(record) + "\n\n" + text, flush=True)
    harness.log(f"wrote {out / name}.json and .md")


def median(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks median",
                                     description="The median of several runs of one suite (each its <suite>.json).")
    parser.add_argument("results", nargs="+", type=Path, help="<suite>.json files, or directories holding one")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    paths = [next(p.glob("*.json")) if p.is_dir() else p for p in args.results]
    records = [json.loads(p.read_text()) for p in paths]
    names = {r["suite"] for r in records}
    if len(names) != 1:
        raise SystemExit(f"the results are of different suites: {sorted(names)}")
    name = names.pop()
    suite = importlib.import_module(SUITES[name][0])
    results = harness.median_of_runs([r["results"] for r in records])
    text = "\n".join([f"Median of {len(records)} runs, every figure the median of the runs':", "",
                      *(f"- {harness.header(r)}" for r in records), "", suite.markdown(results)])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps({"suite": name, "median_of": records, "results": results},
                                                      indent=1, default=str) + "\n")
    (args.out / f"{name}.md").write_text(text + "\n")
    if hasattr(suite, "plots"):
        suite.plots(results, out=args.out, label=f"median of {len(records)} runs")
    print(text)


if __name__ == "__main__":
    main()
