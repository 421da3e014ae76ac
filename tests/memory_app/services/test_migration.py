"""es_setup's change to each migrated document (memory_app.services.migration), as a property: an
episode's dates are read as a write reads them, whatever its words and its time."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import example, given, strategies as st

from memory_app.services.migration import migration_rekey
from memory_app.services.store import episode_dates
from tests.strategies import moments, sentences

_SERVER_ID = "0" * 32


@pytest.mark.properties
@given(text=sentences, occurred=moments.map(lambda m: m.isoformat()) | st.text(max_size=40))
@example(text="The castle near us was built 4500 years ago.", occurred="2026-12-06T10:00:00+00:00")
@example(text="In 10000 years nobody will remember this.", occurred="2026-12-06T10:00:00Z")
@example(text="We met yesterday.", occurred="0001-01-01T00:00:00+01:00")
def test_setup_reads_an_episodes_dates_whatever_it_says_and_whenever_it_happened(text, occurred):
    # With its concepts already stored: only the dates are added (the concepts have properties of their own).
    source = {"memory_type": "episodic", "source": "agent", "text": text, "occurred_at": occurred, "concepts": "x"}
    migrated = migration_rekey(_SERVER_ID, source, concepts=True)
    assert migrated == migration_rekey(_SERVER_ID, source, concepts=True)
    if migrated is not None:
        doc_id, changed = migrated
        when = datetime.fromisoformat(occurred.replace("Z", "+00:00"))
        assert doc_id == _SERVER_ID and changed == {**source, **episode_dates(text=text, occurred_at=when)}
    already = {**source, "states_time": False}
    assert migration_rekey(_SERVER_ID, already, concepts=True) is None  # dated before: left as stored
    # With concepts off (es_setup passes ENGRAM_CONCEPTS), a memory stored without them gets none.
    unread = {k: v for k, v in already.items() if k != "concepts"}
    assert migration_rekey(_SERVER_ID, unread, concepts=False) is None
