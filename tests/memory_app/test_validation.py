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


# ---------------------------------------------------------------- what each rule takes, exactly
# The properties above hold of any rule that answers consistently; these state the rules (the
# mutation run, scripts/mutation, showed that k, confidence, cascade, role or timezone rules taking
# anything, or refusing with another code or no field, passed them).

import unicodedata  # noqa: E402
import zoneinfo  # noqa: E402

from engram_core.es.schema import MemoryType  # noqa: E402

_ZONES = sorted(zoneinfo.available_timezones())


def _taken_or(rule, value, *, takes: bool, code: str, field: str):
    """``rule(value)`` when it ``takes`` the value, else a ValidationFailed of ``code`` naming ``field``."""
    if takes:
        return rule(value)
    with pytest.raises(ValidationFailed) as refused:
        rule(value)
    assert (refused.value.code, refused.value.details.get("field")) == (code, field)
    assert isinstance(refused.value.message, str) and refused.value.message
    return refused.value


@pytest.mark.properties
@given(value=st.integers(-3, 210) | json_values, limit=st.integers(1, 200))
@example(value=1, limit=1)  # the mutation run: "2 <= k" passed the seed's draws
def test_k_is_a_whole_number_from_1_to_the_limit(value, limit):
    takes = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= limit
    answer = _taken_or(lambda v: validation.clean_k(v, limit=limit), value, takes=takes, code="k_out_of_range",
                       field="k")
    assert answer == value if takes else answer.details == {"field": "k", "max": limit}


@pytest.mark.properties
@given(value=st.floats(-0.5, 1.5) | st.integers(-2, 3) | st.sampled_from([0.0, 1.0, 1, 0, -0.0, 1e-300])
       | json_values)
def test_confidence_is_a_number_from_0_to_1_read_as_a_float(value):
    takes = isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0
    answer = _taken_or(validation.clean_confidence, value, takes=takes, code="invalid_confidence", field="confidence")
    if takes:
        assert type(answer) is float and answer == value


@pytest.mark.properties
@given(value=st.booleans() | st.none() | json_values)
def test_cascade_is_true_false_or_absent_for_true(value):
    takes = value is None or isinstance(value, bool)
    answer = _taken_or(validation.clean_cascade, value, takes=takes, code="invalid_cascade", field="cascade")
    assert answer is (True if value is None else value) if takes else True


_NAMED = [(validation.clean_role, validation.EPISODE_ROLES, "invalid_role", "role"),
          (validation.clean_contradiction, validation.CONTRADICTIONS, "invalid_contradiction", "contradiction"),
          (validation.clean_reason, tuple(validation.FORGET_REASONS), "invalid_reason", "reason"),
          (validation.clean_memory_type, tuple(t.value for t in MemoryType), "unknown_memory_type", "type")]


@pytest.mark.properties
@given(data=st.data(), rule=st.sampled_from(_NAMED))
def test_a_named_choice_is_one_of_its_names_and_nothing_else(data, rule):
    clean, names, code, field = rule
    value = data.draw(st.sampled_from(names) | st.sampled_from(names).map(str.upper) | json_values)
    answer = _taken_or(clean, value, takes=value in names, code=code, field=field)
    assert answer == value if value in names else True


@pytest.mark.properties
@given(values=st.none() | st.lists(st.sampled_from([t.value for t in MemoryType]), max_size=6) | json_values)
def test_types_are_a_non_empty_list_of_memory_types_kept_once_in_order(values):
    names = [t.value for t in MemoryType]
    takes = values is None or (isinstance(values, list) and bool(values) and all(
        isinstance(v, str) and v in names for v in values))
    codes = "invalid_types" if not isinstance(values, list) or not values else "unknown_memory_type"
    answer = _taken_or(validation.clean_types, values, takes=takes, code=codes,
                       field="types" if codes == "invalid_types" else "type")
    if takes:
        assert answer == (list(MemoryType) if values is None else [MemoryType(v) for v in dict.fromkeys(values)])


@pytest.mark.properties
@given(value=st.sampled_from(_ZONES) | st.none() | st.just("") | json_values | st.text(max_size=70))
def test_a_timezone_is_an_iana_name_or_absent(value):
    takes = value in (None, "") or value in _ZONES
    answer = _taken_or(validation.clean_timezone, value, takes=takes or (
        isinstance(value, str) and _zone(value) is not None), code="invalid_timezone", field="timezone")
    if value in (None, ""):
        assert answer is None
    elif takes:
        assert answer == zoneinfo.ZoneInfo(value)


def _zone(name):
    """ZoneInfo's own reading of ``name`` (it also takes a few names outside available_timezones)."""
    try:
        return zoneinfo.ZoneInfo(name) if len(name) <= validation.TIMEZONE_MAX_CHARS else None
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


_IDS = st.text("abcdef0123456789-", min_size=1, max_size=70)


@pytest.mark.properties
@given(values=st.none() | st.lists(_IDS | _IDS.map(lambda i: f" {i} ") | json_values, max_size=6) | json_values,
       limit=st.integers(1, 5))
def test_ids_are_a_list_of_possible_memory_ids_within_the_limit_kept_once_trimmed(values, limit):
    possible = isinstance(values, list) and all(isinstance(v, str) and 0 < len(v.strip()) <= 64 and not any(
        unicodedata.category(c) == "Cc" for c in v.strip()) for v in values)
    takes = values is None or (possible and len(values) <= limit)
    answer = _taken_or(lambda v: validation.clean_ids(v, field="supersedes", limit=limit), values, takes=takes,
                       code="invalid_ids", field="supersedes")
    if takes:
        assert answer == list(dict.fromkeys(v.strip() for v in values or []))
