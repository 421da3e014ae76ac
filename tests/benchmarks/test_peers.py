"""benchmarks/peers.py: R@k as memory_eval scores it, and the side-by-side table (no node needed)."""

from __future__ import annotations

from benchmarks import peers

USERS = [{"questions": [{"id": "q1", "expected": ["a", "b"]}, {"id": "q2", "expected": ["c"]}]}]


def test_recall_at_k_is_the_mean_share_of_each_questions_evidence_in_its_top_k():
    ranked = {"q1": ["x", "a", "y", "z", "w", "b"], "q2": ["c"]}
    assert peers.recall_at(USERS, ranked) == {"R@5": 0.75, "R@10": 1.0, "n": 2}


def _run(r10: float, search_p50: float, **extra) -> dict:
    return {"recall": {"R@5": r10 - 0.1, "R@10": r10, "n": 2},
            "search": {"n": 2, "p50": search_p50, "p95": 2 * search_p50},
            "add": {"n": 2, "p50": 40.0, "p95": 60.0}, "isolation": [
                {"attempt": "GET A's memory id as B", "served_foreign": False, "result": "HTTP 404"}], **extra}


def test_the_table_gives_each_system_its_median_and_the_lead():
    data = {"conversations": ["26", "30"], "turns": 788, "k": 10, "embedding_calls": {"POST /v1/embeddings": 9},
            "mem0_versions": {"mem0ai": "2.2.1", "elasticsearch_client": "8.19.3"},
            "engram": [_run(0.8, 20.0, import_s=3.0, write_s=38.0, recall_writes={"R@5": 0.7, "R@10": 0.8}),
                       _run(0.9, 30.0, import_s=4.0, write_s=39.0, recall_writes={"R@5": 0.7, "R@10": 0.8}),
                       _run(0.8, 10.0, import_s=2.0, write_s=40.0, recall_writes={"R@5": 0.7, "R@10": 0.8})],
            "mem0": [_run(0.5, 70.0, ingest_s=54.0)]}
    lines = peers.markdown(data).splitlines()
    assert "| R@10 | 0.800 | 0.500 | Engram |" in lines
    assert "| search p50 ms | 20.0 | 70.0 | Engram |" in lines
    assert "| ingest all 788 turns, s (Engram: bulk import; Mem0: add per turn) | 3.0 | 54.0 | Engram |" in lines
    assert ("| R@5 / R@10, Engram's turns written one by one instead of imported | 0.700 / 0.800 | (as above) | |"
            in lines)
    assert "| Engram | GET A's memory id as B | HTTP 404 | no |" in lines
    assert peers.markdown({**data, "mem0": []}).startswith("(a run of each")
