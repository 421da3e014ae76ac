"""Moving a tenant between shared and dedicated indices on the real cluster: copy, verify, switch,
remove the old copies; a failure half-way loses nothing."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from elasticsearch import AuthorizationException

from engram_core.errors import Conflict, ServiceUnavailable
from engram_core.es.schema import MemoryType, alias_name, all_aliases
from memory_app.selectors import subject_export
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_write
from memory_app.recall import memory_recall
from memory_app.usage import usage_flush
from tenants.models import AuditEvent, Subject, SubjectKey, Tenant
from tenants.selectors import index_prefix_for
from tenants.services.clients import subject_es_client
from tenants.services.isolation_move import MoveFailed, tenant_isolation_set
from memory_app.validation import Limits
from tenants.services.subjects import subject_get_or_create
from tenants.services import isolation_move
from tenants.services.keys import KeyLifetimes
from memory_app.services.context import ContextOptions


@pytest.fixture
def world(es_prefix):
    acme, globex = (Tenant.objects.create(slug=s, name=s.title()) for s in ("acme", "globex"))
    alice = subject_get_or_create(tenant=acme, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    bob = subject_get_or_create(tenant=acme, external_id="bob", lifetimes=KeyLifetimes.from_settings())
    dana = subject_get_or_create(tenant=globex, external_id="dana", lifetimes=KeyLifetimes.from_settings())
    for n in range(3):
        episode_write(subject=alice, text=f"alice walked the dog {n}")
    fact_write(subject=alice, text="Alice likes green tea.")
    playbook_write(subject=bob, trigger="wifi drops", steps="restart the router")
    catalog_entry_write(tenant=acme, title="Router", text="Acme routers restart in 30 s.")
    episode_write(subject=dana, text="dana walked the dog")
    yield acme, alice, bob, dana
    usage_flush()


def _count(es_admin, prefix: str, tenant: str) -> int:
    index = ",".join(all_aliases(prefix=prefix))
    try:
        es_admin.indices.refresh(index=index)
    except Exception:  # noqa: BLE001 - indices absent: nothing there
        return 0
    return es_admin.count(index=index, query={"term": {"tenant_id": tenant}}, ignore_unavailable=True)["count"]


def _exported_ids(subject) -> set[str]:
    return {m["id"] for items in subject_export(subject=subject)["memories"].values() for m in items}


def test_a_tenant_moves_to_dedicated_indices_and_back(world, es_admin, es_prefix):
    acme, alice, bob, dana = world
    alice_ids, bob_ids, dana_ids = _exported_ids(alice), _exported_ids(bob), _exported_ids(dana)
    own = f"{es_prefix}-t-acme"

    result = tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test")

    assert result.copied == {"episodic": 3, "semantic": 1, "procedural": 1, "catalog": 1}
    assert result.removed == 6
    acme.refresh_from_db()
    alice.tenant.refresh_from_db()
    bob.tenant.refresh_from_db()
    assert (acme.isolation, acme.isolation_moving_to) == ("dedicated", "")
    assert index_prefix_for(tenant=acme) == own
    assert _count(es_admin, own, "acme") == 6 and _count(es_admin, es_prefix, "acme") == 0
    # The copies kept their vectors (a copy from _source alone would drop them: Elasticsearch 9
    # leaves vectors out of a returned _source), so the dense leg still finds them.
    with_vectors = {"bool": {"filter": [{"term": {"tenant_id": "acme"}}, {"exists": {"field": "embedding"}}]}}
    assert es_admin.count(index=",".join(all_aliases(prefix=own)), query=with_vectors)["count"] == 6
    assert _count(es_admin, es_prefix, "globex") == 1  # the other tenant is untouched
    assert _exported_ids(alice) == alice_ids and _exported_ids(bob) == bob_ids and _exported_ids(dana) == dana_ids
    assert [h["memory_type"] for h in memory_recall(subject=bob, query="wifi drops", k=1)] == ["procedural"]
    # New writes land in the tenant's own indices; its keys name only those.
    new = fact_write(subject=alice, text="Alice moved to Lyon.")
    assert es_admin.get(index=alias_name(MemoryType.SEMANTIC, prefix=own), id=new["id"])["found"]
    key = SubjectKey.objects.active().get(subject=alice)
    role = es_admin.security.get_api_key(id=key.es_key_id)["api_keys"][0]["role_descriptors"]["engram_subject_read"]
    assert role["indices"][0]["names"] == all_aliases(prefix=own)
    with pytest.raises(AuthorizationException):
        subject_es_client(subject=alice).search(index=alias_name(MemoryType.EPISODIC))
    assert AuditEvent.objects.filter(action="tenant.isolation_changed", tenant=acme).count() == 1

    back = tenant_isolation_set(tenant=acme, isolation="shared", actor="test")

    assert back.copied["semantic"] == 2 and back.removed == 7
    acme.refresh_from_db()
    alice.tenant.refresh_from_db()
    assert acme.isolation == "shared"
    assert _count(es_admin, es_prefix, "acme") == 7
    assert es_admin.count(index=",".join(all_aliases(prefix=es_prefix)), query=with_vectors)["count"] == 7
    assert es_admin.indices.get_alias(name=f"{own}-*", allow_no_indices=True) == {}
    assert _exported_ids(alice) == alice_ids | {new["id"]}


def test_a_move_failing_half_way_loses_nothing(world, es_admin, es_prefix, monkeypatch):
    acme, alice, bob, _dana = world
    alice_ids = _exported_ids(alice)
    real = isolation_move._index_batch
    calls = []

    def flaky(es, actions):
        calls.append(len(actions))
        if len(calls) == 2:
            raise ConnectionError("cluster went away mid-copy")
        return real(es, actions)

    monkeypatch.setattr(isolation_move, "_index_batch", flaky)
    with pytest.raises(ConnectionError):
        tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test", batch_size=2)

    acme.refresh_from_db()
    assert (acme.isolation, acme.isolation_moving_to) == ("shared", "")
    assert _count(es_admin, es_prefix, "acme") == 6
    assert es_admin.indices.get_alias(name=f"{es_prefix}-t-acme-*", allow_no_indices=True) == {}  # partial copy gone
    assert _exported_ids(alice) == alice_ids
    episode_write(subject=alice, text="writes work again")  # no longer waiting

    monkeypatch.setattr(isolation_move, "_index_batch", real)
    result = tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test", batch_size=2)
    assert sum(result.copied.values()) == 7 and _count(es_admin, es_prefix, "acme") == 0


def test_a_copy_that_does_not_verify_is_not_switched(world, es_admin, es_prefix, monkeypatch):
    acme, *_ = world
    real = isolation_move._index_batch

    def lossy(es, actions):  # silently drops the last document of every batch
        return real(es, actions[:-1]) if len(actions) > 1 else 0

    monkeypatch.setattr(isolation_move, "_index_batch", lossy)

    with pytest.raises(MoveFailed) as failed:
        tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test")

    assert failed.value.code == "isolation_move_failed"
    acme.refresh_from_db()
    assert acme.isolation == "shared" and _count(es_admin, es_prefix, "acme") == 6


def test_writes_wait_while_the_tenant_moves(world):
    acme, alice, *_ = world
    Tenant.objects.filter(pk=acme.pk).update(isolation_moving_to="dedicated")

    with pytest.raises(ServiceUnavailable) as waiting:
        episode_write(subject=alice, text="during the move")

    assert (waiting.value.code, waiting.value.status) == ("tenant_moving", 503)
    assert memory_recall(subject=alice, query="dog", k=3)  # reads go on


def test_the_command_moves_and_a_second_run_is_a_no_op(world, es_admin, es_prefix, capsys):
    call_command("tenant_isolation", "acme", "dedicated")
    call_command("tenant_isolation", "acme", "dedicated")

    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == ("acme: shared -> dedicated; copied: episodic 3, semantic 1, procedural 1, catalog 1; "
                        "old copies removed: 6")
    assert lines[1] == "acme: dedicated -> dedicated; copied: nothing to copy; old copies removed: 0"


def test_a_second_move_is_refused_while_one_runs(world, es_admin, es_prefix):
    acme, *_ = world
    Tenant.objects.filter(pk=acme.pk).update(isolation_moving_to="dedicated")  # a move is running

    with pytest.raises(Conflict) as refused:
        tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test")
    assert refused.value.code == "isolation_move_running"
    with pytest.raises(Conflict):
        tenant_isolation_set(tenant=acme, isolation="shared", actor="test")  # nor its clean-up of the copy
    assert _count(es_admin, es_prefix, "acme") == 6

    # A move whose process died leaves the flag: taking it over is explicit.
    result = tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test", take_over=True)
    assert result.target == "dedicated" and _count(es_admin, es_prefix, "acme") == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lands", ["after its type was copied and counted", "after the move"])
def test_a_write_resolved_before_the_move_and_landing_during_or_after_it_is_not_lost(world, es_admin, es_prefix,
                                                                                      monkeypatch, lands):
    """A writer that checked where the tenant's memories were before the move began, and whose
    write reached Elasticsearch only once the move had copied (and counted) its memory type, or
    had finished: the write must end up in the new indices, and no copy in the old ones."""
    import threading

    from elasticsearch import Elasticsearch

    from memory_app.commands import write_command
    from memory_app.outbox import outbox_replay, write_submit

    acme, alice, *_ = world
    late = "late-fact-0001"
    ready, moved, landed = threading.Event(), threading.Event(), threading.Event()
    real, real_copy = Elasticsearch.index, isolation_move._copy

    def held(self, *, index, id=None, **kwargs):
        if id != late:
            return real(self, index=index, id=id, **kwargs)
        ready.set()
        assert moved.wait(60)
        try:
            return real(self, index=index, id=id, **kwargs)
        finally:
            landed.set()

    def copy_then_let_it_land(es, *, memory_type, **kwargs):
        copied = real_copy(es, memory_type=memory_type, **kwargs)
        if memory_type is MemoryType.SEMANTIC:
            moved.set()
            assert landed.wait(30)
        return copied

    monkeypatch.setattr(Elasticsearch, "index", held)
    if lands != "after the move":
        monkeypatch.setattr(isolation_move, "_copy", copy_then_let_it_land)
    submitted = {}

    def write():
        from django.db import connection

        try:
            submitted["late"] = write_submit(tenant=acme, write=write_command(
                tenant=acme, external_id="alice", operation="fact", payload={"text": "Alice keeps bees."},
                limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
                lifetimes=KeyLifetimes.from_settings(), memory_id=late))
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    assert ready.wait(30)
    tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test")
    moved.set()
    writer.join(60)
    assert "late" in submitted  # acknowledged: applied, or accepted into the outbox
    outbox_replay()

    alice = Subject.objects.select_related("tenant").get(pk=alice.pk)
    assert late in _exported_ids(alice)
    shared = ",".join(all_aliases(prefix=es_prefix))
    es_admin.indices.refresh(index=shared)
    assert es_admin.count(index=shared, query={"ids": {"values": [late]}})["count"] == 0


@pytest.mark.django_db(transaction=True)
def test_writes_during_a_move_are_never_lost(world, es_admin, es_prefix, monkeypatch):
    """Turns written without pause while the tenant moves: every one acknowledged (applied, or
    accepted into the outbox and replayed) is in the tenant's new indices afterwards."""
    import threading
    import time

    from memory_app.commands import write_command
    from memory_app.outbox import outbox_replay, write_submit

    acme, alice, *_ = world
    real = isolation_move._index_batch
    monkeypatch.setattr(isolation_move, "_index_batch", lambda es, actions: (time.sleep(0.2), real(es, actions))[1])
    stop, acknowledged, failures = threading.Event(), [], []

    def write():
        from django.db import connection

        n = 0
        try:
            while not stop.is_set():
                n += 1
                try:
                    done = write_submit(tenant=acme, write=write_command(
                        tenant=acme, external_id="alice", operation="episode",
                        payload={"text": f"turn {n} during the move"}, limits=Limits.from_settings(),
                        context_options=ContextOptions.from_settings(), lifetimes=KeyLifetimes.from_settings()),
                        defer_refresh=True)
                except Exception as exc:  # noqa: BLE001 - counted: an unacknowledged write is not a loss
                    failures.append(repr(exc))
                else:
                    acknowledged.append(done.memory_id)
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.3)
    tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test", batch_size=2)
    time.sleep(0.3)
    stop.set()
    writer.join(60)
    outbox_replay()

    alice = Subject.objects.select_related("tenant").get(pk=alice.pk)
    assert len(acknowledged) > 5 and failures == []
    assert set(acknowledged) <= _exported_ids(alice)
    assert _count(es_admin, es_prefix, "acme") == 0  # nothing left behind in the shared indices


def test_tenant_slugs_that_differ_only_in_case_are_refused(db):
    """Review finding: "acme" and "ACME" were two tenants with one set of dedicated indices."""
    from django.core.exceptions import ValidationError
    from django.db import IntegrityError, transaction

    Tenant.objects.create(slug="initech", name="Initech")
    with pytest.raises(IntegrityError), transaction.atomic():
        Tenant.objects.create(slug="INITECH", name="Initech again")
    with pytest.raises(ValidationError) as err:
        Tenant(slug="Initech", name="Initech again").full_clean()
    assert "another case" in str(err.value)


def test_a_move_never_drops_another_tenants_documents_from_indices_they_share(world, es_admin, monkeypatch):
    """Tenants created before slugs were unique whatever their case share one dedicated prefix: moving
    one of them out removes its own documents there, not the indices with the other's in them."""
    acme, alice, bob, dana = world
    globex = dana.tenant
    real = isolation_move.index_prefix_for

    def one_prefix(*, tenant, isolation=None):
        if (isolation or tenant.isolation) == Tenant.Isolation.DEDICATED:
            return real(tenant=acme, isolation=Tenant.Isolation.DEDICATED)
        return real(tenant=tenant, isolation=isolation)

    monkeypatch.setattr(isolation_move, "index_prefix_for", one_prefix)
    dedicated = one_prefix(tenant=acme, isolation=Tenant.Isolation.DEDICATED)
    tenant_isolation_set(tenant=globex, isolation="dedicated", actor="test")
    tenant_isolation_set(tenant=acme, isolation="dedicated", actor="test")
    tenant_isolation_set(tenant=acme, isolation="shared", actor="test")
    index = alias_name(MemoryType.EPISODIC, prefix=dedicated)
    es_admin.indices.refresh(index=index)
    assert es_admin.count(index=index, query={"term": {"tenant_id": "globex"}})["count"] == 1
    assert es_admin.count(index=index, query={"term": {"tenant_id": "acme"}})["count"] == 0
