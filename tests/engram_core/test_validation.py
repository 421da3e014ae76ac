"""The edge's readings of what every app receives (engram_core.validation): an end-user's id, a
moment, a day. Properties: the cleaned value or ValidationFailed, never another exception."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import example, given, strategies as st

from engram_core.errors import ValidationFailed
from engram_core.validation import ERASED_PREFIX, clean_date, clean_datetime, clean_external_id, new_external_id_check
from tests.strategies import json_values, moment_texts, moments, nested_json

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


# ---------------------------------------------------------------- what each rule takes, exactly
# The properties above hold of any reading that answers consistently; these state the rules
# themselves (the mutation run, scripts/mutation, showed that a reading taking every id, or none
# of the reserved names, passed them).

_ID_CHARS = st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), exclude_characters="/")
_FORBIDDEN = st.characters(categories=("Cc", "Cs"))


def _refusal(rule, value, field):
    """The ValidationFailed ``rule`` raises on ``value``, checked to be a clear one: its code, the
    field in its details and first in its message."""
    with pytest.raises(ValidationFailed) as refused:
        rule(value)
    exc = refused.value
    assert exc.details == {"field": field} and isinstance(exc.message, str) and exc.message.startswith(field)
    return exc


@given(body=st.text(_ID_CHARS, min_size=1, max_size=230), pad=st.sampled_from(["", " ", "\t", " \n "]))
@example(body="x" * 200, pad=" ")
@example(body="x" * 201, pad="")
@example(body="..", pad=" ")
def test_an_external_id_is_taken_trimmed_when_it_has_1_to_200_characters(body, pad):
    trimmed = (pad + body + pad).strip()
    if 1 <= len(trimmed) <= 200:
        assert clean_external_id(pad + body + pad) == trimmed
        if trimmed in (".", "..") or trimmed.casefold() == "erased" or trimmed.casefold().startswith(ERASED_PREFIX):
            # A name no new end-user may take: "." and ".." are no URL segment, the rest are erased ones'.
            assert _refusal(lambda v: clean_external_id(v, new=True), trimmed, "external_id").code == \
                "invalid_external_id"
            return
        assert clean_external_id(trimmed, new=True) == trimmed
        if pad:  # below the edge, a new end-user's id is checked as it is, not trimmed
            assert _refusal(new_external_id_check, pad + body + pad, "external_id").code == "invalid_external_id"
    else:
        for new in (False, True):
            assert _refusal(lambda v: clean_external_id(v, new=new), pad + body + pad, "external_id").code == \
                "invalid_external_id"


@given(body=st.text(_ID_CHARS, min_size=2, max_size=50), forbidden=_FORBIDDEN, at=st.integers(1, 49))
def test_a_control_character_or_a_lone_surrogate_inside_an_external_id_is_refused(body, forbidden, at):
    at = min(at, len(body) - 1)
    value = body[:at] + forbidden + body[at:]
    for new in (False, True):
        assert _refusal(lambda v: clean_external_id(v, new=new), value, "external_id").code == "invalid_external_id"


@given(value=json_values.filter(lambda v: not isinstance(v, str)) | st.sampled_from(["", " ", "\t\n"]))
def test_anything_but_text_or_only_white_space_is_no_external_id(value):
    for new in (False, True):
        assert _refusal(lambda v: clean_external_id(v, new=new), value, "external_id").code == "invalid_external_id"


_RESERVED = st.one_of(
    st.builds(lambda a, b, at: a[:at] + "/" + b, st.text(_ID_CHARS, max_size=20), st.text(_ID_CHARS, max_size=20),
              st.integers(0, 20)),
    st.sampled_from([".", ".."]),
    st.builds(lambda word, rest: word + rest, st.sampled_from(["erased", "ERASED", "Erased", "eRaSeD"]),
              st.just("") | st.text(_ID_CHARS, max_size=20).map(lambda t: ":" + t)),
)


@given(name=_RESERVED)
@example(name="erased:")
@example(name="a/b")
def test_a_new_end_user_cannot_take_an_unaddressable_or_erased_name_that_an_existing_one_is_found_by(name):
    """A name with '/', '.' or '..' (no URL path can address it), 'erased' or 'erased:…' in any
    case (the erased end-users' tombstones): refused where an end-user is created, in both
    checks; found as it is where an existing end-user is named."""
    assert clean_external_id(name) == name
    for rule in (lambda v: clean_external_id(v, new=True), new_external_id_check):
        assert _refusal(rule, name, "external_id").code == "invalid_external_id"


@given(value=st.one_of(json_values, st.text(max_size=300), moment_texts))
def test_a_refused_moment_or_day_is_named_with_its_field_and_what_was_sent(value):
    """A refusal names the field first and quotes what was sent (its first 100 characters, or its
    type when it is no text)."""
    for rule, code in ((lambda v: clean_datetime(v, field="since"), "invalid_datetime"),
                       (lambda v: clean_date(v, field="since"), "invalid_date")):
        try:
            rule(value)
        except ValidationFailed:
            exc = _refusal(rule, value, "since")
            assert exc.code == code
            if code == "invalid_date":
                assert (repr(value[:100]) if isinstance(value, str) else type(value).__name__) in exc.message


@given(moment=st.datetimes(timezones=st.just(UTC)))
def test_a_moment_written_with_z_is_the_moment_written_with_plus_zero(moment):
    written = moment.isoformat()
    assert clean_datetime(written.replace("+00:00", "Z"), field="at") == clean_datetime(written, field="at") == moment
