import uuid
from collections import Counter

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from engram_core.errors import EngramError
from engram_core.es.client import admin_client
from memory_app.evaluation import scratch_rows
from engram_core.es.schema import drop_indices, ensure_indices
from memory_app.isolation_probes import recall_drift_probes, service_probes
from tenants.isolation import DEFAULT_TENANTS, TenantSpec, run_isolation_probes


class Command(BaseCommand):
    help = ("Prove end-user isolation on the connected cluster: seed tenants and end-users in throwaway "
            "indices, probe every cross-user read path with each end-user's own key, report "
            "'probes: N, leaks: 0'. Exits non-zero on any leak or failed probe. Leaves nothing behind.")

    def add_arguments(self, parser):
        parser.add_argument("--tenants", type=int, default=len(DEFAULT_TENANTS), help="number of tenants (>= 2)")
        parser.add_argument("--subjects", type=int, default=3, help="end-users per tenant (>= 2)")
        parser.add_argument("--dedicated", type=int, default=1,
                            help="how many of the tenants use dedicated indices (the rest share)")
        parser.add_argument("--show", type=int, default=20, help="findings to print at most")

    def handle(self, *args, tenants: int, subjects: int, dedicated: int, show: int, **options):
        if tenants < 2 or subjects < 2:
            raise CommandError("isolation needs at least 2 tenants with at least 2 end-users each")
        if not 0 <= dedicated < tenants:
            raise CommandError("--dedicated must leave at least one shared tenant")
        spec = [TenantSpec(slug=f"tenant{t}", subjects=tuple(f"user{t}-{s}" for s in range(subjects)),
                           isolation="dedicated" if t >= tenants - dedicated else "shared")
                for t in range(tenants)]
        prefix = f"{settings.ES_INDEX_PREFIX}-isolation-{uuid.uuid4().hex[:8]}"
        es = admin_client()
        # A throwaway prefix: the probe writes and deletes documents, which must never happen
        # in the indices serving real memory. override_settings also resets cached keys.
        with override_settings(ES_INDEX_PREFIX=prefix):
            ensure_indices(es=es)
            try:
                # The probe's tenants, end-users and audit rows are deleted afterwards: nothing
                # remains, and no long transaction locks the live database meanwhile.
                with scratch_rows():
                    report = run_isolation_probes(tenants_spec=spec, extra_probes=[service_probes, recall_drift_probes])
            except EngramError as exc:
                raise CommandError(f"{exc.code}: {exc.message}") from exc
            finally:
                drop_indices(es=es, prefix=prefix)
        for finding in (report.leaks + report.failures)[:show]:
            self.stderr.write(str(finding))
        for finding in report.residual[:show]:
            self.stdout.write(f"residual (shared mode): {finding}")
        self.stdout.write(f"by probe family: {report.breakdown()}")
        for label, findings in (("leaks", report.leaks), ("residual", report.residual)):
            if findings:
                counts = Counter(f.probe for f in findings)
                self.stdout.write(f"{label} by probe: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        self.stdout.write(report.summary())
        if not report.ok:
            raise CommandError(f"isolation probe failed: {len(report.leaks)} leak(s), "
                               f"{len(report.failures)} failed probe(s)")
