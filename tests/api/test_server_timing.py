"""The Server-Timing header (ENGRAM_SERVER_TIMING): what a recall and a turn say their time went
to, against the real node; absent by default."""

from __future__ import annotations

import pytest

from tests.api.conftest import slow_refresh


@pytest.fixture
def parse():
    # The benchmark's own parser: the header is written for it.
    from benchmarks.load import server_timing

    return server_timing


def _turn(api, who: str, text: str, **extra):
    response = api.post(f"/api/v1/subjects/{who}/turns", {"text": text, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response


def _recall(api, who: str, query: str):
    response = api.post(f"/api/v1/subjects/{who}/recall", {"query": query}, format="json")
    assert response.status_code == 200, response.content
    return response


def test_no_header_unless_switched_on(api):
    _turn(api, "tove", "my bike has a flat tyre")
    assert "Server-Timing" not in _recall(api, "tove", "bike")


def test_a_recall_and_a_turn_name_their_phases_and_whether_they_refreshed(api, settings, es_admin, parse):
    settings.ENGRAM_SERVER_TIMING = True
    first = _turn(api, "ulla", "my bike has a flat tyre", session_id="s1")
    # A new end-user's turn: no pending write to make searchable, its recall after the write.
    phases, flags = parse(first["Server-Timing"])
    assert {"write", "embed", "search", "app"} <= set(phases) and "refreshed" not in flags
    assert all(ms >= 0 for ms in phases.values()) and phases["app"] >= phases["write"]
    with slow_refresh(es_admin) as slow_refresh_index:  # only a forced refresh makes the turn below searchable
        second = _turn(api, "ulla", "the tyre is flat again", session_id="s1")
        # The first turn was made searchable by the periodic refresh by now, or this turn refreshed:
        # either way the turn timed the check and, on its recall thread, the recall's search.
        phases, _ = parse(second["Server-Timing"])
        assert {"refresh", "embed", "write", "search"} <= set(phases)
        # Under a 60 s interval only a forced refresh makes the second turn searchable; the turn's own
        # recall thread may have made one after the write landed. Asked without refreshing:
        index, turn_id = slow_refresh_index, second.json()["id"]
        visible = es_admin.options(ignore_status=404).get(index=index, id=turn_id, realtime=False, source=False)["found"]
        recall = _recall(api, "ulla", "flat tyre")
        phases, flags = parse(recall["Server-Timing"])
        # Still pending and not searchable: this recall refreshed; made searchable already: it did not.
        assert {"refresh", "embed", "search"} <= set(phases) and ("refreshed" in flags) is not visible
        assert second.json()["id"] in [m["id"] for m in recall.json()["memories"]]
        again = _recall(api, "ulla", "bike")  # nothing pending any more: no refresh
        phases, flags = parse(again["Server-Timing"])
        assert "refreshed" not in flags and {"refresh", "search"} <= set(phases)
