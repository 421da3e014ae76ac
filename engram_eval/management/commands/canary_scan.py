from django.core.management.base import BaseCommand, CommandError

from engram_core.errors import EngramError
from engram_eval.canary import canary_scan_run


class Command(BaseCommand):
    help = ("Prove forget and erase reach every copy: write a unique canary string into every kind of copy "
            "Engram keeps of memory text, forget (and separately erase), then search every Elasticsearch "
            "index, database table and cache key for it. Exits non-zero when a copy is left, or when a canary "
            "was not found before (the scan would prove nothing). Runs in throwaway indices.")

    def add_arguments(self, parser):
        parser.add_argument("--show", type=int, default=20, help="copies left to print at most")

    def handle(self, *args, show: int, **options):
        try:
            reports = canary_scan_run()
        except EngramError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        for report in reports:
            for line in report.lines():
                self.stdout.write(line)
            for hit in report.after[:show]:
                self.stderr.write(f"{report.phase}, left: {hit}")
            if report.unseen:
                self.stderr.write(f"{report.phase}: not found before, so not proved: {', '.join(report.unseen)}")
        left = sum(len(r.after) for r in reports)
        self.stdout.write(f"copies left: {left}")
        if not all(r.ok for r in reports):
            raise CommandError(f"canary scan failed: {left} copies left after forget and erase"
                               + "".join(f"; {r.phase}: {len(r.unseen)} canaries not found before"
                                         for r in reports if r.unseen))
