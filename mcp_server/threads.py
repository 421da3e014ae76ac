"""Running the synchronous services (Django ORM, Elasticsearch) from the async MCP endpoint."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async

from engram_core.db import as_request

T = TypeVar("T")


async def run_sync(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run ``fn(**kwargs)`` in a worker thread, treated like one Django request.

    Not thread-sensitive: the SDK serves tool calls from its own task group, outside any
    request's ThreadSensitiveContext, so the thread-sensitive executor would be one thread
    shared by every MCP call in the process. Worker threads get their own database
    connections, handled here as Django handles them around a request (``as_request``).
    """
    return await sync_to_async(functools.partial(as_request, fn), thread_sensitive=False)(**kwargs)
