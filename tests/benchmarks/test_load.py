"""benchmarks/load.py: the CPU split by process class, per request; seeds; Server-Timing; the
tables (no server needed)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

from benchmarks import load, machine


def test_cpu_split_counts_processes_seen_at_both_readings_per_request_and_per_second():
    before = ({1: ("elasticsearch", 10.0), 2: ("engram server", 5.0), 3: ("engram server", 1.0),
               9: ("other", 7.0)},
              {"query phases": 100, "fetch phases": 10, "documents indexed": 0, "refreshes": 3}, 2.0)
    after = ({1: ("elasticsearch", 14.0), 2: ("engram server", 7.0), 3: ("engram server", 2.0),
              4: ("redis", 50.0),  # started between the readings: its past CPU is not this step's
              9: ("other", 7.5)},
             {"query phases": 1100, "fetch phases": 60, "documents indexed": 20, "refreshes": 8}, 2.5)
    split = load.cpu_split(before, after, requests=100, wall=2.0)
    assert split["cpu_ms_per_request"] == {"elasticsearch": 40.0, "engram server": 30.0, "redis": 0.0,
                                           "load generator": 0.0, "other": 5.0}
    assert split["cores_busy"]["elasticsearch"] == 2.0 and split["cores_busy"]["engram server"] == 1.5
    assert split["node_per_request"] == {"query phases": 10.0, "fetch phases": 0.5, "documents indexed": 0.2,
                                         "refreshes": 0.05, "jit ms": 5.0}  # its compiler threads: 0.5 s
    assert "node_per_request" not in load.cpu_split((before[0], None, None), (after[0], None, None),
                                                         requests=100, wall=2.0)
    # No node statistics (no monitor credential), a node on this machine: its compiler's CPU alone.
    assert load.cpu_split((before[0], None, 2.0), (after[0], None, 2.5), requests=100,
                               wall=2.0)["node_per_request"] == {"jit ms": 5.0}


def test_on_a_shared_machine_only_our_node_and_our_server_count_as_theirs():
    procs = {1: (0, "init"), 10: (1, "java org.elasticsearch.bootstrap.Elasticsearch"),
             11: (1, "java org.elasticsearch.bootstrap.Elasticsearch"), 12: (1, "redis-server *:6374"),
             20: (1, "python -m benchmarks http"), 21: (20, "python -m uvicorn config.asgi:application"),
             22: (21, "python -c from multiprocessing.spawn import spawn_main"),
             30: (1, "python -m uvicorn config.asgi:application"), 31: (30, "python -c spawn_main"),
             # An embedding server this process started for Mem0's server, and someone else's.
             23: (20, "python -m embeddings.server --port 1"),
             32: (1, "python -m embeddings.server")}
    classes = load.classify(procs, me=20, es_pid=10)
    assert classes == {1: "other", 10: "elasticsearch", 11: "other", 12: "redis", 20: "load generator",
                       21: "engram server", 22: "engram server", 23: "engram server", 30: "other", 31: "other",
                       32: "other"}
    # No node named, no server of our own (--url): every node and every uvicorn counts.
    outside = {pid: p for pid, p in procs.items() if pid not in (21, 22, 23)}
    classes = load.classify(outside, me=20, es_pid=None)
    assert classes[11] == "elasticsearch" and classes[30] == classes[31] == "engram server"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_this_process_is_the_load_generator():
    readings = load._proc_cpu()
    assert readings[os.getpid()][0] == "load generator"
    assert readings[os.getpid()][1] > 0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_compiler_threads_are_read_only_from_a_node():
    readings = load._proc_cpu()
    assert load._jit_cpu({pid: r for pid, r in readings.items() if r[0] != "elasticsearch"}) is None
    # A process with no "CompilerThre…" threads (this one, classed as a node): none of its CPU counts.
    assert load._jit_cpu({os.getpid(): ("elasticsearch", readings[os.getpid()][1])}) == 0.0


STEP = {"clients": 8, "seconds": 30.0, "errors": 0, "error_kinds": {}, "throughput_rps": 25.0,
        "turn": {"n": 1, "p50": 1, "p95": 1, "p99": 1, "mean": 1},
        "recall": {"n": 1, "p50": 1, "p95": 1, "p99": 1, "mean": 1}}


def test_the_table_shows_the_split():
    row = {**STEP, "cpu": {"cpu_ms_per_request": {"elasticsearch": 43.3, "engram server": 34.5, "redis": 0.7,
                                                  "load generator": 2.3, "other": 0.8},
                           "cores_busy": {"elasticsearch": 1.07, "engram server": 0.85, "redis": 0.02,
                                          "load generator": 0.06, "other": 0.02},
                           "node_per_request": {"query phases": 22.61}}}
    table = load.steps_table([row])
    assert "| 8 | 43.3 (1.07) | 34.5 (0.85) | 0.7 (0.02) | 2.3 (0.06) | 0.8 (0.02) | query phases 22.61 |" in table
    assert "machine's speed" not in table  # a step measured without the probe
    table = load.steps_table([{**row, "machine_probe_ms": {"before": 151.2, "after": 240.0}}])
    assert "ms of CPU, lower is faster): 151.2 before, 240.0 after" in table


def test_the_table_has_a_row_per_step_and_kind_and_names_the_errors():
    failed = {**STEP, "clients": 32, "errors": 3, "error_kinds": {"503": 2, "ReadTimeout": 1},
              "recall": {"n": 0}}
    lines = load.steps_table([STEP, failed]).splitlines()
    assert "| 8 | turn | 1 | 1 | 1 | 1 | 25.0 | 0 |" in lines
    assert "| 32 | recall | 0 | n/a | n/a | n/a | 25.0 | 3 |" in lines
    assert "errors at 32 clients: {'503': 2, 'ReadTimeout': 1}" in lines


def test_the_machine_probe_is_the_median_of_its_rounds_of_one_fixed_workload(monkeypatch):
    assert 1 < machine.workload() < 60_000  # CPU ms of the real workload, once
    runs = iter([210.04, 150.0, 246.3])
    monkeypatch.setattr(machine, "workload", lambda: next(runs))
    assert machine.probe(rounds=3) == 210.0


def test_every_step_and_the_warm_up_say_text_of_their_own():
    seeds = load.step_seeds(3)
    assert seeds.steps[0] == 7
    assert len({*seeds.steps, seeds.warmup, *seeds.service, seeds.service_warmup}) == 8
    # Different seeds give different conversations and questions (no cached vector carries over).
    first, warm = load.Synth(seed=seeds.steps[0]), load.Synth(seed=seeds.warmup)
    assert {first.question(n) for n in range(50)}.isdisjoint({warm.question(n) for n in range(50)})


def test_turns_may_limit_their_recall_to_some_memory_types():
    session = {"session_id": "s"}
    assert load.turn_body("hi", session, ["catalog"]) == {"text": "hi", "k": 5, "session_id": "s",
                                                          "types": ["catalog"]}
    assert load.turn_body("hi", {}, None) == {"text": "hi", "k": 5}  # by default a turn's recall searches every type


def test_the_load_sends_the_mix_through_its_sender_and_counts_what_came_back():
    sent = []

    @contextmanager
    def sender():
        def send(kind, token, who, body):
            sent.append((kind, token, who, body))
            return (True, "201", "write;dur=4.0, refreshed") if kind == "turn" else (False, "503", None)

        yield send

    result = load.run_load(sender=sender, targets=[("t", "u-1")], clients=2, seconds=0.2, seed=3, varied=True,
                           turn_share=0.5)
    turns = [s for s in sent if s[0] == "turn"]
    recalls = [s for s in sent if s[0] == "recall"]
    assert turns and recalls and all(s[1:3] == ("t", "u-1") for s in sent)
    assert all(body["session_id"].startswith("load-3-") and body["k"] == 5 for *_, body in turns)
    assert all(body["k"] == 10 and body["query"] for *_, body in recalls)
    assert result["turn"]["n"] == len(turns) and result["recall"] == {"n": 0}
    assert result["errors"] == len(recalls) and result["error_kinds"] == {"503": len(recalls)}
    assert result["turn"]["server_timing"]["refreshed_share"] == 1.0


def test_server_timing_summary_splits_refreshed_requests_from_the_others():
    assert load.server_timing("refresh;dur=12.5, search;dur=40, refreshed") == (
        {"refresh": 12.5, "search": 40.0}, {"refreshed"})
    assert load.server_timing("") == ({}, set())
    rows = [(300.0, {"refresh": 200.0, "search": 50.0}, {"refreshed"}),
            *[(100.0, {"refresh": 5.0, "search": 40.0}, set())] * 9]
    summary = load.timing_summary(rows)
    assert summary["requests"] == 10 and summary["refreshed_share"] == 0.1
    assert summary["refreshed"] == {"n": 1, "p50": 300.0, "p95": 300.0, "mean": 300.0}
    assert summary["others"] == {"n": 9, "p50": 100.0, "p95": 100.0, "mean": 100.0}
    # p95 of nine 5s and one 200, interpolated between the two highest ranks.
    assert summary["phases"]["refresh"] == {"n": 10, "p50": 5.0, "p95": 112.25, "mean": 24.5}
    assert set(summary["phases"]) == {"refresh", "search"}  # phases no request recorded are left out
    row = {**STEP, "recall": {"n": 10, "p50": 100, "p95": 300, "p99": 300, "mean": 120, "server_timing": summary}}
    table = load.steps_table([row])
    assert "| 8 | recall | 10.0% | 300 / 300 | 100 / 100 | 5 / 112 | n/a | 40 / 46 | n/a | n/a |" in table
