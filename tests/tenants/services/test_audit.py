"""The audit log is append-only and content-free."""

from __future__ import annotations

import pytest

from tenants.models import AuditEvent, Subject
from tenants.services.audit import audit_record


def test_audit_events_cannot_be_changed_or_deleted(tenant):
    event = audit_record(actor="test", action="subject.exported", tenant=tenant, details={"documents": 3})

    event.action = "nothing.happened"
    with pytest.raises(TypeError, match="append-only"):
        event.save()
    with pytest.raises(TypeError, match="append-only"):
        event.delete()
    with pytest.raises(TypeError, match="append-only"):
        AuditEvent.objects.filter(pk=event.pk).update(action="nothing.happened")
    with pytest.raises(TypeError, match="append-only"):
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.get(pk=event.pk).action == "subject.exported"


def test_audit_details_refuse_memory_content(tenant):
    with pytest.raises(ValueError, match="memory content"):
        audit_record(actor="test", action="memory.forgotten", tenant=tenant, details={"text": "my PIN is 1234"})
    assert not AuditEvent.objects.exists()


def test_events_outlive_the_subject_they_are_about(tenant, make_staff):
    subject = Subject.objects.create(tenant=tenant, external_id="alice")
    user_id = str(subject.user_id)
    audit_record(actor=make_staff("ada"), action="subject.erased", subject=subject, target_id=user_id)

    subject.delete()

    event = AuditEvent.objects.get(action="subject.erased")
    assert event.subject is None
    assert (event.subject_ref, event.tenant_slug, event.actor_type, event.actor) == (user_id, "acme", "user", "ada")
