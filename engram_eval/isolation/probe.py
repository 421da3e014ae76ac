"""The isolation probe: seed several tenants and end-users, then try to read across them.

A leak is anything of another end-user or tenant coming back (a document, id, term, count or a
figure revealing their data) or a forbidden request being allowed; a failure is a probe that
could not run or an end-user not seeing their own data (which would make "no leak" meaningless).
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.models import Tenant

from ..sandbox import sandbox
from .cluster import lifecycle_probes, subject_probes
from .report import ExtraProbe, ProbeRecorder, ProbeReport
from .service_probes import recall_drift_probes, service_probes
from .statistics import statistics_probes
from .world import ACTOR, DEFAULT_TENANTS, TenantSpec, world_seed, world_teardown


def run_isolation_probes(*, tenants_spec: Sequence[TenantSpec] = DEFAULT_TENANTS,
                         extra_probes: Sequence[ExtraProbe] = (), docs_per_type: int = 2,
                         lifecycle: bool = True) -> ProbeReport:
    """Seed ``tenants_spec`` in the shared indices (which must exist), probe every cross-subject
    path with each end-user's own key, then tear the world down (``world_teardown``).

    Holds no transaction of its own. Raises ServiceUnavailable when DLS is unavailable.
    """
    recorder = ProbeRecorder()
    world = world_seed(tenants_spec=tenants_spec, docs_per_type=docs_per_type)
    try:
        for who in world.subjects:
            subject_probes(world, recorder, who)
        statistics_probes(world, recorder)
        for extra in extra_probes:
            extra(world, recorder)
        if lifecycle:
            lifecycle_probes(world, recorder)
    finally:
        world_teardown(world)
    return recorder.report


def tenant_specs(*, tenants: int, subjects: int, dedicated: int) -> list[TenantSpec]:
    """``tenants`` tenants of ``subjects`` end-users each, the last ``dedicated`` in indices of their own."""
    return [TenantSpec(slug=f"tenant{t}", subjects=tuple(f"user{t}-{s}" for s in range(subjects)),
                       isolation=Tenant.Isolation.DEDICATED if t >= tenants - dedicated else Tenant.Isolation.SHARED)
            for t in range(tenants)]


def isolation_probe_run(*, tenants: int = len(DEFAULT_TENANTS), subjects: int = 3, dedicated: int = 1) -> ProbeReport:
    """The whole probe (``tenant_specs``), directly and through the memory services, in a sandbox of
    its own: shared and dedicated indices under a throwaway prefix, so the probe's writes and
    deletes never reach the indices serving real memory while isolation inside a shared index is
    still what it probes."""
    spec = tenant_specs(tenants=tenants, subjects=subjects, dedicated=dedicated)
    with sandbox(label="isolation", actor=ACTOR):
        return run_isolation_probes(tenants_spec=spec, extra_probes=[service_probes, recall_drift_probes])
