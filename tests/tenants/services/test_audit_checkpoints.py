"""Checkpoints of the audit chains: written only when the chain verifies, one successor each, and
kept where no credential of Engram's can overwrite, update or delete them (the real node, with the
roles scripts/stack.py creates)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from elasticsearch import AuthorizationException, ConflictError

from engram_core.es.client import admin_client, audit_client, keys_client, monitor_client
from engram_core.es.schema import audit_checkpoints_index
from tenants import audit_chain
from tenants.crypto import audit_public_keys
from tenants.models import AuditEvent
from tenants.selectors import audit_checkpoints_latest, audit_export_record, audit_verify
from tenants.services.audit import audit_record
from tenants.services.audit_checkpoints import audit_checkpoint_write, audit_store_check

pytestmark = pytest.mark.usefixtures("checkpoint_store")


def test_a_checkpoint_pins_the_head_and_names_the_one_before(tenant):
    for n in range(3):
        audit_record(actor="alice", action=f"a{n}", tenant=tenant)
    # The chain's first event keyed it, and a checkpoint pinned it at once.
    pin = audit_checkpoints_latest(chains=["acme"])["acme"][0]
    assert (pin["seq"], pin["previous_seq"], pin["keyed_at"]) == (1, 0, 1)
    [first] = audit_checkpoint_write()
    assert (first.state, first.checkpoint["seq"], first.checkpoint["previous_seq"]) == ("written", 3, 1)
    assert [r.state for r in audit_checkpoint_write()] == ["unchanged"]  # nothing moved: nothing signed
    audit_record(actor="alice", action="a3", tenant=tenant)
    [second] = audit_checkpoint_write(chains=["acme"])
    assert second.checkpoint["previous_seq"] == 3 and second.checkpoint["previous_signature"] == \
        first.checkpoint["signature"]
    stored = audit_checkpoints_latest(chains=["acme"])["acme"]
    assert [c["seq"] for c in stored] == [4, 3, 1]
    assert not audit_chain.checkpoint_problem(stored[0], audit_public_keys())
    # Its digest is the SHA-256 of the events it adds, recomputable by anyone.
    events = [audit_export_record(e) for e in AuditEvent.objects.filter(chain="acme", seq__gt=3).order_by("seq")]
    assert stored[0]["events_sha256"] == audit_chain.events_sha256(events)
    result = audit_verify(chains=["acme"])
    assert result.ok and result.reports[0].latest["seq"] == 4 and result.triggers


def test_the_keying_pin_is_written_when_the_first_event_commits(tenant, monkeypatch,
                                                                 django_capture_on_commit_callbacks):
    from tenants.services import audit

    monkeypatch.setattr(audit, "after_commit", lambda fn: audit.transaction.on_commit(fn, robust=True))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        audit_record(actor="alice", action="a", tenant=tenant)
    assert audit_checkpoints_latest(chains=["acme"]) == {}  # nothing before the commit
    for callback in callbacks:
        callback()
    [pin] = audit_checkpoints_latest(chains=["acme"])["acme"]
    assert (pin["seq"], pin["previous_seq"]) == (1, 0)


def test_no_credential_of_engrams_can_rewrite_a_checkpoint(tenant):
    audit_record(actor="alice", action="a", tenant=tenant)
    [written] = audit_checkpoint_write()
    index, doc_id = audit_checkpoints_index(), "acme:0"
    forged = {**written.checkpoint, "seq": 99}
    credentials = {"audit": audit_client(), "admin": admin_client(), "keys": keys_client(),
                   "monitor": monitor_client()}
    for name, es in credentials.items():
        with pytest.raises(AuthorizationException):
            es.index(index=index, id=doc_id, document=forged)  # overwrite
        with pytest.raises(AuthorizationException):
            es.update(index=index, id=doc_id, doc={"seq": 99})
        with pytest.raises(AuthorizationException):
            es.delete(index=index, id=doc_id)
        with pytest.raises(AuthorizationException):
            es.indices.delete(index=index)
        if name != "audit":
            with pytest.raises(AuthorizationException):
                es.create(index=index, id="acme:7", document=forged)
    with pytest.raises(ConflictError):  # the one writer may add, never replace
        audit_client().create(index=index, id=doc_id, document=forged)
    assert audit_store_check(es_admin=admin_client()) == []
    assert audit_checkpoints_latest(chains=["acme"])["acme"][0]["seq"] == 1


def test_a_forged_checkpoint_in_the_store_is_named(tenant, settings):
    audit_record(actor="alice", action="a", tenant=tenant)
    audit_record(actor="alice", action="b", tenant=tenant)
    audit_checkpoint_write()
    # Someone holding the checkpoint credential but not the signing key adds a "newer" checkpoint.
    other = audit_chain.SigningKeys.from_entries([audit_chain.generate_signing_key()])
    latest = audit_checkpoints_latest(chains=["acme"])["acme"][0]
    fake = audit_chain.checkpoint_sign(chain="acme", seq=3, head_hash="0" * 64, created_at="2999-01-01T00:00:00+00:00",
                                       previous=latest, keyed_at=1, events_digest="0" * 64, signing=other)
    audit_client().create(index=audit_checkpoints_index(), id="acme:2", document=fake, refresh="wait_for")
    report = audit_verify(chains=["acme"]).reports[0]
    assert not report.ok and "not in ENGRAM_AUDIT_SIGNING_KEYS or ENGRAM_AUDIT_PUBLIC_KEYS" in report.reason
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_checkpoint", stdout=out)
    assert "not signed by a valid key" in out.getvalue()


def test_es_setup_refuses_a_checkpoint_credential_that_could_rewrite(settings):
    settings.ES_AUDIT_USERNAME, settings.ES_AUDIT_PASSWORD = settings.ES_ADMIN_USERNAME, settings.ES_ADMIN_PASSWORD
    problems = audit_store_check(es_admin=admin_client())
    assert any("may not create documents" in p for p in problems)  # admin may not write there at all
    settings.ES_AUDIT_USERNAME = ""
    assert any("ES_AUDIT_USERNAME is not set" in p for p in audit_store_check(es_admin=admin_client()))


def test_every_nth_event_queues_a_checkpoint_of_its_chain(tenant, settings, monkeypatch,
                                                          django_capture_on_commit_callbacks):
    from tenants import tasks
    from tenants.services import audit

    sent = []  # the broker is not under test (tests/consolidation/test_worker.py runs a real one)
    monkeypatch.setattr(audit.current_app, "send_task", lambda name, kwargs: sent.append((name, kwargs)))
    settings.ENGRAM_AUDIT_CHECKPOINT_EVENTS = 3
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(7):
            audit_record(actor="alice", action=f"a{n}", tenant=tenant)
    assert sent == [("tenants.tasks.audit_checkpoint", {"chains": ["acme"]})] * 2  # at events 3 and 6
    assert tasks.audit_checkpoint(**sent[0][1]) == {"acme": "written"}
    assert audit_checkpoints_latest(chains=["acme"])["acme"][0]["seq"] == 7
    # And every ENGRAM_AUDIT_CHECKPOINT_SECONDS, whatever moved, from celery beat.
    entry = settings.CELERY_BEAT_SCHEDULE["tenants.audit-checkpoint"]
    assert entry["task"] == "tenants.tasks.audit_checkpoint"
    assert entry["schedule"] == settings.ENGRAM_AUDIT_CHECKPOINT_SECONDS
