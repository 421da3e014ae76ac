"""End-user isolation on the real cluster: every cross-subject read path, with each subject's own key."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from engram_core.errors import ValidationFailed
from engram_core.es.schema import all_aliases
from engram_eval.isolation.probe import run_isolation_probes
from engram_eval.isolation.report import ProbeRecorder
from engram_eval.isolation.service_probes import service_probes
from engram_eval.isolation.world import TenantSpec, World
from tenants.models import AuditEvent, Subject, SubjectKey, Tenant, WriterKey
from tenants.selectors import audit_chain_verify
from tenants.services.clients import writer_es_client

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
    # The run cleans up after itself: every key it minted is invalidated, every document deleted,
    # and its dedicated tenant is back in the shared indices (its own are gone).
    assert not SubjectKey.objects.filter(revoked_at__isnull=True).exists()
    assert writer_es_client().count(index=",".join(all_aliases()))["count"] == 0
    assert not Tenant.objects.filter(isolation="dedicated").exists()
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


def test_a_world_that_fails_while_seeding_is_torn_down_as_a_finished_one_is(es_prefix):
    spec = (TenantSpec("acme", ("alice", "bob")),
            TenantSpec("initech", ("gus", "not/addressable"), isolation="dedicated"))

    with pytest.raises(ValidationFailed):
        run_isolation_probes(tenants_spec=spec)

    assert Tenant.objects.count() == 2
    assert not SubjectKey.objects.filter(revoked_at__isnull=True).exists()
    assert not Tenant.objects.filter(isolation="dedicated").exists()
    assert writer_es_client().count(index=",".join(all_aliases()))["count"] == 0


def test_isolation_probe_command_prints_probes_and_zero_leaks(es_admin, capsys, checkpoint_store):
    before = set(AuditEvent.objects.values_list("pk", "hash"))

    call_command("isolation_probe", "--tenants", "3", "--subjects", "2")

    printed = capsys.readouterr().out.strip().splitlines()
    out = printed[-1]
    probes = int(out.split(",")[0].removeprefix("probes: "))
    assert out.startswith(f"probes: {probes}, leaks: 0, failures: 0")
    # The one dedicated tenant (the last) shows no residual statistics; the shared ones do.
    residual = [line for line in printed if line.startswith("residual (shared")]
    assert residual and not any("tenant2-" in line for line in residual)
    assert probes >= 500
    # Nothing usable is left behind: no index, no valid key, no dedicated tenant to set up again.
    # The tenants and end-users stay, with their audit events, as the record of the run.
    assert es_admin.indices.get_alias(name="*-isolation-*", ignore_unavailable=True, allow_no_indices=True) == {}
    assert not SubjectKey.objects.filter(revoked_at__isnull=True).exists()
    assert not WriterKey.objects.filter(index_prefix__contains="-isolation-", revoked_at__isnull=True).exists()
    assert not Tenant.objects.filter(isolation="dedicated").exists()
    assert Subject.objects.count() == 6
    assert before <= set(AuditEvent.objects.values_list("pk", "hash"))
    assert all(audit_chain_verify(chain=c).ok for c in set(AuditEvent.objects.values_list("chain", flat=True)))
