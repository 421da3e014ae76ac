"""benchmarks/floor.py, the ``floor`` suite: what its floor adds up and its report (no server needed)."""

from __future__ import annotations

from benchmarks import floor


def _row(rps: float, server: float, node: float, here: float) -> dict:
    return {"requests": 100, "rps": rps,
            "cpu_ms": {"engram server": server, "elasticsearch": node, "load generator": here}}


ROWS = {"healthz": _row(1000.0, 0.7, 0.0, 0.8), "api": _row(350.0, 4.1, 0.1, 1.0),
        "embed": _row(410.0, 0.0, 0.0, 4.7), "search": _row(264.0, 0.0, 6.2, 1.3),
        "recall": _row(63.0, 0.0, 21.0, 10.2)}


def test_the_floor_adds_the_api_request_the_embedding_and_the_search_without_the_http_client():
    # api: server 4.1 + node 0.1 (its client's 1.0 is the agent's); embed 4.7; search 6.2 + 1.3.
    assert floor.floor_ms(ROWS) == 16.4
    assert floor.floor_ms({k: v for k, v in ROWS.items() if k != "search"}) is None


def test_the_report_has_a_row_per_request_and_the_floor():
    text = floor.markdown({"memories": 10000, "clients": 8, "seconds": 20, "rows": ROWS})
    assert "| one hybrid search: BM25 + kNN in one body, under an end-user's key | 264.0 | 0.0 | 6.2 | 1.3 |" in text
    assert "**16.4 ms**" in text
    # Beside Mem0's mix: a third of its CPU per request is what 3x its throughput allows.
    mem0 = {"rps": 45.0, "cpu_ms": {"engram server": 19.2, "elasticsearch": 17.7, "load generator": 2.0}}
    text = floor.markdown({"memories": 10000, "clients": 8, "seconds": 20, "rows": ROWS, "mem0": mem0})
    assert "36.9 ms of CPU per request (its servers 19.2, the node 17.7)" in text
    assert "allows **12.3 ms** per request; the floor is **1.33** times that." in text
    # A run cut short before the search has no floor line.
    partial = floor.markdown({"memories": 10000, "clients": 8, "seconds": 20, "rows": {"api": ROWS["api"]}})
    assert "Floor" not in partial and "API request, no work" in partial
