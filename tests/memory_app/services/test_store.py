"""The shared write step: an update computed from what the subject sees, never losing a concurrent one."""

import pytest

from engram_core.errors import Conflict
from engram_core.es.schema import MemoryType
from memory_app import selectors
from memory_app.selectors import memory_get
from memory_app.services.facts import fact_write
from memory_app.services.store import document_update, write_target


def _reader(subject, memory_id):
    return lambda: selectors.visible_document(subject=subject, memory_id=memory_id, types=[MemoryType.SEMANTIC])


def test_an_update_computed_from_a_stale_read_is_computed_again_not_applied(subject):
    fact = fact_write(subject=subject, text="Alice keeps bees.")
    stale = _reader(subject, fact["id"])()
    writer = write_target(tenant=subject.tenant)[0]
    writer.update(index=stale.index, id=stale.id, doc={"confidence": 0.5}, refresh=True)  # someone else's change
    seen = []

    def change(visible):
        seen.append(visible.source["confidence"])
        return {"metadata": {"seen": len(seen)}}

    before, update = document_update(writer=writer, read=_reader(subject, fact["id"]), change=change, visible=stale,
                                     refresh=True, conflict=Conflict("busy"))
    assert seen == [1.0, 0.5]  # the second computation saw the concurrent change
    assert before.source["confidence"] == 0.5 and update == {"metadata": {"seen": 2}}
    stored = memory_get(subject=subject, memory_id=fact["id"])
    assert (stored["confidence"], stored["metadata"]) == (0.5, {"seen": 2})


def test_nothing_to_change_writes_nothing(subject, es_admin):
    fact = fact_write(subject=subject, text="Alice keeps bees.")
    visible = _reader(subject, fact["id"])()
    before, update = document_update(writer=write_target(tenant=subject.tenant)[0], read=_reader(subject, fact["id"]),
                                     change=lambda v: None, conflict=Conflict("busy"))
    assert update is None and before.seq_no == visible.seq_no
    assert _reader(subject, fact["id"])().seq_no == visible.seq_no


def test_a_document_that_keeps_changing_raises_the_callers_conflict(subject):
    fact = fact_write(subject=subject, text="Alice keeps bees.")
    writer = write_target(tenant=subject.tenant)[0]
    tries = []

    def change(visible):
        tries.append(visible.seq_no)
        writer.update(index=visible.index, id=visible.id, doc={"confidence": len(tries) / 10}, refresh=True)
        return {"metadata": {"lost": True}}

    with pytest.raises(Conflict) as exc:
        document_update(writer=writer, read=_reader(subject, fact["id"]), change=change, attempts=3,
                        conflict=Conflict("the fact is busy", code="concurrent_update"))
    assert exc.value.code == "concurrent_update" and len(tries) == 3
    assert memory_get(subject=subject, memory_id=fact["id"])["metadata"] == {}
