"""Forget and erase: content-free tombstones, "not yours" as missing, every copy and counter gone."""

from datetime import UTC, datetime

import pytest

from engram_core.errors import NotFound
from memory_app.models import FactUsage
from memory_app.selectors import memory_get, subject_export
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_write
from memory_app.services.forget import memory_forget, subject_erase
from memory_app.usage import usage_bump
from tenants.models import AuditEvent, SubjectKey


def test_forget_leaves_a_content_free_tombstone(subject):
    fact = fact_write(subject=subject, text="Alice's PIN is 4321.")
    memory_forget(subject=subject, memory_id=fact["id"], reason="user asked", actor="agent:test")
    with pytest.raises(NotFound):
        memory_get(subject=subject, memory_id=fact["id"])
    event = AuditEvent.objects.get(action="memory.forget")
    assert event.target_id == fact["id"] and event.details == {"memory_type": "semantic", "reason": "user asked"}
    assert "4321" not in str(event.details)
    with pytest.raises(NotFound):
        memory_forget(subject=subject, memory_id=fact["id"], reason="again", actor="agent:test")


def test_forgetting_someone_elses_memory_is_not_found(subject, make_subject):
    bob = make_subject("bob")
    fact = fact_write(subject=bob, text="Bob's locker code is 999.")
    with pytest.raises(NotFound):
        memory_forget(subject=subject, memory_id=fact["id"], reason="x", actor="agent:test")
    assert memory_get(subject=bob, memory_id=fact["id"])["text"] == "Bob's locker code is 999."


def test_export_and_erase(subject, make_subject, count_docs):
    bob = make_subject("bob")
    episode_write(subject=subject, text="I need a new phone.")
    fact_write(subject=subject, text="Alice wants a new phone.")
    playbook_write(subject=subject, trigger="phone upgrade", steps="Offer trade-in.")
    catalog_entry_write(tenant=subject.tenant, title="Phones", text="Trade-ins are accepted.")
    fact_write(subject=bob, text="Bob has a new phone.")

    exported = subject_export(subject=subject)
    assert {k: len(v) for k, v in exported["memories"].items()} == {"episodic": 1, "semantic": 1, "procedural": 1}
    assert all("embedding" not in d for items in exported["memories"].values() for d in items)

    assert subject_erase(subject=subject, actor="agent:test") == 3
    assert count_docs() == 2  # bob's fact and the catalog entry remain
    assert not SubjectKey.objects.filter(subject=subject, revoked_at__isnull=True).exists()
    assert AuditEvent.objects.filter(action="subject.erase", target_id=str(subject.user_id)).exists()


def test_forget_and_erase_delete_the_use_counters(make_subject):
    alice, bob = make_subject("alice"), make_subject("bob")
    kept, gone = (fact_write(subject=alice, text=t) for t in ("Alice hikes.", "Alice smokes."))
    bobs = fact_write(subject=bob, text="Bob sails.")
    at = datetime.now(UTC)
    usage_bump(ids=[kept["id"], gone["id"]], at=at, subject_id=alice.pk)
    usage_bump(ids=[bobs["id"]], at=at, subject_id=bob.pk)
    memory_forget(subject=alice, memory_id=gone["id"], reason="asked", actor="test")
    ours = FactUsage.objects.filter(subject__in=[alice, bob])  # (rows of earlier tests' pool threads stay)
    assert set(ours.values_list("pk", flat=True)) == {kept["id"], bobs["id"]}
    subject_erase(subject=alice, actor="test")
    assert set(ours.values_list("pk", flat=True)) == {bobs["id"]}
