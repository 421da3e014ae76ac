"""Thread pools built on first use, and a computation kept one step ahead of its consumer."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class LazyPool:
    """A thread pool made on first use in each process, not at import: a pool inherited through
    fork() (Celery's prefork workers) would have no threads behind it, and one made at import
    would fix its size before settings are read."""

    def __init__(self, *, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._pool: tuple[int, ThreadPoolExecutor] | None = None  # (the process it was made in, the pool)

    def get(self, *, workers: int) -> ThreadPoolExecutor:
        """This process's pool, made with ``workers`` threads if it has none yet."""
        pool = self._pool
        if pool is None or pool[0] != os.getpid():
            with self._lock:
                pool = self._pool
                if pool is None or pool[0] != os.getpid():
                    pool = (os.getpid(), ThreadPoolExecutor(max_workers=workers, thread_name_prefix=self.name))
                    self._pool = pool
        return pool[1]

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop this process's pool (after its queued work when ``wait``); the next ``get`` makes a new one."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and pool[0] == os.getpid():
            pool[1].shutdown(wait=wait)


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
