"""Subject keys and the writer key against the real cluster: minting, rotation, revocation, maintenance."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from elasticsearch import AuthenticationException, AuthorizationException

from memory_app.errors import NotFound
from memory_app.es.schema import all_aliases, alias_name
from tenants.models import AuditEvent, SubjectKey, WriterKey
from tenants.selectors import subject_get
from tenants.tasks import maintain_keys
from tenants.services import (
    clear_caches,
    keys_maintain,
    subject_es_client,
    subject_get_or_create,
    subject_key_revoke,
    subject_key_rotate,
    subject_keys_revoke_all,
    writer_es_client,
)


def _own_doc(subject, es_writer, memory_type="semantic", **extra) -> str:
    response = es_writer.index(index=alias_name(memory_type), refresh="wait_for", document={
        "tenant_id": subject.tenant.slug, "user_id": str(subject.user_id), "memory_type": memory_type,
        "text": "likes green tea", **extra})
    return response["_id"]


def _ids(es, memory_type="semantic") -> set[str]:
    return {h["_id"] for h in es.search(index=alias_name(memory_type), query={"match_all": {}})["hits"]["hits"]}


def test_subject_get_answers_missing_and_other_tenant_alike(tenant, other_tenant, es_prefix):
    subject_get_or_create(tenant=other_tenant, external_id="mallory")

    with pytest.raises(NotFound) as missing:
        subject_get(tenant=tenant, external_id="nobody")
    with pytest.raises(NotFound) as elsewhere:
        subject_get(tenant=tenant, external_id="mallory")

    assert (missing.value.code, missing.value.status) == (elsewhere.value.code, elsewhere.value.status) == (
        "not_found", 404)
    assert missing.value.message == elsewhere.value.message


def test_new_subject_gets_a_least_privileged_dls_key(tenant, es_prefix, es_admin, settings):
    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    assert subject_get_or_create(tenant=tenant, external_id="alice") == subject  # no second subject, no second key

    key = SubjectKey.objects.get(subject=subject)
    info = es_admin.security.get_api_key(id=key.es_key_id)["api_keys"][0]
    role = info["role_descriptors"]["engram_subject_read"]
    assert info["metadata"] == {"engram": True, "kind": "subject", "tenant": "acme", "user_id": str(subject.user_id),
                                "subject_id": subject.pk, "index_prefix": es_prefix}
    assert role["cluster"] == []
    assert role["indices"][0]["names"] == all_aliases()
    assert role["indices"][0]["privileges"] == ["read"]
    assert '"tenant_id":"acme"' in role["indices"][0]["query"].replace(" ", "")
    ttl = timedelta(milliseconds=info["expiration"] - info["creation"])
    assert ttl == timedelta(days=settings.ENGRAM_SUBJECT_KEY_TTL_DAYS)
    assert abs(key.expires_at - (timezone.now() + ttl)) < timedelta(minutes=1)
    assert "alice" not in key.secret_encrypted and len(key.secret_encrypted) > 80  # stored as a Fernet token
    assert list(AuditEvent.objects.filter(subject=subject).values_list("action", flat=True)) == [
        "subject_key.minted", "subject.created"]


def test_writer_key_can_write_the_memory_aliases_and_nothing_else(es_prefix, es_admin, tenant):
    writer = writer_es_client()
    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    doc_id = _own_doc(subject, writer)
    assert writer.get(index=alias_name("semantic"), id=doc_id)["found"]

    key = WriterKey.objects.get(index_prefix=es_prefix)
    role = es_admin.security.get_api_key(id=key.es_key_id)["api_keys"][0]["role_descriptors"]["engram_writer"]
    assert role["cluster"] == [] and role["indices"][0]["privileges"] == ["read", "write", "maintenance"]
    with pytest.raises(AuthorizationException):
        writer.indices.create(index=f"{es_prefix}-rogue")
    with pytest.raises(AuthorizationException):
        writer.index(index=f"{es_prefix}-rogue", document={"tenant_id": "acme"})
    with pytest.raises(AuthorizationException):
        writer.indices.delete(index=alias_name("semantic"))
    with pytest.raises(AuthorizationException):
        writer.cluster.health()
    assert writer_es_client().search(index=alias_name("semantic"))["hits"]["total"]["value"] == 1  # cached, same key
    assert WriterKey.objects.count() == 1


def test_rotated_key_works_during_its_grace_period_and_is_refused_after(tenant, es_prefix):
    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    doc_id = _own_doc(subject, writer_es_client())
    old_client = subject_es_client(subject=subject)
    old_key = SubjectKey.objects.get(subject=subject)

    new_key = subject_key_rotate(subject=subject, actor="test", grace=timedelta(seconds=2))

    old_key.refresh_from_db()
    assert old_key.rotated_at and old_key.superseded_by == new_key and old_key.revoked_at is None
    assert _ids(subject_es_client(subject=subject)) == {doc_id}  # the new key is in use at once
    served_in_grace = 0
    while timezone.now() < old_key.grace_until - timedelta(milliseconds=300):
        assert _ids(old_client) == {doc_id}  # still accepted inside the grace period
        served_in_grace += 1
        time.sleep(0.2)
    assert served_in_grace >= 3
    deadline = time.monotonic() + 15
    while True:  # the cluster itself refuses it once the grace period ends
        try:
            old_client.search(index=alias_name("semantic"))
        except AuthenticationException:
            break
        assert time.monotonic() < deadline, "the rotated-out key was still accepted 15 s after its grace"
        time.sleep(0.2)
    assert timezone.now() >= old_key.grace_until

    result = keys_maintain()  # and the maintenance task invalidates it for good

    old_key.refresh_from_db()
    assert result.invalidated == 1 and old_key.revoked_at is not None
    assert _ids(subject_es_client(subject=subject)) == {doc_id}
    assert AuditEvent.objects.filter(action="subject_key.rotated", target_id=old_key.es_key_id,
                                     details__grace_seconds=2).exists()
    assert AuditEvent.objects.filter(action="subject_key.invalidated", target_id=old_key.es_key_id).exists()


def test_revoked_key_is_refused_at_once_and_a_fresh_one_is_minted(tenant, es_prefix):
    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    doc_id = _own_doc(subject, writer_es_client())
    old_client = subject_es_client(subject=subject)

    revoked = subject_key_revoke(subject=subject, actor="test")

    with pytest.raises(AuthenticationException):
        old_client.search(index=alias_name("semantic"))
    assert _ids(subject_es_client(subject=subject)) == {doc_id}
    assert SubjectKey.objects.filter(subject=subject).count() == 2
    assert SubjectKey.objects.get(pk=revoked.pk).state == "revoked"
    assert AuditEvent.objects.filter(action="subject_key.revoked", target_id=revoked.es_key_id).exists()


def test_revoke_all_invalidates_active_and_grace_keys(tenant, es_prefix):
    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    first = subject_es_client(subject=subject)
    subject_key_rotate(subject=subject, actor="test", grace=timedelta(minutes=5))
    second = subject_es_client(subject=subject)

    assert subject_keys_revoke_all(subject=subject, actor="erase") == 2

    for client in (first, second):
        with pytest.raises(AuthenticationException):
            client.search(index=alias_name("semantic"))
    assert not SubjectKey.objects.live().filter(subject=subject).exists()
    assert AuditEvent.objects.filter(action="subject_keys.revoked_all", actor="erase").count() == 1


def test_maintenance_rotates_keys_near_expiry(tenant, es_prefix, settings):
    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    fresh = subject_get_or_create(tenant=tenant, external_id="bob")
    expiring = SubjectKey.objects.get(subject=subject)
    SubjectKey.objects.filter(pk=expiring.pk).update(
        expires_at=timezone.now() + timedelta(days=settings.ENGRAM_KEY_RENEW_BEFORE_DAYS - 1))

    result = maintain_keys()  # the periodic task, run in-process

    expiring.refresh_from_db()
    assert result["rotated"] == 1
    assert expiring.rotated_at is not None and expiring.superseded_by is not None
    assert SubjectKey.objects.active().get(subject=fresh).rotated_at is None
    assert keys_maintain().rotated == 0  # idempotent


def test_a_key_minted_for_another_index_prefix_is_replaced(tenant, es_prefix, settings, es_admin):
    from memory_app.es.schema import drop_indices, ensure_indices

    subject = subject_get_or_create(tenant=tenant, external_id="alice")
    first = SubjectKey.objects.get(subject=subject)
    settings.ES_INDEX_PREFIX = f"{es_prefix}-next"
    ensure_indices(es=es_admin)
    try:
        doc_id = _own_doc(subject, writer_es_client())
        assert _ids(subject_es_client(subject=subject)) == {doc_id}
    finally:
        drop_indices(es=es_admin, prefix=settings.ES_INDEX_PREFIX)
    first.refresh_from_db()
    assert first.rotated_at is not None
    assert SubjectKey.objects.active().get(subject=subject).index_prefix == settings.ES_INDEX_PREFIX


def test_writer_key_is_renewed_before_expiry_and_the_old_one_retired_after_grace(es_prefix, tenant, settings):
    old_client = writer_es_client()
    old = WriterKey.objects.get(index_prefix=es_prefix)
    WriterKey.objects.filter(pk=old.pk).update(
        expires_at=timezone.now() + timedelta(days=settings.ENGRAM_KEY_RENEW_BEFORE_DAYS - 1))
    clear_caches()  # as another process, or this one once its cache entry ages out, would

    writer_es_client().count(index=alias_name("semantic"))

    old.refresh_from_db()
    assert old.rotated_at is not None and old.revoked_at is None
    assert WriterKey.objects.filter(index_prefix=es_prefix, rotated_at__isnull=True).count() == 1
    old_client.count(index=alias_name("semantic"))  # still fine during its grace
    WriterKey.objects.filter(pk=old.pk).update(grace_until=timezone.now())

    assert keys_maintain().writer_invalidated == 1
    with pytest.raises(AuthenticationException):
        old_client.count(index=alias_name("semantic"))
    writer_es_client().count(index=alias_name("semantic"))
    assert AuditEvent.objects.filter(action="writer_key.invalidated", target_id=old.es_key_id).exists()
