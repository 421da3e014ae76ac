"""Playbook outcomes and a fact's supporting episodes: counted exactly, once per identified outcome."""

import pytest

from memory_app.recall import memory_recall
from memory_app.services.facts import playbook_outcome_record, playbook_write


def ids(results):
    return [r["id"] for r in results]


def test_playbook_outcomes_are_counted_and_rank_playbooks(subject):
    good = playbook_write(subject=subject, trigger="wifi keeps dropping", steps="Restart the router.")
    bad = playbook_write(subject=subject, trigger="wifi keeps dropping", steps="Restart the router.")
    for _ in range(4):
        playbook_outcome_record(subject=subject, playbook_id=good["id"], success=True)
    playbook_outcome_record(subject=subject, playbook_id=bad["id"], success=False)
    updated = playbook_outcome_record(subject=subject, playbook_id=bad["id"], success=False,
                                      refined_steps="Move the router away from the microwave.")
    assert (updated["failure_count"], updated["refined_steps"]) == (2, "Move the router away from the microwave.")
    results = memory_recall(subject=subject, query="wifi keeps dropping", k=2, types=["procedural"], explain=True)
    assert ids(results) == [good["id"], bad["id"]]
    # 1 + 0.1 · (2 · posterior mean − 1): Beta(5, 1) mean 5/6, Beta(1, 3) mean 1/4.
    assert results[0]["explain"]["multipliers"]["outcome"] == pytest.approx(1 + 0.1 * (2 * 5 / 6 - 1))
    assert results[1]["explain"]["multipliers"]["outcome"] == pytest.approx(1 + 0.1 * (2 * 1 / 4 - 1))
    assert results[0]["success_count"] == 4 and results[0]["last_success_at"]
