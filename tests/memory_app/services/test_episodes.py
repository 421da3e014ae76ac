"""Episodes: stored, scoped to their subject, refused whole when any field is bad."""

import pytest

from engram_core.errors import ValidationFailed
from memory_app.selectors import memory_get
from memory_app.recall import memory_recall
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_write


def ids(results):
    return [r["id"] for r in results]


def test_a_turn_is_recallable_as_soon_as_the_write_returns(subject):
    written = episode_write(subject=subject, text="My daughter's piano recital is on Friday at 6pm.")
    results = memory_recall(subject=subject, query="when is the piano recital?", k=3)
    assert ids(results)[0] == written["id"]
    assert results[0]["memory_type"] == "episodic" and results[0]["role"] == "user"


def test_every_memory_type_and_the_catalog_are_recalled_in_one_call(subject):
    episode = episode_write(subject=subject, text="The garage door opener stopped working yesterday.")
    fact = fact_write(subject=subject, text="Alice owns a Chamberlain garage door opener.")
    playbook = playbook_write(subject=subject, trigger="garage door opener does not respond",
                              steps="1. Check the breaker. 2. Re-pair the remote.")
    entry = catalog_entry_write(tenant=subject.tenant, title="Garage door openers",
                                text="Garage door openers must be re-paired after a power cut.")
    results = memory_recall(subject=subject, query="garage door opener", k=10)
    assert set(ids(results)) == {episode["id"], fact["id"], playbook["id"], entry["id"]}
    only = memory_recall(subject=subject, query="garage door opener", k=10, types=["semantic", "catalog"])
    assert set(ids(only)) == {fact["id"], entry["id"]}


def test_tampered_scope_in_metadata_does_not_move_a_memory(subject, make_subject):
    mallory = make_subject("mallory", tenant="globex")
    written = episode_write(subject=subject, text="I like green tea.",
                            metadata={"tenant_id": "globex", "user_id": str(mallory.user_id)})
    stored = memory_get(subject=subject, memory_id=written["id"])
    assert (stored["tenant_id"], stored["user_id"]) == ("acme", str(subject.user_id))
    assert memory_recall(subject=mallory, query="green tea", k=10) == []


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"text": ""}, "empty_text"),
    ({"text": "   \n "}, "empty_text"),
    ({"text": "x" * 8001}, "text_too_long"),
    ({"text": 42}, "invalid_text"),
    ({"text": "ok", "occurred_at": "yesterday"}, "invalid_datetime"),
    ({"text": "ok", "occurred_at": "2026-01-31T09:00:00"}, "invalid_datetime"),
    ({"text": "ok", "role": "robot"}, "invalid_role"),
    ({"text": "ok", "metadata": {"blob": "x" * 5000}}, "metadata_too_large"),
    # What Elasticsearch's client cannot write faithfully (found by schemathesis): numbers
    # beyond 64 bits, infinities, lone surrogates.
    ({"text": "ok", "metadata": {"n": 876050756799401203597312}}, "invalid_metadata"),
    ({"text": "ok", "metadata": {"n": [float("inf")]}}, "invalid_metadata"),
    ({"text": "ok", "metadata": {"\ud9d3": "x"}}, "invalid_metadata"),
    ({"text": "ok", "memory_id": "bad id!"}, "invalid_id"),
])
def test_bad_episode_input_is_refused_and_nothing_is_written(subject, count_docs, kwargs, code):
    with pytest.raises(ValidationFailed) as exc:
        episode_write(subject=subject, **kwargs)
    assert exc.value.code == code and exc.value.status == 400
    assert count_docs() == 0
