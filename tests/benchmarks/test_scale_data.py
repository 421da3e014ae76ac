"""The scale benchmark's pure parts: corpus plan, seeded text, table (no Elasticsearch needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from benchmarks.scale_data import (HEAVY, Counts, Synth, cpu_description, markdown_table, median_of_runs, plan,
                                   spread)

START = datetime(2024, 1, 1, tzinfo=UTC)


def test_spread_is_even_exact_and_monotonic():
    assert spread(10, 4) == [3, 3, 2, 2]
    assert spread(10, 4, offset=2) == [2, 2, 3, 3]
    for total in range(60):
        smaller, larger = spread(total, 7, offset=3), spread(total + 1, 7, offset=3)
        assert sum(smaller) == total
        assert all(b >= a for a, b in zip(smaller, larger, strict=True))


@pytest.mark.parametrize("size", [1000, 10000, 100000])
def test_plan_holds_exactly_size_memories_with_the_heavy_user_at_a_fifth(size):
    p = plan(size)
    assert p.total == size
    assert len(p.catalog) == 100
    assert len(p.users) == 401  # 100 tenants x 4 end-users + the heavy one
    assert p.users[(0, HEAVY)].total == size // 5
    episodes = sum(c.episodes for c in p.users.values())
    facts = sum(c.facts for c in p.users.values())
    assert episodes > 0.8 * size and 0.09 * size < facts < 0.11 * size


def test_plan_at_100k_matches_the_issue():
    p = plan(100000)
    assert p.users[(0, HEAVY)] == Counts(episodes=17400, facts=2000, playbooks=600)
    assert sum(p.catalog) == 2000
    assert {t for t, _ in p.users} == set(range(100))


def test_plans_grow_monotonically_so_a_run_only_adds():
    small, large = plan(1000), plan(10000)
    for key, have in small.users.items():
        want = large.users[key]
        assert want.episodes >= have.episodes and want.facts >= have.facts and want.playbooks >= have.playbooks
    assert all(b >= a for a, b in zip(small.catalog, large.catalog, strict=True))


def test_synthetic_text_is_deterministic_and_varied():
    a, b = Synth(7), Synth(7)
    assert a.episode("user-3", 12, start=START) == b.episode("user-3", 12, start=START)
    assert a.fact("user-3", 1) == b.fact("user-3", 1)
    assert a.playbook("user-3", 0) == b.playbook("user-3", 0)
    assert a.catalog("scale-001", 0) == b.catalog("scale-001", 0)
    other = Synth(8)
    assert [other.fact("user-3", n) for n in range(5)] != [a.fact("user-3", n) for n in range(5)]
    texts = [a.episode("user-3", n, start=START)["text"] for n in range(500)]
    assert len(set(texts)) > 480
    assert len({a.question(n) for n in range(500)}) > 400
    assert all("{" not in t and "}" not in t for t in texts)


def test_episodes_are_ordered_in_time_and_grouped_in_sessions():
    synth = Synth(7)
    episodes = [synth.episode("heavy", n, start=START) for n in range(13)]
    times = [datetime.fromisoformat(e["occurred_at"]) for e in episodes]
    assert times == sorted(times) and times[0] >= START
    assert [e["session_id"] for e in episodes] == ["heavy-s0"] * 6 + ["heavy-s1"] * 6 + ["heavy-s2"]


def test_playbook_steps_are_numbered():
    trigger, steps = Synth(7).playbook("user-1", 4)
    assert trigger.startswith("the ")
    lines = steps.splitlines()
    assert 3 <= len(lines) <= 5
    assert [line.split(".")[0] for line in lines] == [str(i) for i in range(1, len(lines) + 1)]


def test_markdown_table_has_one_column_per_size():
    p = {"p50": 10.0, "p95": 20.0, "p99": 30.0}
    row = {"memories": 1000, "heavy_memories": 200, "recall_new": p, "recall_repeated": p, "heavy_new": p,
           "heavy_repeated": p, "turn": p, "fact_supersede": None, "import_eps": 512.4, "import_eps_large": None, "store_mb": 3.25,
           "rss_mb": 300.4, "heap": "200 / 512"}
    table = markdown_table([row, {**row, "memories": 10000, "heavy_memories": 2000}])
    lines = table.splitlines()
    assert lines[0] == "| | 1,000 memories | 10,000 memories |"
    assert lines[1] == "|---|---:|---:|"
    assert "| recall, new question, p50 / p95 / p99 ms | 10.0 / 20.0 / 30.0 | 10.0 / 20.0 / 30.0 |" in lines
    assert "| fact write superseding one fact, p50 / p95 / p99 ms | n/a | n/a |" in lines
    assert "| bulk import, all end-users (one call each), episodes/s | 512 | 512 |" in lines
    assert "| bulk import, calls of >= 1,000 episodes only, episodes/s | n/a | n/a |" in lines
    assert "| Elasticsearch heap used / max, MB | 200 / 512 | 200 / 512 |" in lines
    assert all(line.count("|") == 4 for line in lines)


def _run(label, p50, heap_used, *, sizes=(1000, 10000), clients=(1, 8), rps=10.0, minutes=20.0):
    latency = {"n": 40, "p50": p50, "p95": 2 * p50, "p99": 3 * p50, "mean": p50}
    rows = [{"memories": size, "heavy_memories": size // 5, "import_eps": p50 * 3, "import_eps_large": None,
             "recall_new": latency, "heavy_new": latency, "heap": f"{heap_used} / 512"} for size in sizes]
    http = [{"clients": c, "throughput_rps": rps * c, "errors": 0, "error_kinds": {},
             "turn": {"count": 10, "p50_ms": p50}, "recall": {"count": 20, "p50_ms": p50}} for c in clients]
    return {"label": label, "rows": rows, "http": http, "minutes": minutes}


def test_the_median_of_runs_takes_every_figure_from_the_middle_run_of_each():
    median = median_of_runs([_run("a", 30.0, 300, rps=12.0), _run("b", 10.0, 100, rps=20.0),
                             _run("c", 20.0, 200, rps=9.0, minutes=25.0)])
    top = median["rows"][-1]
    assert top["recall_new"] == {"n": 40, "p50": 20.0, "p95": 40.0, "p99": 60.0, "mean": 20.0}
    assert top["memories"] == 10000 and top["import_eps"] == 60.0 and top["import_eps_large"] is None
    assert top["heap"] == "200 / 512"
    assert [h["throughput_rps"] for h in median["http"]] == [12.0, 96.0]  # per step, not per run
    assert [r["label"] for r in median["runs"]] == ["a", "b", "c"]
    assert [r["minutes"] for r in median["runs"]] == [20.0, 20.0, 25.0]
    assert markdown_table(median["rows"]).count("|") > 0


def test_runs_that_measured_different_sizes_are_not_merged():
    with pytest.raises(ValueError, match="memories"):
        median_of_runs([_run("a", 10.0, 100), _run("b", 10.0, 100, sizes=(1000, 5000))])
    with pytest.raises(ValueError, match="clients"):
        median_of_runs([_run("a", 10.0, 100), _run("b", 10.0, 100, clients=(1, 2, 8))])


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni
processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2
"""


def test_cpu_description_names_the_model_and_the_vector_instruction_sets():
    assert cpu_description(CPUINFO) == "AMD EPYC; AVX2, AVX-512, AVX-512 VNNI"
    assert cpu_description("model name : Old CPU\nflags : fpu sse2 avx\n") == "Old CPU; no AVX2"
    assert cpu_description("") == "unknown CPU; no AVX2"


def test_median_of_runs_keeps_each_runs_machine():
    rows = [{"memories": 1000, "recall_new": {"p50": 10.0}, "heavy_new": {"p50": 12.0}, "import_eps": 50.0}]
    runs = [{"label": f"run {n}", "minutes": 1.0, "rows": rows, "http": [],
             "machine": {"cpu": "AMD EPYC; AVX2", "embed_sentences_per_s": speed}} for n, speed in enumerate((300.0, 150.0))]
    merged = median_of_runs(runs)
    assert [r["machine"]["embed_sentences_per_s"] for r in merged["runs"]] == [300.0, 150.0]
    assert median_of_runs([{k: v for k, v in runs[0].items() if k != "machine"}])["runs"][0]["machine"] is None


def test_median_of_an_even_number_of_runs_keeps_counts_whole():
    rows = [{"memories": 5000, "recall_new": {"p50": 10.0, "n": 40}, "heavy_new": {"p50": 12.0}, "import_eps": 50.0}]
    runs = [{"label": "a", "rows": rows, "http": [{"clients": 8, "turn": {"count": 66}}]},
            {"label": "b", "rows": [{**rows[0], "recall_new": {"p50": 11.0, "n": 40}}],
             "http": [{"clients": 8, "turn": {"count": 67}}]}]
    merged = median_of_runs(runs)
    assert merged["rows"][0]["memories"] == 5000 and isinstance(merged["rows"][0]["memories"], int)
    assert merged["rows"][0]["recall_new"] == {"p50": 10.5, "n": 40}
    assert merged["http"][0] == {"clients": 8, "turn": {"count": 66}}
