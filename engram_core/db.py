"""Database connections on threads that are not Django's request threads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db import close_old_connections

T = TypeVar("T")


def as_request(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run ``fn(**kwargs)`` on this thread as Django runs a request: a broken or expired
    connection is dropped before and after, a healthy one kept for the next call (CONN_MAX_AGE,
    checked before reuse: CONN_HEALTH_CHECKS). For long-lived pool threads (the MCP endpoint's,
    a turn's pre-recall, the use-count bumps), which outlive any request and would otherwise keep
    a connection a database restart broke."""
    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()
