"""The API's JSON parser's nesting limit (api.parsers), as a property: it counts the
nesting of any JSON text exactly, brackets inside strings aside."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, strategies as st

from api.parsers import nested_deeper_than
from tests.strategies import json_values, nested_json, nested_json_text

pytestmark = pytest.mark.properties


def _depth(value) -> int:
    depth, level = 0, [value]
    while level:
        nested = [v for item in level if isinstance(item, dict | list)
                  for v in (item.values() if isinstance(item, dict) else item)]
        depth += any(isinstance(item, dict | list) for item in level)
        level = nested
    return depth


_brackety = st.text(alphabet='[]{}"\\ab', max_size=30)


@given(value=json_values | st.recursive(_brackety, lambda inner: st.lists(inner, max_size=3)
                                        | st.dictionaries(_brackety, inner, max_size=3)),
       limit=st.integers(0, 200))
@example(value=nested_json(5000), limit=128)
@example(value={"a": '[[[["\\"{{{{'}, limit=1)
def test_the_nesting_of_any_json_text_is_counted_exactly(value, limit):
    try:
        text = json.dumps(value)
    except (RecursionError, ValueError):  # deeper than json.dumps itself writes: as text instead
        text = nested_json_text(_depth(value))
    assert nested_deeper_than(text.encode(), limit) is (_depth(value) > limit)
