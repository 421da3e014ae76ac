"""computed_ahead: the next item computed while the caller holds this one."""

import threading

from engram_core.threads import computed_ahead


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
