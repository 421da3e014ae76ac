from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from engram_core.errors import EngramError
from engram_eval.isolation.probe import isolation_probe_run


class Command(BaseCommand):
    help = ("Prove end-user isolation on the connected cluster: seed tenants and end-users in throwaway "
            "indices (shared and dedicated), probe every cross-user read path with each end-user's own key, "
            "report 'probes: N, leaks: 0'. Exits non-zero on any leak or failed probe. Leaves no index and no "
            "valid key behind; its tenants and their audit events stay as the record of the run.")

    def add_arguments(self, parser):
        parser.add_argument("--tenants", type=int, default=3, help="number of tenants (>= 2)")
        parser.add_argument("--subjects", type=int, default=3, help="end-users per tenant (>= 2)")
        parser.add_argument("--dedicated", type=int, default=1,
                            help="how many of the tenants use dedicated indices (the rest share)")
        parser.add_argument("--show", type=int, default=20, help="findings to print at most")

    def handle(self, *args, tenants: int, subjects: int, dedicated: int, show: int, **options):
        if tenants < 2 or subjects < 2:
            raise CommandError("isolation needs at least 2 tenants with at least 2 end-users each")
        if not 0 <= dedicated < tenants:
            raise CommandError("--dedicated must leave at least one shared tenant")
        try:
            report = isolation_probe_run(tenants=tenants, subjects=subjects, dedicated=dedicated)
        except EngramError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
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
