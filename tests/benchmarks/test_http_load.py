"""benchmarks/http_load.py's CPU split: readings by process class, per request (no server needed)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def http_load(monkeypatch):
    # The benchmark scripts import their siblings by module name (they run as scripts).
    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from benchmarks import http_load

    return http_load


def test_cpu_split_counts_processes_seen_at_both_readings_per_request_and_per_second(http_load):
    before = ({1: ("elasticsearch", 10.0), 2: ("engram server", 5.0), 3: ("engram server", 1.0),
               9: ("other", 7.0)},
              {"query phases": 100, "fetch phases": 10, "documents indexed": 0, "refreshes": 3}, 2.0)
    after = ({1: ("elasticsearch", 14.0), 2: ("engram server", 7.0), 3: ("engram server", 2.0),
              4: ("redis", 50.0),  # started between the readings: its past CPU is not this step's
              9: ("other", 7.5)},
             {"query phases": 1100, "fetch phases": 60, "documents indexed": 20, "refreshes": 8}, 2.5)
    split = http_load.cpu_split(before, after, requests=100, wall=2.0)
    assert split["cpu_ms_per_request"] == {"elasticsearch": 40.0, "engram server": 30.0, "redis": 0.0,
                                           "load generator": 0.0, "other": 5.0}
    assert split["cores_busy"]["elasticsearch"] == 2.0 and split["cores_busy"]["engram server"] == 1.5
    assert split["node_per_request"] == {"query phases": 10.0, "fetch phases": 0.5, "documents indexed": 0.2,
                                         "refreshes": 0.05, "jit ms": 5.0}  # its compiler threads: 0.5 s
    assert "node_per_request" not in http_load.cpu_split((before[0], None, None), (after[0], None, None),
                                                         requests=100, wall=2.0)
    # No node statistics (no monitor credential), a node on this machine: its compiler's CPU alone.
    assert http_load.cpu_split((before[0], None, 2.0), (after[0], None, 2.5), requests=100,
                               wall=2.0)["node_per_request"] == {"jit ms": 5.0}


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_this_process_is_the_load_generator(http_load):
    readings = http_load._proc_cpu()
    assert readings[os.getpid()][0] == "load generator"
    assert readings[os.getpid()][1] > 0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_compiler_threads_are_read_only_from_a_node(http_load):
    readings = http_load._proc_cpu()
    assert http_load._jit_cpu({pid: r for pid, r in readings.items() if r[0] != "elasticsearch"}) is None
    # A process with no "CompilerThre…" threads (this one, classed as a node): none of its CPU counts.
    assert http_load._jit_cpu({os.getpid(): ("elasticsearch", readings[os.getpid()][1])}) == 0.0


def test_the_table_shows_the_split(http_load):
    row = {"clients": 8, "seconds": 30.0, "errors": 0, "error_kinds": {}, "throughput_rps": 25.0,
           "turn": {"count": 1, "p50_ms": 1, "p95_ms": 1, "p99_ms": 1, "mean_ms": 1},
           "recall": {"count": 1, "p50_ms": 1, "p95_ms": 1, "p99_ms": 1, "mean_ms": 1},
           "cpu": {"cpu_ms_per_request": {"elasticsearch": 43.3, "engram server": 34.5, "redis": 0.7,
                                          "load generator": 2.3, "other": 0.8},
                   "cores_busy": {"elasticsearch": 1.07, "engram server": 0.85, "redis": 0.02,
                                  "load generator": 0.06, "other": 0.02},
                   "node_per_request": {"query phases": 22.61}}}
    table = http_load.markdown([row])
    assert "| 8 | 43.3 (1.07) | 34.5 (0.85) | 0.7 (0.02) | 2.3 (0.06) | 0.8 (0.02) | query phases 22.61 |" in table
    assert "machine's speed" not in table  # a result from before the probe existed
    table = http_load.markdown([{**row, "machine_probe_ms": {"before": 151.2, "after": 240.0}}])
    assert "ms of CPU, lower is faster): 151.2 before, 240.0 after" in table


def test_the_machine_probe_is_the_median_of_its_rounds_of_one_fixed_workload(http_load, monkeypatch):
    import machine_speed

    assert 1 < machine_speed.workload() < 60_000  # CPU ms of the real workload, once
    runs = iter([210.04, 150.0, 246.3])
    monkeypatch.setattr(machine_speed, "workload", lambda: next(runs))
    assert machine_speed.probe(rounds=3) == 210.0


def test_every_step_and_the_warm_up_say_text_of_their_own(http_load):
    seeds = http_load.step_seeds(3)
    assert seeds.steps[0] == 7  # a first step says what every first step said before warm-ups existed
    assert len({*seeds.steps, seeds.warmup}) == 4
    # Different seeds give different conversations and questions (no cached vector carries over).
    first, warm = http_load.Synth(seed=seeds.steps[0]), http_load.Synth(seed=seeds.warmup)
    assert {first.question(n) for n in range(50)}.isdisjoint({warm.question(n) for n in range(50)})
    # scripts/bench's own warm-up (--seed 3) says nothing a measured step of the default seed says.
    bench_warmup = http_load.step_seeds(1, seed=3)
    assert not {*bench_warmup.steps, bench_warmup.warmup} & {*seeds.steps, seeds.warmup}


def test_the_warm_up_may_mix_turns_into_a_recall_only_measurement(http_load, monkeypatch):
    runs = []

    def fake_run(**kwargs):
        runs.append(kwargs)
        return {"seconds": kwargs["seconds"], "throughput_rps": 1.0, "errors": 0, "clients": kwargs["clients"],
                "latency_ms": {}, "requests": {}}

    monkeypatch.setattr(http_load, "run", fake_run)
    monkeypatch.setattr(http_load, "markdown", lambda results: "")
    argv = ["http_load", "--url", "http://x", "--token", "t", "--clients", "8", "--warmup", "5", "--turn-share", "0"]
    monkeypatch.setattr("sys.argv", [*argv, "--warmup-turn-share", "0.5"])
    http_load.main()
    # End-users gain memories during the warm-up; the measured step asks recalls only.
    assert [r["turn_share"] for r in runs] == [0.5, 0.0]
    runs.clear()
    monkeypatch.setattr("sys.argv", argv)  # by default the warm-up is the measured load
    http_load.main()
    assert [r["turn_share"] for r in runs] == [0.0, 0.0]


def test_turns_may_limit_their_recall_to_some_memory_types(http_load, monkeypatch):
    runs = []
    monkeypatch.setattr(http_load, "run", lambda **kwargs: runs.append(kwargs) or {
        "seconds": 1, "throughput_rps": 1.0, "errors": 0, "clients": kwargs["clients"]})
    monkeypatch.setattr(http_load, "markdown", lambda results: "")
    argv = ["http_load", "--url", "http://x", "--token", "t", "--clients", "8", "--warmup", "5"]
    monkeypatch.setattr("sys.argv", [*argv, "--turn-types", "catalog"])
    http_load.main()
    assert [r["turn_types"] for r in runs] == [["catalog"], ["catalog"]]  # the warm-up's turns too
    session = {"session_id": "s"}
    assert http_load.turn_body("hi", session, ["catalog"]) == {"text": "hi", "k": 5, "session_id": "s",
                                                               "types": ["catalog"]}
    runs.clear()
    monkeypatch.setattr("sys.argv", argv)  # by default a turn's recall searches every type
    http_load.main()
    assert [r["turn_types"] for r in runs] == [None, None]
    assert http_load.turn_body("hi", {}, None) == {"text": "hi", "k": 5}


def test_server_timing_summary_splits_refreshed_requests_from_the_others(http_load):
    assert http_load.server_timing("refresh;dur=12.5, search;dur=40, refreshed") == (
        {"refresh": 12.5, "search": 40.0}, {"refreshed"})
    assert http_load.server_timing("") == ({}, set())
    rows = [(300.0, {"refresh": 200.0, "search": 50.0}, {"refreshed"}),
            *[(100.0, {"refresh": 5.0, "search": 40.0}, set())] * 9]
    summary = http_load.timing_summary(rows)
    assert summary["requests"] == 10 and summary["refreshed_share"] == 0.1
    assert summary["refreshed"] == {"p50_ms": 300.0, "p95_ms": 300.0}
    assert summary["others"] == {"p50_ms": 100.0, "p95_ms": 100.0}
    assert summary["phases"]["refresh"] == {"p50_ms": 5.0, "p95_ms": 200.0}
    assert set(summary["phases"]) == {"refresh", "search"}  # phases no request recorded are left out
    row = {"clients": 8, "seconds": 30.0, "errors": 0, "error_kinds": {}, "throughput_rps": 25.0,
           "turn": {"count": 1, "p50_ms": 1, "p95_ms": 1, "p99_ms": 1, "mean_ms": 1},
           "recall": {"count": 10, "p50_ms": 100, "p95_ms": 300, "p99_ms": 300, "mean_ms": 120,
                      "server_timing": summary}}
    table = http_load.markdown([row])
    assert ("| 8 | recall | 10.0% | 300.0 / 300.0 | 100.0 / 100.0 | 5.0 / 200.0 | n/a | 40.0 / 50.0 | n/a | n/a |"
            in table)
