"""Subject keys and the writer key against the real cluster: minting, rotation, revocation, maintenance."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from elasticsearch import AuthenticationException, AuthorizationException, Elasticsearch

from engram_core.errors import NotFound
from engram_core.es import client as es_client_module
from engram_core.es.client import keys_client
from engram_core.es.schema import all_aliases, alias_name
from tenants.es_keys import ROLE_VERSION, SUBJECT_ACTIONS, WRITER_ACTIONS
from tenants.models import AuditEvent, SubjectKey, WriterKey
from tenants.selectors import subject_get
from tenants.services.clients import clear_caches, subject_es_client, writer_es_client
from tenants.services.keys import (
    KeyLifetimes,
    keys_maintain,
    keys_upgrade,
    subject_key_revoke,
    subject_key_rotate,
    subject_keys_revoke_all,
)
from tenants.services.subjects import subject_get_or_create
from tenants.tasks import maintain_keys
from tenants.services import key_cache


def _lifetimes() -> KeyLifetimes:
    return KeyLifetimes.from_settings()  # as the task, the admin and the client factory read them


def _own_doc(subject, es_writer, memory_type="semantic", **extra) -> str:
    response = es_writer.index(index=alias_name(memory_type), refresh="wait_for", document={
        "tenant_id": subject.tenant.slug, "user_id": str(subject.user_id), "memory_type": memory_type,
        "text": "likes green tea", **extra})
    return response["_id"]


def _ids(es, memory_type="semantic") -> set[str]:
    return {h["_id"] for h in es.search(index=alias_name(memory_type), query={"match_all": {}})["hits"]["hits"]}


def test_subject_get_answers_missing_and_other_tenant_alike(tenant, other_tenant, es_prefix):
    subject_get_or_create(tenant=other_tenant, external_id="mallory", lifetimes=KeyLifetimes.from_settings())

    with pytest.raises(NotFound) as missing:
        subject_get(tenant=tenant, external_id="nobody")
    with pytest.raises(NotFound) as elsewhere:
        subject_get(tenant=tenant, external_id="mallory")

    assert (missing.value.code, missing.value.status) == (elsewhere.value.code, elsewhere.value.status) == (
        "not_found", 404)
    assert missing.value.message == elsewhere.value.message


def test_new_subject_gets_a_least_privileged_dls_key(tenant, es_prefix, es_admin, settings):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    assert subject_get_or_create(tenant=tenant, external_id="alice",
                                 lifetimes=KeyLifetimes.from_settings()) == subject  # no second subject, no second key

    key = SubjectKey.objects.get(subject=subject)
    info = es_admin.security.get_api_key(id=key.es_key_id)["api_keys"][0]
    role = info["role_descriptors"]["engram_subject_read"]
    assert info["metadata"] == {"engram": True, "kind": "subject", "tenant": "acme", "user_id": str(subject.user_id),
                                "subject_id": subject.pk, "index_prefix": es_prefix, "role_version": ROLE_VERSION}
    assert role["cluster"] == []
    assert role["indices"][0]["names"] == all_aliases()
    assert role["indices"][0]["privileges"] == list(SUBJECT_ACTIONS)  # not the `read` group
    assert '"tenant_id":"acme"' in role["indices"][0]["query"].replace(" ", "")
    ttl = timedelta(milliseconds=info["expiration"] - info["creation"])
    assert ttl == timedelta(days=settings.ENGRAM_SUBJECT_KEY_TTL_DAYS)
    assert abs(key.expires_at - (timezone.now() + ttl)) < timedelta(minutes=1)
    assert "alice" not in key.secret_encrypted and len(key.secret_encrypted) > 80  # stored as a Fernet token
    assert list(AuditEvent.objects.filter(subject=subject).values_list("action", flat=True)) == [
        "subject_key.minted", "subject.created"]


def test_a_new_key_lives_as_long_as_the_lifetimes_given_say(tenant, es_prefix, es_admin):
    lifetimes = dataclasses.replace(KeyLifetimes.from_settings(), subject_ttl=timedelta(days=2))
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=lifetimes)
    info = es_admin.security.get_api_key(id=SubjectKey.objects.get(subject=subject).es_key_id)["api_keys"][0]
    assert timedelta(milliseconds=info["expiration"] - info["creation"]) == timedelta(days=2)


def test_writer_key_can_write_the_memory_aliases_and_nothing_else(es_prefix, es_admin, tenant):
    writer = writer_es_client()
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    doc_id = _own_doc(subject, writer)
    assert writer.get(index=alias_name("semantic"), id=doc_id)["found"]

    key = WriterKey.objects.get(index_prefix=es_prefix)
    role = es_admin.security.get_api_key(id=key.es_key_id)["api_keys"][0]["role_descriptors"]["engram_writer"]
    assert role["cluster"] == [] and role["indices"][0]["privileges"] == list(WRITER_ACTIONS)
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


def test_a_cached_keys_client_is_made_once_and_again_for_a_new_base_client(tenant, es_prefix, settings, monkeypatch):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    doc_id = _own_doc(subject, writer_es_client())
    first = subject_es_client(subject=subject)
    assert subject_es_client(subject=subject) is first  # no new client object per request
    assert writer_es_client() is writer_es_client()

    # reset_clients() replaces the base client (closing the old one's connections): a cached key
    # then gets a client on the new one.
    replaced = Elasticsearch(settings.ES_URL, request_timeout=settings.ES_REQUEST_TIMEOUT)
    monkeypatch.setattr(es_client_module, "base_client", lambda: replaced)
    monkeypatch.setattr(key_cache, "base_client", lambda: replaced)
    try:
        second = subject_es_client(subject=subject)
        assert second is not first and second.transport is replaced.transport
        assert _ids(second) == {doc_id}
    finally:
        monkeypatch.undo()
        replaced.close()


def test_rotated_key_works_during_its_grace_period_and_is_refused_after(tenant, es_prefix):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    doc_id = _own_doc(subject, writer_es_client())
    old_client = subject_es_client(subject=subject)
    old_key = SubjectKey.objects.get(subject=subject)

    # A rotation (mint with refresh, then shorten the old key) can take seconds on a loaded machine.
    new_key = subject_key_rotate(subject=subject, actor="test", lifetimes=_lifetimes(), grace=timedelta(seconds=8))

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

    result = keys_maintain(lifetimes=_lifetimes())  # and the maintenance task invalidates it for good

    old_key.refresh_from_db()
    assert result.invalidated == 1 and old_key.revoked_at is not None
    assert _ids(subject_es_client(subject=subject)) == {doc_id}
    assert AuditEvent.objects.filter(action="subject_key.rotated", target_id=old_key.es_key_id,
                                     details__grace_seconds=8).exists()
    assert AuditEvent.objects.filter(action="subject_key.invalidated", target_id=old_key.es_key_id).exists()


def test_revoked_key_is_refused_at_once_and_a_fresh_one_is_minted(tenant, es_prefix):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
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
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    first = subject_es_client(subject=subject)
    subject_key_rotate(subject=subject, actor="test", lifetimes=_lifetimes(), grace=timedelta(minutes=5))
    second = subject_es_client(subject=subject)

    assert subject_keys_revoke_all(subject=subject, actor="erase") == 2

    for client in (first, second):
        with pytest.raises(AuthenticationException):
            client.search(index=alias_name("semantic"))
    assert not SubjectKey.objects.live().filter(subject=subject).exists()
    assert AuditEvent.objects.filter(action="subject_keys.revoked_all", actor="erase").count() == 1


def test_maintenance_rotates_keys_near_expiry(tenant, es_prefix, settings):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    fresh = subject_get_or_create(tenant=tenant, external_id="bob", lifetimes=KeyLifetimes.from_settings())
    expiring = SubjectKey.objects.get(subject=subject)
    SubjectKey.objects.filter(pk=expiring.pk).update(
        expires_at=timezone.now() + timedelta(days=settings.ENGRAM_KEY_RENEW_BEFORE_DAYS - 1))

    result = maintain_keys()  # the periodic task, run in-process

    expiring.refresh_from_db()
    assert result["rotated"] == 1
    assert expiring.rotated_at is not None and expiring.superseded_by is not None
    assert SubjectKey.objects.active().get(subject=fresh).rotated_at is None
    assert keys_maintain(lifetimes=_lifetimes()).rotated == 0  # idempotent


def test_a_key_minted_for_another_index_prefix_is_replaced(tenant, es_prefix, settings, es_admin):
    from engram_core.es.schema import drop_indices, ensure_indices

    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
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

    assert keys_maintain(lifetimes=_lifetimes()).writer_invalidated == 1
    with pytest.raises(AuthenticationException):
        old_client.count(index=alias_name("semantic"))
    writer_es_client().count(index=alias_name("semantic"))
    assert AuditEvent.objects.filter(action="writer_key.invalidated", target_id=old.es_key_id).exists()


def _refused(call) -> bool:
    try:
        call()
    except AuthorizationException:
        return True
    return False


@pytest.mark.parametrize("kind", ["subject", "writer"])
def test_keys_are_refused_every_statistics_api(kind, tenant, es_prefix):
    # Under DLS these answer index-wide figures (a word's document frequency across tenants):
    # neither key may call them. Engram's own paths (search, msearch, get, mget, scroll) work.
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    doc_id = _own_doc(subject, writer_es_client())
    es = subject_es_client(subject=subject) if kind == "subject" else writer_es_client()
    alias = alias_name("semantic")

    assert _refused(lambda: es.termvectors(index=alias, doc={"text": "tea"}, term_statistics=True))
    assert _refused(lambda: es.termvectors(index=alias, id=doc_id, term_statistics=True))
    assert _refused(lambda: es.mtermvectors(index=alias, ids=[doc_id], term_statistics=True))
    assert _refused(lambda: es.explain(index=alias, id=doc_id, query={"match": {"text": "tea"}}))
    assert _refused(lambda: es.field_caps(index=alias, fields="*"))
    assert _refused(lambda: es.terms_enum(index=alias, field="tenant_id"))
    assert _refused(lambda: es.indices.validate_query(index=alias, explain=True, query={"match": {"text": "tea"}}))
    assert _refused(lambda: es.open_point_in_time(index=alias, keep_alive="1m"))
    assert _refused(lambda: es.search_shards(index=alias))
    assert _refused(lambda: es.indices.stats(index=alias))
    assert _refused(lambda: es.indices.get_mapping(index=alias))

    assert _ids(es) == {doc_id}
    assert es.msearch(searches=[{"index": alias}, {"query": {"match_all": {}}}])["responses"][0]["hits"]["hits"]
    assert es.get(index=alias, id=doc_id)["found"]
    assert es.mget(index=alias, ids=[doc_id])["docs"][0]["found"]
    scrolled = es.search(index=alias, scroll="1m", size=1)
    assert es.scroll(scroll_id=scrolled["_scroll_id"], scroll="1m")["hits"]["hits"] == []
    es.clear_scroll(scroll_id=scrolled["_scroll_id"])


def test_keys_minted_under_an_older_grant_are_rotated(tenant, es_prefix, es_admin):
    # As if minted before ROLE_VERSION 2 (the `read` group): es_setup's upgrade rotates them.
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    writer_es_client()
    old = SubjectKey.objects.get(subject=subject)
    old_writer = WriterKey.objects.get(index_prefix=es_prefix)
    SubjectKey.objects.filter(pk=old.pk).update(role_version=1)
    WriterKey.objects.filter(pk=old_writer.pk).update(role_version=1)

    assert keys_upgrade(actor="test", lifetimes=_lifetimes()) == {"subject_keys": 1, "writer_prefixes": 1}
    assert keys_upgrade(actor="test", lifetimes=_lifetimes()) == {"subject_keys": 0, "writer_prefixes": 0}  # idempotent

    old.refresh_from_db()
    old_writer.refresh_from_db()
    new = SubjectKey.objects.active().get(subject=subject)
    assert old.rotated_at is not None and old.superseded_by == new and new.role_version == ROLE_VERSION
    assert old_writer.rotated_at is not None
    new_writer = WriterKey.objects.get(index_prefix=es_prefix, rotated_at__isnull=True)
    assert new_writer.role_version == ROLE_VERSION
    role = es_admin.security.get_api_key(id=new.es_key_id)["api_keys"][0]["role_descriptors"]["engram_subject_read"]
    assert role["indices"][0]["privileges"] == list(SUBJECT_ACTIONS)


def test_a_stale_grant_is_rotated_on_first_use_too(tenant, es_prefix):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    old = SubjectKey.objects.get(subject=subject)
    SubjectKey.objects.filter(pk=old.pk).update(role_version=1)
    clear_caches()

    subject_es_client(subject=subject)

    assert SubjectKey.objects.active().get(subject=subject).role_version == ROLE_VERSION
    old.refresh_from_db()
    assert old.rotated_at is not None


def test_keys_are_minted_and_retired_by_the_keys_credential_never_the_admin(tenant, es_prefix, es_admin, settings):
    """The request paths that touch keys (an end-user's first key, rotation, revocation, erase)
    work with the admin credential broken: only the keys credential is used, and it owns them."""
    assert settings.ES_KEYS_USERNAME and settings.ES_KEYS_USERNAME != settings.ES_ADMIN_USERNAME
    keys = keys_client()
    assert keys.security.authenticate()["roles"] == ["engram_keys"]
    # scripts/stack.py grants it the writer's actions (a key is limited by its owner) and nothing more.
    granted = keys.security.has_privileges(
        cluster=["manage_own_api_key", "manage_api_key", "manage_security", "monitor"],
        index=[{"names": [alias_name("semantic")],
                "privileges": [*WRITER_ACTIONS, "indices:admin/create", "indices:data/read/tv", "manage"]}])
    assert granted["cluster"] == {"manage_own_api_key": True, "manage_api_key": False, "manage_security": False,
                                  "monitor": False}
    assert {p for p, ok in granted["index"][alias_name("semantic")].items() if ok} == set(WRITER_ACTIONS)
    settings.ES_ADMIN_PASSWORD = "not-the-admin-password"
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    first = SubjectKey.objects.get(subject=subject)
    rotated = subject_key_rotate(subject=subject, actor="test", lifetimes=_lifetimes(), grace=timedelta(seconds=30))
    subject_key_revoke(subject=subject, actor="test")
    subject_es_client(subject=subject)
    assert subject_keys_revoke_all(subject=subject, actor="test") == 2  # the fresh key and the one in grace
    ids = set(SubjectKey.objects.filter(subject=subject).values_list("es_key_id", flat=True))
    assert len(ids) == 3 and {first.es_key_id, rotated.es_key_id} <= ids
    keys = [es_admin.security.get_api_key(id=key_id)["api_keys"][0] for key_id in ids]
    assert {k["username"] for k in keys} == {settings.ES_KEYS_USERNAME}
    assert all(k["invalidated"] for k in keys)


def test_keys_the_admin_credential_minted_before_are_retired_by_it(tenant, es_prefix, es_admin, settings):
    keys_user = settings.ES_KEYS_USERNAME
    settings.ES_KEYS_USERNAME = ""  # as before the keys credential existed: the admin mints
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    legacy = SubjectKey.objects.get(subject=subject)
    settings.ES_KEYS_USERNAME = keys_user
    clear_caches()

    new = subject_key_rotate(subject=subject, actor="test", lifetimes=_lifetimes(),
                             grace=timedelta(seconds=30))  # shortens the old key
    old = es_admin.security.get_api_key(id=legacy.es_key_id)["api_keys"][0]
    assert old["username"] == settings.ES_ADMIN_USERNAME
    assert old["expiration"] / 1000 < time.time() + 60
    assert subject_keys_revoke_all(subject=subject, actor="test") == 2
    for key_id in (legacy.es_key_id, new.es_key_id):
        assert es_admin.security.get_api_key(id=key_id)["api_keys"][0]["invalidated"]
