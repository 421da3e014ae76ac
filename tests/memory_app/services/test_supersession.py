"""Supersession: chains both ways, refusals that write nothing, and the undo of a half-done one."""

import pytest

from engram_core.errors import Conflict, NotFound
from engram_core.es.schema import MemoryType, alias_name
from memory_app import selectors
from memory_app.selectors import memory_get, memory_history
from memory_app.recall import memory_recall
from memory_app.services.facts import fact_write
from tenants.services.clients import writer_es_client


def ids(results):
    return [r["id"] for r in results]


def test_superseding_unknown_or_foreign_ids_is_refused_and_writes_nothing(subject, make_subject, count_docs):
    bob = make_subject("bob")
    bobs = fact_write(subject=bob, text="Bob is allergic to peanuts.")
    for bad in (["0123456789abcdef"], [bobs["id"]]):
        with pytest.raises(NotFound) as exc:
            fact_write(subject=subject, text="Alice is allergic to cats.", supersedes=bad)
        assert exc.value.details == {"ids": bad}
    assert count_docs(MemoryType.SEMANTIC) == 1
    assert "superseded_by" not in memory_get(subject=bob, memory_id=bobs["id"])


def test_a_supersession_that_fails_half_way_is_undone(subject, count_docs, monkeypatch):
    old = fact_write(subject=subject, text="Alice works at Initech.")
    other = fact_write(subject=subject, text="Alice works remotely.")
    # The new id collides with an existing memory: the create fails before any old doc changes.
    with pytest.raises(Conflict):
        fact_write(subject=subject, text="Alice works at Globex.", supersedes=[old["id"]],
                   memory_id=other["id"])
    assert "superseded_by" not in memory_get(subject=subject, memory_id=old["id"])
    # Now fail on the second old document (a concurrent change bumps its sequence number).
    visible = selectors.visible_documents(subject=subject, ids=[old["id"], other["id"]])
    writer_es_client().update(index=alias_name(MemoryType.SEMANTIC), id=other["id"],
                                       doc={"confidence": 0.5}, refresh=True)
    # Hand over the now-stale view, except to the undo's read of the first old fact.
    fresh = selectors.visible_documents
    monkeypatch.setattr(selectors, "visible_documents",
                        lambda **kw: fresh(**kw) if list(kw["ids"]) == [old["id"]] else visible)
    with pytest.raises(Conflict):
        fact_write(subject=subject, text="Alice works at Globex.", supersedes=[old["id"], other["id"]],
                   memory_id="new-fact-0001")
    monkeypatch.undo()
    assert count_docs(MemoryType.SEMANTIC) == 2
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id="new-fact-0001")
    # Undone: the old facts carry no superseded_by (null) and are recalled as current again.
    assert memory_get(subject=subject, memory_id=old["id"]).get("superseded_by") is None
    assert memory_get(subject=subject, memory_id=other["id"]).get("superseded_by") is None
    assert set(ids(memory_recall(subject=subject, query="where does Alice work", k=5))) == {
        old["id"], other["id"]}


def test_supersession_chain_is_readable_both_ways_and_hidden_by_default(subject):
    abc = fact_write(subject=subject, text="Alice lives in Leeds.", confidence=0.9)
    xyz = fact_write(subject=subject, text="Alice lives in York.", supersedes=[abc["id"]])
    pqr = fact_write(subject=subject, text="Alice lives in Bath.", supersedes=[xyz["id"]],
                     contradiction="harsh", confidence=0.9)
    assert pqr["confidence"] == pytest.approx(0.8)
    assert memory_get(subject=subject, memory_id=abc["id"])["superseded_by"] == [xyz["id"]]

    middle = memory_history(subject=subject, memory_id=xyz["id"])
    assert [d["id"] for d in middle["older"]] == [abc["id"]]
    assert [d["id"] for d in middle["newer"]] == [pqr["id"]]
    assert [d["id"] for d in memory_history(subject=subject, memory_id=abc["id"])["newer"]] == [xyz["id"], pqr["id"]]
    assert [d["id"] for d in memory_history(subject=subject, memory_id=pqr["id"])["older"]] == [xyz["id"], abc["id"]]

    assert ids(memory_recall(subject=subject, query="where does Alice live", k=10)) == [pqr["id"]]
    everything = memory_recall(subject=subject, query="where does Alice live", k=10, include_superseded=True)
    assert set(ids(everything)) == {abc["id"], xyz["id"], pqr["id"]}


def test_superseding_an_already_superseded_fact_is_allowed(subject):
    old = fact_write(subject=subject, text="Alice drives a Fiat.")
    first = fact_write(subject=subject, text="Alice drives a Honda.", supersedes=[old["id"]])
    second = fact_write(subject=subject, text="Alice drives a Volvo.", supersedes=[old["id"]])
    assert memory_get(subject=subject, memory_id=old["id"])["superseded_by"] == [first["id"], second["id"]]


def test_undoing_a_supersession_keeps_a_concurrent_writers_mark(subject, monkeypatch):
    """The undo of a supersession that failed half-way restores the old documents it had marked,
    but only its own mark: another supersession that marked one of them meanwhile keeps its mark
    (the undo writes with the document's sequence number, as every other update does)."""
    from memory_app.services import supersession

    first, second = (fact_write(subject=subject, text=t)["id"] for t in ("Alice works at Initech.",
                                                                           "Alice works remotely."))
    real = supersession._mark_superseded
    marked = []

    def mark_then_a_concurrent_writer(**kwargs):
        if marked:  # the second old document: forgotten meanwhile
            raise NotFound("forgotten meanwhile", details={"ids": [kwargs["visible"].id]})
        before = real(**kwargs)
        marked.append(before)
        # Another supersession marks the first old document right after this one did.
        writer_es_client().update(index=alias_name(MemoryType.SEMANTIC), id=first, refresh=True,
                                  doc={"superseded_by": ["new-fact-0001", "other-fact-01"]})
        return before

    monkeypatch.setattr(supersession, "_mark_superseded", mark_then_a_concurrent_writer)
    with pytest.raises(NotFound):
        fact_write(subject=subject, text="Alice works at Globex.", supersedes=[first, second],
                   memory_id="new-fact-0001")
    assert memory_get(subject=subject, memory_id=first)["superseded_by"] == ["other-fact-01"]
