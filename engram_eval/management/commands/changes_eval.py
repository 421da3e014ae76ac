import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand

from engram_eval.supersession import detect_offline, detect_offline_locomo, evaluate_changes, evaluate_changes_locomo


class Command(BaseCommand):
    help = ("Measure changes over time (issue 69) through the real services: supersession precision and "
            "recall and the current value first, on the labelled changes or (--locomo) on LoCoMo dev "
            "conversations named by path.")

    def add_arguments(self, parser):
        parser.add_argument("--locomo", nargs="+", type=Path, metavar="FILE", help="LoCoMo dev conversation files")
        parser.add_argument("--only", nargs="+", default=(), metavar="ID", help="labelled entries to keep")
        parser.add_argument("--extractor", choices=["rules", "llm"], default=None)
        parser.add_argument("--offline", action="store_true",
                            help="supersession only, in memory without the services (seconds to a minute; for tuning)")
        parser.add_argument("--findings", action="store_true", help="list every entry behind a shortfall")
        parser.add_argument("--json", action="store_true", help="print the report as JSON too")

    def handle(self, *args, locomo, only, extractor, offline: bool, findings: bool, json: bool, **options):
        started = time.monotonic()
        if locomo and offline:
            report = detect_offline_locomo(paths=locomo, extractor=extractor)
            self.stdout.write(f"changes on LoCoMo dev ({', '.join(p.name for p in locomo)}), offline, "
                              f"{time.monotonic() - started:.0f}s")
            self.stdout.write(f"  all: {report['all']}")
            for name, figures in report["conversations"].items():
                self.stdout.write(f"  {name}: {figures}")
        elif locomo:
            report = evaluate_changes_locomo(paths=locomo, extractor=extractor, log=self.stdout.write)
            self.stdout.write(f"changes on LoCoMo dev ({', '.join(p.name for p in locomo)}), "
                              f"{time.monotonic() - started:.0f}s")
            self.stdout.write(f"  all: {report['all']}")
        elif offline:
            report = detect_offline(extractor=extractor, only=only)
            self.stdout.write(f"labelled changes, offline, {time.monotonic() - started:.0f}s")
            for key in ("changes", "non_changes", "precision", "recall", "kind_right", "false_supersession_rate"):
                self.stdout.write(f"  {key:<26}{report[key]!s:>8}")
            for family, f in report["families"].items():
                self.stdout.write(f"  {family:<12}{f['changes']:>8}{f['precision']!s:>7}{f['recall']!s:>7}")
        else:
            report = evaluate_changes(extractor=extractor, only=only, log=self.stdout.write)
            self.stdout.write(f"labelled changes ({report['extractor']} extractor), {time.monotonic() - started:.0f}s")
            for key in ("changes", "non_changes", "precision", "recall", "kind_right", "false_supersession_rate",
                        "now_first", "before_first", "kept_first"):
                self.stdout.write(f"  {key:<26}{report[key]!s:>8}")
            self.stdout.write(f"  {'family':<12}{'changes':>8}{'prec':>7}{'recall':>7}{'now':>7}{'before':>7}"
                              f"{'kept':>7}")
            for family, f in report["families"].items():
                self.stdout.write(f"  {family:<12}{f['changes']:>8}{f['precision']!s:>7}{f['recall']!s:>7}"
                                  f"{f['now_first']!s:>7}{f['before_first']!s:>7}{f['kept_first']!s:>7}")
        if "weights" in report:
            self.stdout.write("  first right per (superseded weight / past boost): now, before, kept")
            for key, shares in report["weights"].items():
                self.stdout.write(f"    {key:<10} {shares['now']!s:>6} {shares['before']!s:>6} {shares['kept']!s:>6}")
        if "cross_validated" in report:
            self.stdout.write(f"  leave one conversation out: {report['cross_validated']}")
        if findings:
            for kind, lines in report["findings"].items():
                self.stdout.write(f"{kind} ({len(lines)}):")
                for line in lines:
                    self.stdout.write(f"  {line}")
        if json:
            self.stdout.write(_json(report))


def _json(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=str)
