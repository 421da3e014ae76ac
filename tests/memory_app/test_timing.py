"""memory_app.timing: phases recorded per request, across the turn's recall thread, and nothing
recorded outside a request that asked for it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from memory_app import timing


@pytest.fixture
def server_timing():
    from benchmarks.load import server_timing

    return server_timing


def test_nothing_is_recorded_outside_a_recording_request():
    with timing.timed("search"):
        pass
    timing.flag("refreshed")
    work = timing.bound(len)
    assert work is len  # nothing to bind


def test_phases_repeat_into_one_sum_and_flags_come_last(server_timing):
    timings, token = timing.start()
    try:
        with timing.timed("refresh"):
            pass
        timing.flag("refreshed")
        timings.add("search", 2.5)
        timings.add("search", 1.0)
    finally:
        timing.stop(token)
    header = timings.header()
    assert header.startswith("refresh;dur=") and header.endswith(", search;dur=3.5, refreshed")
    durations, flags = server_timing(header)
    assert set(durations) == {"refresh", "search"} and durations["search"] == 3.5 and flags == {"refreshed"}
    with timing.timed("embed"):  # stopped: no longer recorded
        pass
    assert "embed" not in timings.durations


def test_a_pool_thread_records_into_the_request_that_started_it():
    def recall() -> str:
        with timing.timed("search"):
            timing.flag("refreshed")
        return "done"

    timings, token = timing.start()
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            assert pool.submit(timing.bound(recall)).result() == "done"
            pool.submit(recall).result()  # not bound: records nowhere
    finally:
        timing.stop(token)
    assert set(timings.durations) == {"search"} and timings.flags == {"refreshed"}
