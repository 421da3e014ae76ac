"""benchmarks/corpus.py: the plan per size and the seeded text (no Elasticsearch needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.corpus import HEAVY, Counts, Synth, plan, spread
from memory_app.recall.read import query_gathers

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


def test_plan_at_100k_gives_the_heavy_end_user_a_fifth_of_each_kind():
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


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(0, 10_000))
def test_the_gathering_row_asks_only_what_takes_the_hop_and_the_others_never(seed, n):
    # Each latency row times one path: a gathering question takes recall's second hop, an
    # ordinary one must not, or its row would time the hop too.
    synth = Synth(seed)
    gathering, ordinary = synth.gathering_question(n), synth.question(n)
    assert query_gathers(gathering) and not query_gathers(ordinary)
    assert "{" not in gathering and "}" not in gathering


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
