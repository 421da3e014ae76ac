"""End-user isolation on the real cluster: every cross-subject read path, with each subject's own key."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from elasticsearch import AuthorizationException

from engram_core.es.schema import all_aliases
from memory_app.isolation_probes import service_probes
from tenants.isolation import ProbeRecorder, TenantSpec, World, run_isolation_probes
from tenants.models import AuditEvent, Subject, SubjectKey
from tenants.selectors import memory_scope
from tenants.services.clients import subject_es_client, writer_es_client
from tenants.services.subjects import subject_get_or_create

SPEC = (
    TenantSpec("acme", ("alice", "bob", "carol")),
    TenantSpec("globex", ("dana", "erik", "fatima")),
    TenantSpec("initech", ("gus", "hana", "ivan", "jo"), isolation="dedicated"),
)


def test_no_subject_can_read_another_subjects_or_tenants_memory(es_prefix):
    # Each subject's own key directly against Elasticsearch, then again through Engram's services.
    report = run_isolation_probes(tenants_spec=SPEC, extra_probes=[service_probes])

    print(report.summary())
    assert report.leaks == []
    assert report.failures == []
    assert report.probes >= 500
    # Statistics: every statistics API refused for everyone; the figures inside plain searches
    # reveal other tenants only for shared tenants (the documented residual), never for initech.
    assert report.by_family["stats"] >= 10 * 10
    assert report.residual and all(not f.subject.startswith("initech") for f in report.residual)
    # The run cleans up after itself: every key it minted is invalidated, every document deleted.
    assert not SubjectKey.objects.filter(revoked_at__isnull=True).exists()
    assert writer_es_client().count(index=",".join(all_aliases()))["count"] == 0
    assert AuditEvent.objects.filter(action="subject_key.rotated", actor="isolation-probe").count() == 3
    assert AuditEvent.objects.filter(action="subject_key.revoked", actor="isolation-probe").count() == 3


def test_the_probe_reports_a_leak_when_reads_bypass_document_level_security(es_prefix):
    # Reading with the writer key (no DLS) as if it were a subject's: the probe must notice.
    def reads_without_dls(world: World, recorder: ProbeRecorder) -> None:
        who = world.subjects[0]
        with recorder.probe("search:without_dls", who) as probe:
            hits = writer_es_client().search(index=",".join(all_aliases()), size=1000)["hits"]["hits"]
            probe.ids([h["_id"] for h in hits], allowed={d.id for d in world.visible(who)})

    report = run_isolation_probes(tenants_spec=SPEC[:2], extra_probes=[reads_without_dls], lifecycle=False)

    assert not report.ok
    assert [leak.probe for leak in report.leaks] == ["search:without_dls"]
    assert "foreign document(s) returned" in report.leaks[0].detail
    assert report.failures == []


def test_isolation_probe_command_prints_probes_and_zero_leaks(es_admin, capsys):
    call_command("isolation_probe", "--tenants", "3", "--subjects", "2")

    printed = capsys.readouterr().out.strip().splitlines()
    out = printed[-1]
    probes = int(out.split(",")[0].removeprefix("probes: "))
    assert out.startswith(f"probes: {probes}, leaks: 0, failures: 0")
    # The one dedicated tenant (the last) shows no residual statistics; the shared ones do.
    residual = [line for line in printed if line.startswith("residual (shared")]
    assert residual and not any("tenant2-" in line for line in residual)
    assert probes >= 500
    # Nothing is left behind: the command rolls back its tenants and drops its indices.
    assert not Subject.objects.exists()
    assert es_admin.indices.get_alias(name="*-isolation-*", ignore_unavailable=True, allow_no_indices=True) == {}


def test_memory_scope_comes_from_the_subject_alone(es_prefix, tenant, other_tenant):
    alice = subject_get_or_create(tenant=tenant, external_id="alice")
    mallory = subject_get_or_create(tenant=other_tenant, external_id="mallory")
    tampered = {"text": "hello", **memory_scope(subject=mallory)}

    stamped = {**tampered, **memory_scope(subject=alice)}

    assert memory_scope(subject=alice) == {"tenant_id": "acme", "user_id": str(alice.user_id)}
    assert stamped == {"text": "hello", "tenant_id": "acme", "user_id": str(alice.user_id)}
    # Even a stale in-memory copy cannot move the subject: the scope follows the stored tenant.
    alice.tenant = other_tenant
    assert memory_scope(subject=Subject.objects.get(pk=alice.pk))["tenant_id"] == "acme"
    # And a subject key refuses the tampered body outright: subject keys cannot write at all.
    with pytest.raises(AuthorizationException):
        subject_es_client(subject=alice).index(index=all_aliases()[0], document=tampered)
