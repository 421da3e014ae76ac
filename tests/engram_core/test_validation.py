"""The edge's readings of what every app receives (engram_core.validation): an end-user's id, a
moment, a day. Properties: the cleaned value or ValidationFailed, never another exception."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import example, given, strategies as st

from engram_core.errors import ValidationFailed
from engram_core.validation import clean_date, clean_datetime, clean_external_id, new_external_id_check
from tests.strategies import json_values, moments, nested_json

pytestmark = pytest.mark.properties


def _answer(rule, value):
    try:
        return "ok", rule(value)
    except ValidationFailed as exc:
        return "refused", exc.code


@given(value=json_values | moments | moments.map(lambda m: m.isoformat()) | st.dates().map(str))
@example(value="0001-01-01T00:00:00+01:00")
@example(value="9999-12-31T23:59:59-01:00")
@example(value="2024-02-30")
@example(value=nested_json(5000))  # found: clean_date wrote str() of it into its message (RecursionError)
@example(value=datetime(1, 1, 1, tzinfo=__import__("zoneinfo").ZoneInfo("Asia/Tokyo")))
def test_each_reading_cleans_or_refuses_whatever_it_is_given(value):
    for rule in (clean_external_id, lambda v: clean_external_id(v, new=True),
                 lambda v: clean_datetime(v, field="since"), lambda v: clean_date(v, field="since")):
        assert _answer(rule, value) == _answer(rule, value)


@given(value=json_values | st.text(max_size=210) | st.text(max_size=5).map(lambda t: f" {t}/x\t"))
@example(value=" alice")
@example(value="erased:1")
def test_where_an_end_user_is_created_an_id_passes_only_as_the_edge_would_have_cleaned_it(value):
    """The check below the edge (``new_external_id_check``: it trusts no caller with a new
    end-user, yet cleans nothing) takes exactly the ids ``clean_external_id(new=True)`` returns
    unchanged, and refuses with the same code otherwise."""
    checked, cleaned = _answer(new_external_id_check, value), _answer(lambda v: clean_external_id(v, new=True), value)
    if cleaned == ("ok", value):
        assert checked == cleaned
    else:
        assert checked == ("refused", "invalid_external_id")


@given(moment=moments)
def test_a_moment_with_a_timezone_is_read_in_utc_or_refused_when_utc_cannot_hold_it(moment):
    for given_as in (moment, moment.isoformat()):
        answer = _answer(lambda v: clean_datetime(v, field="occurred_at"), given_as)
        if moment.tzinfo is None:
            assert answer == ("refused", "invalid_datetime")
            continue
        try:
            expected = moment.astimezone(UTC)
        except OverflowError:
            assert answer == ("refused", "invalid_datetime")
        else:
            assert answer == ("ok", expected) and answer[1].tzinfo is UTC


@given(day=st.dates())
def test_a_day_written_yyyy_mm_dd_is_read_back_as_itself(day):
    assert clean_date(day.isoformat(), field="since") == day
    with pytest.raises(ValidationFailed):
        clean_date(day.isoformat().replace("-", ""), field="since")


def test_a_day_no_month_has_is_refused_with_its_field():
    with pytest.raises(ValidationFailed) as refused:
        clean_date("2024-02-30", field="since")
    assert (refused.value.code, refused.value.details) == ("invalid_date", {"field": "since"})
    assert clean_date("2024-02-29", field="since") == date(2024, 2, 29) and clean_date("", field="since") is None
