"""benchmarks/latency.py: its table, and one small run against the real node, after which the
run's indices and keys are gone (benchmarks/engram.py's ``stores``)."""

from __future__ import annotations

import pytest

from benchmarks import latency
from benchmarks.__main__ import suite_parser
from benchmarks.engram import stores
from engram_core.es.schema import indices_present
from tenants.models import SubjectKey


def test_the_table_has_one_column_per_size():
    p = {"p50": 10.0, "p95": 20.0, "p99": 30.0}
    row = {"memories": 1000, "heavy_memories": 200, "recall_new": p, "recall_repeated": p, "heavy_new": p,
           "heavy_repeated": p, "turn": p, "fact_supersede": None, "import_eps": 512.4, "import_eps_large": None,
           "store_mb": 3.25, "rss_mb": 300.4, "peak_rss_mb": 310.0, "heap_used_mb": 200, "heap_max_mb": 512,
           "recall_new_phases": {"search": {"p50": 7.0, "p95": 9.0}}}
    lines = latency.corpus_table([row, {**row, "memories": 10000, "heavy_memories": 2000}]).splitlines()
    assert lines[0] == "| | 1,000 memories | 10,000 memories |"
    assert lines[1] == "|---|---:|---:|"
    assert "| recall, new question, p50 / p95 / p99 ms | 10.0 / 20.0 / 30.0 | 10.0 / 20.0 / 30.0 |" in lines
    assert "| fact write superseding one fact, p50 / p95 / p99 ms | n/a | n/a |" in lines
    assert "| recall, new question: search, p50 / p95 ms | 7.0 / 9.0 | 7.0 / 9.0 |" in lines
    assert "| recall, new question: embed, p50 / p95 ms | n/a | n/a |" in lines
    assert "| recall, gathering question: hop, p50 / p95 ms | n/a | n/a |" in lines
    assert "| bulk import, all calls, episodes/s | 512 | 512 |" in lines
    assert "| bulk import, calls of >= 1,000 episodes only, episodes/s | n/a | n/a |" in lines
    assert "| Elasticsearch heap used / max, MB | 200 / 512 | 200 / 512 |" in lines
    assert "| benchmark process RSS (peak), MB | 300 (310) | 300 (310) |" in lines
    assert all(line.count("|") == 4 for line in lines)


@pytest.mark.django_db(transaction=True)
def test_a_small_run_measures_every_row_and_leaves_no_index_or_key_behind(es_admin, settings, invalidate_minted_keys):
    settings.ES_INDEX_PREFIX = f"{settings.ES_INDEX_PREFIX}-latency"
    _, parser = suite_parser("latency")
    args = parser.parse_args(["--sizes", "60", "--tenants", "2", "--users-per-tenant", "1", "--queries", "4",
                              "--writes", "2"])
    saved = []
    with stores() as prefix:
        data = latency.run(args, saved.append)
        assert all(indices_present(es=es_admin, prefix=prefix).values())
    row = data["rows"][0]
    assert row["memories"] == 60 and row["heavy_memories"] == 12 and saved[-1] is data
    for key in ("recall_new", "recall_repeated", "heavy_new", "heavy_repeated", "gather_new", "gather_repeated",
                "turn", "fact_supersede"):
        assert row[key]["n"] >= 2 and row[key]["p50"] > 0, key
    # The gathering questions take the second hop; the ordinary ones never do.
    assert row["gather_new_phases"]["hop"]["p50"] > 0 and row["recall_new_phases"]["hop"]["p95"] == 0
    assert row["recall_new_phases"]["search"]["p50"] > 0 and row["rss_mb"] > 0
    assert "| 60 memories |" in latency.markdown(data)
    # The run's indices are dropped and every key minted under its prefix invalidated.
    assert not any(indices_present(es=es_admin, prefix=prefix).values())
    keys = SubjectKey.objects.filter(index_prefix__startswith=prefix).values_list("es_key_id", flat=True)
    assert len(keys) == 3
    for key_id in keys:
        assert es_admin.security.get_api_key(id=key_id)["api_keys"][0]["invalidated"]
    assert settings.ES_INDEX_PREFIX == prefix
