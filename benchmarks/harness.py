"""What every benchmark process shares, none of it Engram's code: the environment fixed before
Django starts (a run-unique index prefix, a scratch database), the one percentile function, the
machine a run ran on, and results written as JSON and Markdown (and their median over runs)."""

from __future__ import annotations

import atexit
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN_ID = uuid.uuid4().hex[:8]


def configure_environment() -> str:
    """Fix, before Django reads its settings, what a benchmark process must not share with any other:
    its index prefix (under the configured one) and, unless ``DATABASE_URL`` names one, a scratch
    SQLite database removed at exit. Child processes (the ASGI server) inherit both. Returns the prefix."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    os.environ.setdefault("DJANGO_DEBUG", "false")  # measured as served: DEBUG records every query
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    prefix = f"{os.environ.get('ES_INDEX_PREFIX', 'engram')}-bench-{RUN_ID}"
    os.environ["ES_INDEX_PREFIX"] = prefix
    if not os.environ.get("DATABASE_URL"):
        scratch = Path(tempfile.mkdtemp(prefix="engram-bench-"))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'db.sqlite3'}"
        if not os.environ.get("ENGRAM_ENCRYPTION_KEYS"):  # keys minted here die with the database
            from cryptography.fernet import Fernet

            os.environ["ENGRAM_ENCRYPTION_KEYS"] = Fernet.generate_key().decode()
    return prefix


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- figures


def percentiles(samples: Sequence[float], points: Sequence[int] = (50, 95, 99)) -> dict[str, float] | None:
    """``n``, ``p<point>`` for each point and ``mean`` of ``samples``, interpolating linearly between
    the two nearest ranks (numpy's default, ``statistics.quantiles(method="inclusive")``); None
    when there are no samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    out: dict[str, float] = {"n": len(ordered)}
    for point in points:
        position = (len(ordered) - 1) * point / 100
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        out[f"p{point}"] = round(ordered[low] + (ordered[high] - ordered[low]) * (position - low), 2)
    out["mean"] = round(statistics.fmean(ordered), 2)
    return out


def ms(p: dict | None, points: Sequence[int] = (50, 95, 99), digits: int = 1) -> str:
    """``"p50 / p95 / p99"`` of a ``percentiles`` result, as the tables print it."""
    return " / ".join(f"{p[f'p{point}']:.{digits}f}" for point in points) if p else "n/a"


def timed_ms(fn: Callable, *args, **kwargs) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000.0


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, ..., utime at [11],
    stime at [12]); None if the process is gone or unreadable."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def rss_mb(pid: int | str = "self") -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# ---------------------------------------------------------------- the machine

_CPU_FEATURES = [("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"),
                 ("amx_tile", "AMX")]


def cpu_description(cpuinfo: str) -> str:
    """The CPU model and the vector instruction sets onnxruntime's kernels care about, from the
    text of ``/proc/cpuinfo`` (its first processor): e.g. "AMD EPYC; AVX2, AVX-512, AVX-512 VNNI"."""
    model, flags = "unknown CPU", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    features = [name for flag, name in _CPU_FEATURES if flag in flags]
    return f"{model}; {', '.join(features) or 'no AVX2'}"


def machine_record(probe: Callable[[], float]) -> dict[str, Any]:
    """What a run ran on: CPU, cores, load, the code's commit and the machine's own speed (``probe``)."""
    try:
        cpu = cpu_description(Path("/proc/cpuinfo").read_text())
    except OSError:
        cpu = "unknown CPU"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip():
            commit += "+changes"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
            "probe_ms": probe(), "commit": commit, "python": platform.python_version()}


# ---------------------------------------------------------------- results


def default_out(suite: str) -> Path:
    """Raw runs stay out of the repository: under the state directory unless ``--out`` says otherwise."""
    state = Path(os.environ.get("ENGRAM_STATE_DIR", ROOT / ".engram"))
    return state / "bench" / f"{suite}-{datetime.now(UTC):%Y%m%d-%H%M%S}"


def header(record: dict[str, Any]) -> str:
    """One line that says what a result is: suite, when, how long, on what, at which commit."""
    m = record["machine"]
    when = datetime.fromisoformat(record["began"])
    speed = f", machine probe {m['probe_ms']} ms"
    if "probe_end_ms" in record:
        speed += f" -> {record['probe_end_ms']} ms"
    return (f"`{' '.join(['python -m benchmarks', record['suite'], *record['argv']])}`: {when:%Y-%m-%d %H:%M} UTC, "
            f"{record['minutes']} min; {m['cpu']}, {m['cores']} cores, load average {m['load_average']} at the start"
            f"{speed}; commit {m['commit']}.")


def write_result(record: dict[str, Any], markdown: str, out: Path) -> None:
    """``<suite>.json`` (the record: machine, arguments, results) and ``<suite>.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{record['suite']}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    (out / f"{record['suite']}.md").write_text(header(record) + "\n\n" + markdown + "\n")


def median_of_runs(runs: list[Any]) -> Any:
    """One result from several of the same suite and arguments: every number the median of the
    runs' (whole numbers stay whole), anything else kept when all runs agree and None when they
    do not (a key some runs lack among them). Runs whose lists differ in length measured
    different sizes or client counts: ValueError."""
    first = runs[0]
    if all(isinstance(run, dict) for run in runs):
        keys = dict.fromkeys(key for run in runs for key in run)
        return {key: median_of_runs([run.get(key) for run in runs]) for key in keys}
    if all(isinstance(run, list) for run in runs):
        if len({len(run) for run in runs}) != 1:
            raise ValueError("the runs measured different sizes or client counts")
        return [median_of_runs(list(items)) for items in zip(*runs, strict=True)]
    if first is None or isinstance(first, bool) or not all(isinstance(run, (int, float)) for run in runs):
        return first if all(run == first for run in runs) else None
    if all(isinstance(run, int) for run in runs):
        return round(statistics.median(runs))
    return statistics.median(runs)
