"""benchmarks/bridge.py: both bridges answer the suite's requests whole; the report."""

from __future__ import annotations

import pytest

from benchmarks import bridge


@pytest.mark.parametrize("variant", bridge.VARIANTS)
def test_each_bridge_answers_every_request_whole(variant):
    # _one raises when an answer is not the app's status and body
    run = bridge._one(variant, requests=40, clients=4, threads=4, work_ms=0.5)
    assert run["rps"] > 0 and run["p95_ms"] >= run["p50_ms"] > 0


def test_the_report_gives_each_variants_median():
    runs = [{"cpu_us": c, "rps": 100.0, "p50_ms": 1.0, "p95_ms": 2.0} for c in (40.0, 50.0, 90.0)]
    text = bridge.markdown({"requests": 1000, "clients": 8, "threads": 32, "rounds": 3,
                            "runs": {"bridge 2": runs, "a2wsgi 2": []}})
    assert "| bridge | 2 | 50 | 100 | 1.00 / 2.00 |" in text and "| a2wsgi |" not in text
