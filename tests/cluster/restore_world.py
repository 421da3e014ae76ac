"""The two halves of the snapshot-and-restore test that run inside Engram (``manage.py shell``,
with a deployment's environment): the isolation probe's world seeded on the cluster to back up,
then, on the cluster it was restored into, every probe of the isolation probe made against that
world with the keys the database holds. The world travels between them as a pickle."""

from __future__ import annotations

import json
import pickle
import sys

from engram_core.es.client import admin_client
from engram_core.es.prefixes import scratch_prefix
from engram_core.es.schema import drop_indices, ensure_indices
from engram_eval.isolation.cluster import lifecycle_probes, subject_probes
from engram_eval.isolation.report import ProbeRecorder
from engram_eval.isolation.service_probes import recall_drift_probes, service_probes
from engram_eval.isolation.statistics import statistics_probes
from engram_eval.isolation.world import DEFAULT_TENANTS, world_seed, world_teardown
from tenants.es_keys import invalidate_keys
from tenants.models import SubjectKey, WriterKey


def seed(*, prefix: str, out: str) -> None:
    """Seed the probe's tenants (one dedicated) under ``prefix`` and keep the world in ``out``;
    prints the indices to snapshot."""
    with scratch_prefix(prefix):
        ensure_indices(es=admin_client(), prefix=prefix)
        world = world_seed(tenants_spec=DEFAULT_TENANTS, docs_per_type=2)
    with open(out, "wb") as f:
        pickle.dump(world, f)
    print(json.dumps({"indices": world.concrete_indices, "documents": len(world.docs)}))


def lose(*, prefix: str) -> None:
    """The backed-up cluster is gone for Engram: every key it minted invalidated there and the
    world's indices dropped (the database, which a restore does not touch, keeps its rows)."""
    ids = [*SubjectKey.objects.values_list("es_key_id", flat=True), *WriterKey.objects.values_list("es_key_id", flat=True)]
    invalidate_keys(key_ids=ids)
    drop_indices(es=admin_client(), prefix=prefix)


def probe(*, world_file: str) -> None:
    """Every probe of the isolation probe against the restored world; prints the report and exits
    non-zero on a leak or a failed probe (an end-user not seeing their own restored memories is one)."""
    with open(world_file, "rb") as f:
        world = pickle.load(f)
    recorder = ProbeRecorder()
    with scratch_prefix(world.prefix):
        try:
            for who in world.subjects:
                subject_probes(world, recorder, who)
            statistics_probes(world, recorder)
            service_probes(world, recorder)
            recall_drift_probes(world, recorder)
            lifecycle_probes(world, recorder)
        finally:
            world_teardown(world)
            drop_indices(es=admin_client(), prefix=world.prefix)
    report = recorder.report
    for finding in (report.leaks + report.failures)[:20]:
        print(finding, file=sys.stderr)
    print(json.dumps({"summary": report.summary(), "probes": report.probes, "leaks": len(report.leaks),
                      "failures": len(report.failures)}))
    if not report.ok:
        sys.exit(1)
