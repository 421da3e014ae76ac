"""Elasticsearch time values (``"250ms"``, ``"2s"``, ``"1m"``) as seconds.

Pure: the settings module uses it before Django is configured.
"""

from __future__ import annotations

import re

_UNITS = {"nanos": 1e-9, "micros": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_VALUE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(nanos|micros|ms|s|m|h|d)\s*$")


def es_seconds(value: str) -> float | None:
    """Seconds in an Elasticsearch time value; ``-1`` (never) gives None. A malformed value raises
    ValueError naming it."""
    if str(value).strip() == "-1":
        return None
    match = _VALUE.match(str(value))
    if match is None:
        raise ValueError(f"{value!r} is not an Elasticsearch time value (such as 250ms, 2s or 1m)")
    return float(match.group(1)) * _UNITS[match.group(2)]
