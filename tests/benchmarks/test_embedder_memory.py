"""benchmarks/embedder_memory.py: the earlier tree is the revision's packages; the report's table."""

from __future__ import annotations

from benchmarks import embedder_memory


def test_the_earlier_tree_holds_the_revision_s_packages(tmp_path):
    tree = embedder_memory.tree_at("HEAD", tmp_path)
    assert (tree / "embeddings" / "minilm.py").is_file() and (tree / "config" / "serving.py").is_file()
    assert (tree / "engram_core").is_dir() and (tree / "tenants").is_dir()
    (tmp_path / "before").mkdir()
    before = embedder_memory.tree_at("a3ca3b3", tmp_path / "before")  # before the layout of issue 66
    assert (before / "memory_app" / "embeddings" / "minilm.py").is_file() and not (before / "embeddings").exists()


def test_the_report_puts_before_and_after_side_by_side():
    run = {"rss_rest_mb": 131, "rss_after_mb": 265, "texts_per_s": 241.1, "single_p50_ms": 23.9, "single_p95_ms": 50.5}
    text = embedder_memory.markdown({"before": "a3ca3b3", "threads": 8, "seconds": 20, "single_share": 0.8, "batch": 8,
                                     "runs": {"before": [{**run, "rss_rest_mb": 262}] * 2, "after": [run] * 2}})
    assert "| before | 262, 262 | 265, 265 | 241.1, 241.1 | 23.9 / 50.5, 23.9 / 50.5 |" in text
    assert "| after | 131, 131 |" in text and "before: a3ca3b3" in text
