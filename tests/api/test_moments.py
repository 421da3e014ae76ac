"""Every REST date-time field reads a moment as every other door does (MCP, the services called
directly: ``engram_core.validation.clean_datetime``): the same moments taken, the same refused, with
``invalid_datetime`` naming the field. DRF's own field took a moment without a timezone as UTC and
answered an out-of-calendar or malformed one with the generic ``invalid``, where MCP and the
services refused both with ``invalid_datetime``."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings, strategies as st

from api.apis import EpisodesImportApi, RecallApi, TurnCreateApi
from engram_core.errors import ValidationFailed
from engram_core.validation import clean_datetime
from tests.strategies import day_texts, json_scalars, moment_texts, moments, texts

pytestmark = pytest.mark.properties

_EPISODE = {"text": "hello", "occurred_at": "2025-01-01T00:00:00Z"}
# Each REST input with a date-time field: the body with ``value`` in it, where to find it once
# read, and the details of its refusal (an import's second episode is named by its place).
_FIELDS = [
    *[(TurnCreateApi.InputSerializer, lambda v: {"text": "hello", "occurred_at": v}, lambda d: d["occurred_at"],
       {"field": "occurred_at"})],
    *[(RecallApi.InputSerializer, lambda v, name=name: {"query": "hello", name: v}, lambda d, name=name: d[name],
       {"field": name}) for name in ("since", "until", "as_of")],
    (EpisodesImportApi.InputSerializer, lambda v: {"episodes": [_EPISODE, {**_EPISODE, "occurred_at": v}]},
     lambda d: d["episodes"][1]["occurred_at"], {"field": "occurred_at", "index": 1}),
]
_values = st.one_of(
    moment_texts, day_texts, moments.map(lambda m: m.isoformat()),
    moments.map(lambda m: m.replace(tzinfo=None).isoformat()),  # the same moments without their time zone
    st.sampled_from(["2025-01-01T00:00:00", "2025-01-01", "2025-01-01T10:00", "20250101T000000Z", "2025-01-01 10:00Z",
                     "2025-W01-1T00:00:00Z", "2025-001T00:00:00Z", "2025-01-01T00:00:00+24:00"]),
    texts, json_scalars)


def _outcome(read) -> tuple[str, object]:
    try:
        return "taken", read()
    except ValidationFailed as exc:
        return "refused", (exc.code, exc.details)


@settings(max_examples=300, deadline=None)
@example(field=2, value="2025-01-01T00:00:00")  # taken by REST as UTC, refused by MCP
@example(field=0, value="0001-01-01T00:00:00+01:00")  # REST's `invalid`, MCP's `invalid_datetime`
@example(field=4, value="2024-02-30T10:00:00Z")
@given(field=st.integers(0, len(_FIELDS) - 1), value=_values)
def test_a_rest_date_time_field_takes_and_refuses_what_every_other_door_does(field, value):
    serializer_class, body, read, details = _FIELDS[field]
    assume(value is not None or field != 4)  # an imported episode's is required: DRF's `null`

    def rest():
        serializer = serializer_class(data=body(value))
        serializer.is_valid(raise_exception=True)
        return read(serializer.validated_data)

    expected = _outcome(lambda: clean_datetime(value, field=details["field"]))
    if expected[0] == "refused":
        expected = ("refused", ("invalid_datetime", details))
    assert _outcome(rest) == expected, (details, value)
