"""The audit log is append-only and content-free."""

from __future__ import annotations

import io

import pytest
from django.db.models import ProtectedError

from tenants import audit_chain
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


def test_a_tenant_or_end_user_with_audit_events_is_never_deleted(tenant, make_staff):
    """The database refuses to change an audit row, so nothing an event names may be deleted (a
    deletion would null its foreign key): an erased end-user's row stays as a tombstone, and a
    tenant is retired by erasing its end-users and revoking its tokens, its row kept."""
    subject = Subject.objects.create(tenant=tenant, external_id="alice")
    audit_record(actor=make_staff("ada"), action="subject.erased", subject=subject, target_id=str(subject.user_id))
    with pytest.raises(ProtectedError):
        subject.delete()
    with pytest.raises(ProtectedError):
        tenant.delete()
    event = AuditEvent.objects.get(action="subject.erased")
    assert (event.subject_id, event.subject_ref, event.tenant_slug) == (subject.pk, str(subject.user_id), "acme")


def test_a_chain_begun_before_the_keys_is_keyed_only_by_an_operator(tenant, as_dba, settings, checkpoint_store):
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import call_command

    from tenants.selectors import audit_chain_verify

    settings.ES_AUDIT_USERNAME = ""  # as a release without keys: no checkpoint either
    first = audit_record(actor="test", action="one", tenant=tenant)
    second = audit_record(actor="test", action="two", tenant=tenant)
    settings.ES_AUDIT_USERNAME = "engram-audit"
    # As the events of a release without keys were: unkeyed SHA-256 links.
    prev = audit_chain.GENESIS
    for event in (first, second):
        fields = event.chain_fields() | {"key_id": ""}
        digest = audit_chain.link_hash(prev_hash=prev, fields=fields)
        as_dba("UPDATE tenants_auditevent SET key_id = '', prev_hash = %s, hash = %s WHERE id = %s",
               [prev, digest, event.pk])
        prev = digest
    # Engram never signs over an unkeyed head by itself: a laundered chain looks the same.
    with pytest.raises(ImproperlyConfigured, match="audit_reanchor"):
        audit_record(actor="test", action="three", tenant=tenant)
    assert "no event of the chain is keyed" in audit_chain_verify(chain="acme").reason
    call_command("audit_reanchor", "acme", stdout=io.StringIO())
    anchor = AuditEvent.objects.get(chain="acme", seq=3)
    assert (anchor.action, anchor.details) == ("audit.reanchored", {"unkeyed_events": 2, "unkeyed_head": prev})
    assert anchor.prev_hash == prev and anchor.key_id
    third = audit_record(actor="test", action="three", tenant=tenant)
    report = audit_chain_verify(chain="acme")
    assert third.seq == 4 and report.ok and (report.checked, report.legacy, report.keyed_at) == (4, 2, 3)
