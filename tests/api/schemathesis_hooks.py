"""Schemathesis hooks for the API's fuzz (``SCHEMATHESIS_HOOKS=tests.api.schemathesis_hooks``, as
tests/api/test_live.py runs it): beside what the schema allows, bodies, query strings and path
values that hold long runs of digits (as text and as JSON numbers) and JSON nested deeper than
the API takes (tests/strategies.py)."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import strategies as st

from tests.strategies import json_numbers, long_numbers, nested_json

# Deeper than the API's limit (api.parsers.MAX_JSON_DEPTH) and within what the fuzzer's own
# JSON writer can write; the 5,000 levels of the issue are sent to every endpoint by tests/api/test_errors.py.
_DEEP = st.integers(100, 600)


def _variants(value: Any, *, numbers_as_json: bool) -> st.SearchStrategy:
    """``value`` as generated, or (an object) with one field's value replaced by a long number or,
    in a body, by deeply nested JSON."""
    if not isinstance(value, dict) or not value:
        return st.just(value)
    keys = st.sampled_from(sorted(value, key=str))
    replacements = [long_numbers]
    if numbers_as_json:
        replacements += [json_numbers, _DEEP.map(nested_json)]
    return st.one_of(st.just(value), st.builds(lambda key, new: {**value, key: new}, keys, st.one_of(replacements)))


@schemathesis.hook
def before_generate_body(context, strategy):
    return strategy.flatmap(lambda body: _variants(body, numbers_as_json=True))


@schemathesis.hook
def before_generate_query(context, strategy):
    return strategy.flatmap(lambda query: _variants(query, numbers_as_json=False))


@schemathesis.hook
def before_generate_path_parameters(context, strategy):
    return strategy.flatmap(lambda params: _variants(params, numbers_as_json=False))
