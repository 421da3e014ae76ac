"""Lazily built thread pools and computed_ahead."""

import os
import threading

from engram_core.threads import LazyPool, computed_ahead


def test_a_lazy_pool_is_made_on_first_use_once_per_process(monkeypatch):
    pool = LazyPool(name="engram-test")
    assert pool._pool is None  # nothing made when it is declared
    first = pool.get(workers=2)
    assert pool.get(workers=5) is first and first._max_workers == 2
    assert first.submit(lambda: threading.current_thread().name).result().startswith("engram-test")
    # A pool inherited through fork() has no threads behind it: the child makes its own.
    monkeypatch.setattr(os, "getpid", lambda: -1)
    child = pool.get(workers=2)
    assert child is not first
    monkeypatch.undo()
    for made in (first, child):
        made.shutdown()


def test_a_lazy_pool_shut_down_finishes_its_work_and_is_made_again_on_next_use():
    pool = LazyPool(name="engram-test")
    first = pool.get(workers=1)
    done = first.submit(lambda: "done")
    pool.shutdown()
    assert done.result() == "done"
    second = pool.get(workers=1)
    assert second is not first and second.submit(lambda: 1).result() == 1
    pool.shutdown()


def test_computed_ahead_computes_the_next_item_while_the_caller_holds_this_one():
    started = {n: threading.Event() for n in range(4)}

    def compute(n):
        started[n].set()
        return n * 10

    ahead = computed_ahead([0, 1, 2, 3], compute)
    assert next(ahead) == (0, 0)
    # The caller has not asked for item 1, and it is being (or has been) computed.
    assert started[1].wait(timeout=10)
    assert not started[2].is_set()
    assert list(ahead) == [(1, 10), (2, 20), (3, 30)]
    assert list(computed_ahead([], compute)) == []

    # A caller that stops early: the item in flight finishes and nothing after it starts.
    started = {n: threading.Event() for n in range(4)}
    ahead = computed_ahead([0, 1, 2, 3], compute)
    next(ahead)
    ahead.close()
    assert started[1].is_set() and not started[2].is_set() and not started[3].is_set()
