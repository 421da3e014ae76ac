"""A computation kept one step ahead of its consumer, in a worker thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def computed_ahead(items: Sequence[Any], compute: Callable[[Any], Any]) -> Iterator[tuple[Any, Any]]:
    """Each item with ``compute(item)``, in order, the next item's computed in a worker thread
    while the caller uses this one's (an import embeds its next batch while the bulk helper sends
    this one). If the caller stops early, the item being computed finishes and nothing follows it."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-ahead") as pool:
        pending = pool.submit(compute, items[0])
        for n, item in enumerate(items):
            result = pending.result()
            if n + 1 < len(items):
                pending = pool.submit(compute, items[n + 1])
            yield item, result
