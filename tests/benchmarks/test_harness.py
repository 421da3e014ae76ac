"""benchmarks/harness.py: the process's environment, the one percentile function, results and
their median (no Elasticsearch needed)."""

from __future__ import annotations

import json
import os
import statistics

import pytest

from benchmarks import harness


def test_percentiles_interpolate_between_the_nearest_ranks():
    samples = [float(v) for v in range(1, 101)]  # 1..100
    p = harness.percentiles(samples)
    assert p == {"n": 100, "p50": 50.5, "p95": 95.05, "p99": 99.01, "mean": 50.5}
    # As statistics.quantiles' inclusive method, which the published figures were computed with.
    q = statistics.quantiles(samples, n=100, method="inclusive")
    assert (p["p50"], p["p95"], p["p99"]) == (round(q[49], 2), round(q[94], 2), round(q[98], 2))
    assert harness.percentiles([7.0], (50, 95)) == {"n": 1, "p50": 7.0, "p95": 7.0, "mean": 7.0}
    assert harness.percentiles([]) is None
    assert harness.ms(p) == "50.5 / 95.0 / 99.0" and harness.ms(None) == "n/a"


def test_the_environment_gives_the_run_a_prefix_and_a_database_of_its_own(monkeypatch):
    monkeypatch.setenv("ES_INDEX_PREFIX", "engram")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("ENGRAM_ENCRYPTION_KEYS", raising=False)
    prefix = harness.configure_environment()
    assert prefix == os.environ["ES_INDEX_PREFIX"] == f"engram-bench-{harness.RUN_ID}"
    assert os.environ["DATABASE_URL"].startswith("sqlite:///") and "engram-bench-" in os.environ["DATABASE_URL"]
    assert os.environ["ENGRAM_ENCRYPTION_KEYS"]  # keys minted into a scratch database need a key of its own
    monkeypatch.setenv("ES_INDEX_PREFIX", "engram")
    monkeypatch.setenv("DATABASE_URL", "postgres://somewhere/db")
    harness.configure_environment()
    assert os.environ["DATABASE_URL"] == "postgres://somewhere/db"  # a database named is used as it is


def _record(results, **extra):
    return {"suite": "latency", "argv": ["--quick"], "began": "2030-01-02T03:04:05+00:00", "minutes": 1.5,
            "machine": {"cpu": "AMD EPYC; AVX2", "cores": 2, "load_average": 0.5, "probe_ms": 80.0, "commit": "abc1234",
                        "python": "3.11"}, "results": results, **extra}


def test_a_result_is_written_as_json_and_markdown_under_one_header(tmp_path):
    record = _record({"rows": [1]}, probe_end_ms=90.0)
    harness.write_result(record, "| table |", tmp_path)
    assert json.loads((tmp_path / "latency.json").read_text())["results"] == {"rows": [1]}
    text = (tmp_path / "latency.md").read_text()
    assert text.startswith("`python -m benchmarks latency --quick`: 2030-01-02 03:04 UTC, 1.5 min; AMD EPYC; AVX2, "
                           "2 cores, load average 0.5 at the start, machine probe 80.0 ms -> 90.0 ms; commit abc1234.")
    assert text.endswith("\n\n| table |\n")


def test_the_default_output_stays_out_of_the_repository(monkeypatch, tmp_path):
    monkeypatch.setenv("ENGRAM_STATE_DIR", str(tmp_path))
    out = harness.default_out("scale")
    assert out.parent == tmp_path / "bench" and out.name.startswith("scale-")


def _run(p50, heap_used, *, sizes=(1000, 10000), clients=(1, 8), rps=10.0):
    latency = {"n": 40, "p50": p50, "p95": 2 * p50, "p99": 3 * p50, "mean": p50}
    rows = [{"memories": size, "heavy_memories": size // 5, "import_eps": p50 * 3, "import_eps_large": None,
             "recall_new": latency, "heavy_new": latency, "heap_used_mb": heap_used, "heap_max_mb": 512}
            for size in sizes]
    http = [{"clients": c, "throughput_rps": rps * c, "errors": 0, "error_kinds": {},
             "turn": {"n": 10, "p50": p50}, "recall": {"n": 20, "p50": p50}} for c in clients]
    return {"rows": rows, "http": http}


def test_the_median_of_runs_takes_every_figure_from_the_middle_run_of_each():
    median = harness.median_of_runs([_run(30.0, 300, rps=12.0), _run(10.0, 100, rps=20.0), _run(20.0, 200, rps=9.0)])
    top = median["rows"][-1]
    assert top["recall_new"] == {"n": 40, "p50": 20.0, "p95": 40.0, "p99": 60.0, "mean": 20.0}
    assert top["memories"] == 10000 and top["import_eps"] == 60.0 and top["import_eps_large"] is None
    assert top["heap_used_mb"] == 200 and top["heap_max_mb"] == 512
    assert [h["throughput_rps"] for h in median["http"]] == [12.0, 96.0]  # per step, not per run
    assert harness.median_of_runs([{"label": "a"}, {"label": "b"}]) == {"label": None}  # text that differs


def test_runs_that_measured_different_sizes_are_not_merged():
    with pytest.raises(ValueError, match="sizes"):
        harness.median_of_runs([_run(10.0, 100), _run(10.0, 100, sizes=(1000, 5000, 10000))])
    # Errors by kind that one run saw and another did not: no median.
    assert harness.median_of_runs([{"503": 2}, {}]) == {"503": None}


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni
processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2
"""


def test_cpu_description_names_the_model_and_the_vector_instruction_sets():
    assert harness.cpu_description(CPUINFO) == "AMD EPYC; AVX2, AVX-512, AVX-512 VNNI"
    assert harness.cpu_description("model name : Old CPU\nflags : fpu sse2 avx\n") == "Old CPU; no AVX2"


def test_the_machine_record_names_the_commit_and_the_probe():
    record = harness.machine_record(lambda: 12.5)
    assert record["probe_ms"] == 12.5 and record["cores"] == os.cpu_count()
    assert record["commit"] != "unknown"
