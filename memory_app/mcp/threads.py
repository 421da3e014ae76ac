"""Running the synchronous services (Django ORM, Elasticsearch) from the async MCP endpoint."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections

T = TypeVar("T")


async def run_sync(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run ``fn(**kwargs)`` in a worker thread, treated like one Django request.

    Not thread-sensitive: the SDK serves tool calls from its own task group, outside any
    request's ThreadSensitiveContext, so the thread-sensitive executor would be one thread
    shared by every MCP call in the process. Worker threads get their own database
    connections, so they are opened and closed here as Django does around a request.
    """
    return await sync_to_async(functools.partial(_as_request, fn), thread_sensitive=False)(**kwargs)


def _as_request(fn: Callable[..., T], /, **kwargs: Any) -> T:
    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()
