"""benchmarks/http_load.py, the ``http`` suite: how it starts the server, what its options send to
the load generator, and its report (no server needed)."""

from __future__ import annotations

from config.serving import UVICORN_FLAGS

from benchmarks import http_load
from benchmarks.__main__ import suite_parser


def test_the_server_runs_with_engrams_own_flags():
    command = http_load.server_command(port=8123, workers=3)
    assert " ".join(UVICORN_FLAGS) in " ".join(command)
    assert command[command.index("--workers") + 1] == "3" and command[command.index("--port") + 1] == "8123"
    assert "config.asgi:application" in command


def test_another_application_may_be_served_for_a_comparison(monkeypatch):
    monkeypatch.setenv("ENGRAM_BENCH_ASGI_APP", "benchmarks.asgi_a2wsgi:application")
    command = http_load.server_command(port=8123, workers=2)
    assert "benchmarks.asgi_a2wsgi:application" in command and "config.asgi:application" not in command


def _run_against_a_running_engram(monkeypatch, *options: str) -> list[dict]:
    runs = []
    monkeypatch.setattr(http_load, "prepare", lambda **kwargs: None)
    monkeypatch.setattr(http_load, "run_load", lambda **kwargs: runs.append(kwargs) or {
        "throughput_rps": 1.0, "errors": 0, "clients": kwargs["clients"]})
    _, parser = suite_parser("http")
    args = parser.parse_args(["--url", "http://x", "--token", "t", "--clients", "8", "--warmup", "5", *options])
    data = http_load.run(args, lambda data: None)
    assert data["end_users"] == 40 and len(data["steps"]) == 1
    return runs


def test_the_warm_up_may_mix_turns_into_a_recall_only_measurement(monkeypatch):
    runs = _run_against_a_running_engram(monkeypatch, "--turn-share", "0", "--warmup-turn-share", "0.5")
    # End-users gain memories during the warm-up; the measured step asks recalls only.
    assert [r["turn_share"] for r in runs] == [0.5, 0.0]
    assert [r["seconds"] for r in runs] == [5, 40]
    runs = _run_against_a_running_engram(monkeypatch, "--turn-share", "0")
    assert [r["turn_share"] for r in runs] == [0.0, 0.0]  # by default the warm-up is the measured load


def test_turns_may_limit_their_recall_to_some_memory_types(monkeypatch):
    runs = _run_against_a_running_engram(monkeypatch, "--turn-types", "catalog")
    assert [r["turn_types"] for r in runs] == [["catalog"], ["catalog"]]  # the warm-up's turns too
    runs = _run_against_a_running_engram(monkeypatch)
    assert [r["turn_types"] for r in runs] == [None, None]


def _step(clients: int, rps: float) -> dict:
    return {"clients": clients, "seconds": 5.0, "errors": 0, "error_kinds": {}, "throughput_rps": rps,
            "turn": {"n": 3, "p50": 40.0, "p95": 90.0, "p99": 99.0, "mean": 50.0},
            "recall": {"n": 6, "p50": 20.0, "p95": 45.0, "p99": 49.0, "mean": 25.0}}


def test_the_report_sets_http_throughput_beside_the_service_levels():
    data = {"end_users": 40, "memories": 0, "workers": 2, "seconds": 5, "warmup_s": 5, "warmup_clients": 8,
            "turn_share": 1 / 3, "varied": True, "steps": [_step(8, 30.0)], "service": [_step(8, 50.0)],
            "rss_mb": {"master": [40.0], "workers": [410.4, 398.0], "benchmark process": [300.0]}}
    text = http_load.markdown(data)
    assert "| 8 | recall | 6 | 20 | 45 | 49 | 30.0 | 0 |" in text
    assert ("| 8 | 30.0 (turn 40 / 90; recall 20 / 45) | 50.0 (turn 40 / 90; recall 20 / 45) | **0.60** | n/a | n/a |"
            in text)
    assert "RSS, MB: master 40; workers 410, 398; benchmark process 300" in text
    # Beside Mem0 over HTTP: Engram's throughput over Mem0's.
    text = http_load.markdown({**data, "mem0": [_step(8, 10.0)], "mem0_rss_mb": {"master": [28.0], "workers": [145.0]}})
    assert "| **0.60** | 10.0 (turn 40 / 90; recall 20 / 45) | **3.00** |" in text
    assert "Mem0 server RSS, MB: master 28; workers 145" in text
