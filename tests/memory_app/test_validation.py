"""The one validation module: the rules a write is accepted by, shared by the edge and the services."""

import pytest

from engram_core.errors import NotFound, ValidationFailed
from memory_app.selectors import memory_get
from memory_app.services.episodes import episode_write
from memory_app.services.imports import episodes_import
from memory_app.validation import (
    ImportFields,
    Limits,
    clean_memory_id,
    clean_new_memory_id,
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


# The limits the settings give by default (config/settings/base.py): the checks read none themselves.
LIMITS = Limits(text_chars=8000, recall_k=100, metadata_bytes=4096, supersedes=20, import_episodes=50000,
                harsh_penalty=0.1, pending_seconds=10)


def test_the_limits_are_the_settings_as_read_at_an_entry(settings):
    assert Limits.from_settings() == LIMITS
    settings.ENGRAM_MAX_TEXT_CHARS = 10
    limits = Limits.from_settings()
    assert limits.text_chars == 10
    with pytest.raises(ValidationFailed) as exc:
        write_validate(operation="episode", payload={"text": "more than ten"}, limits=limits)
    assert exc.value.code == "text_too_long"
    write_validate(operation="episode", payload={"text": "more than ten"}, limits=LIMITS)  # what it was given


def test_a_client_names_only_its_own_sources_while_the_services_store_theirs(subject):
    with pytest.raises(ValidationFailed) as exc:
        write_validate(operation="episode", payload={"text": "hi", "source": "consolidation"}, limits=LIMITS)
    assert exc.value.code == "invalid_source"
    write_validate(operation="episode", payload={"text": "hi", "source": "mcp"}, limits=LIMITS)
    written = episode_write(subject=subject, text="hi", source="consolidation")
    assert memory_get(subject=subject, memory_id=written["id"])["source"] == "consolidation"


def test_imported_episodes_are_cleaned_in_order_and_a_bad_one_is_named_by_its_position():
    assert imported_episodes_clean([{"n": 1}, {"n": 2}], clean=lambda e: e["n"], limit=10) == [1, 2]
    with pytest.raises(ValidationFailed) as exc:
        imported_episodes_clean([{"n": 1}, "not an object"], clean=lambda e: e["n"], limit=10)
    assert (exc.value.code, exc.value.details["index"], exc.value.message) == (
        "invalid_episode", 1, "episode 1: each episode must be an object")
    with pytest.raises(ValidationFailed) as exc:
        imported_episodes_clean([], clean=lambda e: e, limit=10)
    assert exc.value.code == "empty_import"
    with pytest.raises(ValidationFailed) as exc:
        imported_episodes_clean(iter([{}, {}, {}]), clean=lambda e: e, limit=2)
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
    for check in (lambda: ImportFields.clean({"episodes": episodes}, limits=LIMITS),
                  lambda: episodes_import(subject=subject, episodes=episodes)):
        with pytest.raises(ValidationFailed) as exc:
            check()
        refusals.append((exc.value.code, exc.value.details.get("field"), exc.value.details["index"]))
    assert refusals == [(code, field, 1)] * 2
    assert count_docs() == 0


# ---------------------------------------------------------------- properties (no service)
# Whatever a client sends in any field, the rules answer with the cleaned value or ValidationFailed
# (NotFound for an id no memory can have): never another exception, which would be a 500.

from hypothesis import example, given, strategies as st  # noqa: E402

from engram_core.errors import EngramError  # noqa: E402
from memory_app import validation  # noqa: E402
from tests.strategies import json_values, nested_json  # noqa: E402

_RULES = [lambda v: validation.clean_text(v, limit=LIMITS.text_chars), validation.clean_session_id, validation.clean_reason, validation.clean_note,
          validation.clean_cascade, validation.clean_memory_type, validation.clean_types, validation.clean_timezone,
          lambda v: validation.clean_datetime(v, field="occurred_at"),
          lambda v: validation.clean_k(v, limit=LIMITS.recall_k),
          lambda v: validation.clean_metadata(v, limit=LIMITS.metadata_bytes),
          validation.clean_confidence, validation.clean_new_memory_id, validation.clean_supporting_ids,
          lambda v: validation.clean_supersedes(v, limit=LIMITS.supersedes), validation.clean_role, validation.clean_contradiction, validation.clean_success,
          validation.clean_steps, validation.clean_imported_occurred_at, validation.holds_nul]
_FIELDS = ("text", "context", "session_id", "occurred_at", "role", "metadata", "source", "supporting_episode_ids",
           "supersedes", "contradiction", "confidence", "trigger", "steps", "success", "refined_steps",
           "operation_id", "reason", "note", "cascade", "episodes", "id", "client_id", "memory_id")
_payloads = st.dictionaries(st.sampled_from(_FIELDS), json_values, max_size=8)


def _answer(rule, value):
    """The rule's answer: ("ok", value) or ("refused", code); anything else propagates."""
    try:
        return "ok", rule(value)
    except EngramError as exc:
        assert exc.status in (400, 404), exc
        return "refused", exc.code


@pytest.mark.properties
@given(value=json_values)
@example(value="0001-01-01T00:00:00+01:00")
@example(value="9999-12-31T23:59:59-01:00")
@example(value=nested_json(5000))
@example(value={"a": "\ud800"})
def test_every_field_rule_cleans_or_refuses_whatever_it_is_given(value):
    for rule in _RULES:
        assert _answer(rule, value) == _answer(rule, value)


@pytest.mark.properties
@given(operation=st.sampled_from(["episode", "fact", "playbook", "outcome", "forget", "import", "erase"]),
       payload=_payloads, episodes=st.lists(_payloads, max_size=3))
@example(operation="episode", payload={"text": "x", "occurred_at": "0001-01-01T00:00:00+01:00"}, episodes=[])
@example(operation="import", payload={}, episodes=[{"text": "x", "occurred_at": "9999-12-31T23:59:59-01:00"}])
@example(operation="fact", payload={"text": "x", "metadata": nested_json(5000)}, episodes=[])
def test_a_whole_write_is_accepted_or_refused_whatever_it_holds(operation, payload, episodes):
    if operation == "import" and episodes:
        payload = {**payload, "episodes": episodes}
    assert _answer(lambda p: validation.write_validate(operation=operation, payload=p, limits=LIMITS), payload) == \
        _answer(lambda p: validation.write_validate(operation=operation, payload=p, limits=LIMITS), payload)
