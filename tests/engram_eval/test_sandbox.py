"""The scratch world of a measurement run: errors surface, no transaction is held, nothing is
deleted from the database, and what stays behind can serve nothing."""

import json

import pytest
from django.db import connection
from elasticsearch import AuthenticationException

from engram_core.es.schema import all_aliases, shared_prefix
from engram_eval.locomo import evaluate_locomo
from engram_eval.sandbox import sandbox
from tenants.services.isolation_move import dedicated_indices_ensure
from tenants.models import AuditEvent, Subject, SubjectKey, Tenant, WriterKey
from tenants.selectors import audit_chain_verify, index_prefix_for
from memory_app.services.episodes import episode_write
from tenants.services.audit import audit_record
from tenants.services.clients import subject_es_client, writer_es_client
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes


def test_the_sandbox_surfaces_errors_and_drops_its_indices(es_admin, db, invalidate_minted_keys):
    with pytest.raises(RuntimeError, match="boom"), sandbox() as box:
        assert shared_prefix() == box.prefix
        box.tenant(slug="sandboxed", name="Sandboxed")
        assert es_admin.indices.exists_alias(name=f"{box.prefix}-episodic")
        raise RuntimeError("boom")
    assert shared_prefix() != box.prefix
    assert not es_admin.indices.exists(index=f"{box.prefix}-*", allow_no_indices=False, ignore_unavailable=True)


@pytest.mark.django_db(transaction=True)
def test_the_sandbox_holds_no_transaction_deletes_no_row_and_leaves_nothing_usable(es_admin, invalidate_minted_keys):
    real = Tenant.objects.create(slug="real-tenant", name="Real")
    audit_record(actor="tests", action="tenant.created", tenant=real)

    with sandbox() as box:
        assert not connection.in_atomic_block
        tenant = box.tenant(slug="acme", name="Acme", dedicated=True)
        subject = subject_get_or_create(tenant=tenant, external_id="alice", actor="eval",
                                        lifetimes=KeyLifetimes.from_settings())
        episode_write(subject=subject, text="I adopted a grey kitten named Pebble.")
        key = SubjectKey.objects.get(subject=subject, revoked_at__isnull=True)
        assert key.index_prefix == index_prefix_for(tenant=tenant) == f"{box.prefix}-t-{tenant.slug}"
        assert WriterKey.objects.filter(index_prefix__startswith=box.prefix).exists()
        reader, writer = subject_es_client(subject=subject), writer_es_client(prefix=box.prefix)
        # A tenant made without the sandbox's help: its end-user's key names the run's indices too.
        stray = subject_get_or_create(tenant=Tenant.objects.create(slug="made-inside", name="Inside"),
                                      external_id="bob", actor="eval", lifetimes=KeyLifetimes.from_settings())

    # The rows stay, as the record that the run happened; nothing of it can serve memory.
    assert Subject.objects.filter(pk=subject.pk, tenant=tenant).exists()
    assert not SubjectKey.objects.filter(subject__in=[subject, stray], revoked_at__isnull=True).exists()
    assert not WriterKey.objects.filter(index_prefix__startswith=box.prefix, revoked_at__isnull=True).exists()
    for client in (reader, writer):
        with pytest.raises(AuthenticationException):
            client.search(index=",".join(all_aliases()))
    # Set back to shared, so es_setup does not create its dedicated indices again.
    assert Tenant.objects.get(pk=tenant.pk).isolation == "shared"
    assert index_prefix_for(tenant=tenant) not in dedicated_indices_ensure(es=es_admin)
    assert not es_admin.indices.exists(index=f"{box.prefix}-*", allow_no_indices=False, ignore_unavailable=True)
    assert Tenant.objects.filter(pk=real.pk).exists()
    assert AuditEvent.objects.filter(tenant=real, action="tenant.created").count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_eval_leaves_every_earlier_audit_event_and_every_chain_intact(tmp_path, es_admin, invalidate_minted_keys,
                                                                         checkpoint_store):
    real = Tenant.objects.create(slug="real-tenant", name="Real")
    audit_record(actor="tests", action="tenant.created", tenant=real)
    audit_record(actor="tests", action="settings.checked")  # the chain of events without a tenant

    def fields(event: AuditEvent) -> dict:
        return {**event.chain_fields(), "prev_hash": event.prev_hash, "hash": event.hash,
                "tenant_id": event.tenant_id, "subject_id": event.subject_id}

    before = {e.pk: fields(e) for e in AuditEvent.objects.all()}
    data = {"session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey kitten named Pebble."}],
            "qa": [{"question": "What is the name of Ann's kitten?", "evidence": ["D1:1"], "category": 1}]}
    path = tmp_path / "79.json"
    path.write_text(json.dumps(data))

    def meanwhile(_message: str) -> None:
        # The rest of the product keeps appending to the same chains while the eval runs.
        audit_record(actor="tests", action="settings.checked")
        audit_record(actor="tests", action="tenant.viewed", tenant=real)

    evaluate_locomo(paths=[path], log=meanwhile, dedicated=True)

    after = {e.pk: fields(e) for e in AuditEvent.objects.all()}
    assert {pk: after.get(pk) for pk in before} == before
    run_events = AuditEvent.objects.exclude(pk__in=before).exclude(actor="tests")
    assert run_events.filter(chain="").exists() and run_events.exclude(chain="").exists()  # its own stay too
    for chain in set(AuditEvent.objects.values_list("chain", flat=True)):
        report = audit_chain_verify(chain=chain)
        assert report.ok, (chain, report)
