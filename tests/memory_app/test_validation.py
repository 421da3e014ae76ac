"""The one validation module: the rules a write is accepted by, shared by the edge and the services."""

import pytest

from engram_core.errors import NotFound, ValidationFailed
from memory_app.selectors import memory_get
from memory_app.services.episodes import episode_write
from memory_app.services.imports import episodes_import
from memory_app.validation import (
    clean_memory_id,
    clean_new_memory_id,
    import_validate,
    imported_episodes_clean,
    write_validate,
)


def test_a_new_memory_id_is_stricter_than_an_id_a_memory_could_have():
    assert clean_new_memory_id("fact-0001") == "fact-0001"
    for bad in ("short", "x" * 65, "has space1", 12345678):
        with pytest.raises(ValidationFailed) as exc:
            clean_new_memory_id(bad)
        assert exc.value.code == "invalid_id"
    # Naming an existing memory: any id some memory could have; anything else is simply not found.
    assert clean_memory_id("short") == "short"
    with pytest.raises(NotFound):
        clean_memory_id("x" * 65)


def test_a_client_names_only_its_own_sources_while_the_services_store_theirs(subject):
    with pytest.raises(ValidationFailed) as exc:
        write_validate(operation="episode", payload={"text": "hi", "source": "consolidation"})
    assert exc.value.code == "invalid_source"
    write_validate(operation="episode", payload={"text": "hi", "source": "mcp"})
    written = episode_write(subject=subject, text="hi", source="consolidation")
    assert memory_get(subject=subject, memory_id=written["id"])["source"] == "consolidation"


def test_imported_episodes_are_cleaned_in_order_and_a_bad_one_is_named_by_its_position(settings):
    assert imported_episodes_clean([{"n": 1}, {"n": 2}], clean=lambda e: e["n"]) == [1, 2]
    with pytest.raises(ValidationFailed) as exc:
        imported_episodes_clean([{"n": 1}, "not an object"], clean=lambda e: e["n"])
    assert (exc.value.code, exc.value.details["index"], exc.value.message) == (
        "invalid_episode", 1, "episode 1: each episode must be an object")
    with pytest.raises(ValidationFailed) as exc:
        imported_episodes_clean([], clean=lambda e: e)
    assert exc.value.code == "empty_import"
    settings.ENGRAM_MAX_IMPORT_EPISODES = 2
    with pytest.raises(ValidationFailed) as exc:
        imported_episodes_clean(iter([{}, {}, {}]), clean=lambda e: e)
    assert exc.value.code == "import_too_large"


@pytest.mark.parametrize(("episode", "code", "field"), [
    ({"text": "fine"}, "invalid_datetime", "occurred_at"),
    ({"text": "", "occurred_at": "2024-01-01T08:00:00Z"}, "empty_text", "text"),
    ({"text": "fine", "occurred_at": "2024-01-01T08:00:00Z", "role": "robot"}, "invalid_role", "role"),
    ({"text": "fine", "occurred_at": "2024-01-01T08:00:00Z", "metadata": []}, "invalid_metadata", "metadata"),
])
def test_an_import_is_refused_alike_when_accepted_and_when_applied(subject, count_docs, episode, code, field):
    episodes = [{"text": "first", "occurred_at": "2024-01-01T08:00:00Z"}, episode]
    refusals = []
    for check in (lambda: import_validate({"episodes": episodes}),
                  lambda: episodes_import(subject=subject, episodes=episodes)):
        with pytest.raises(ValidationFailed) as exc:
            check()
        refusals.append((exc.value.code, exc.value.details.get("field"), exc.value.details["index"]))
    assert refusals == [(code, field, 1)] * 2
    assert count_docs() == 0
