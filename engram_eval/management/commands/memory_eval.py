import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engram_eval.consolidation import evaluate_consolidation, format_findings
from engram_eval.consolidation_locomo import evaluate_consolidation_locomo, format_report
from engram_eval.corpora import CONSOLIDATION_CORPUS, EVAL_CORPUS
from engram_eval.locomo import evaluate_locomo, sweep_locomo
from engram_eval.retrieval import evaluate_fixture, format_table, gate_failures
from engram_eval.sweep import folds_of, format_sweep, parse_sweep
from memory_app.recall.options import ranking_config
from memory_app.recall.ranking import RankingConfig


class Command(BaseCommand):
    help = ("Measure recall quality through the real services: the fixture corpus (R@1/5/10, MRR, "
            "per type, cross-subject leak sweep) or LoCoMo-format conversations (--locomo).")

    def add_arguments(self, parser):
        parser.add_argument("--corpus", type=Path, default=EVAL_CORPUS)
        parser.add_argument("--locomo", nargs="+", type=Path, metavar="FILE", help="LoCoMo conversation files")
        parser.add_argument("--gate", action="store_true",
                            help="exit non-zero unless R@10 >= 0.90, R@5 >= 0.80, MRR >= 0.65 and leaks == 0 "
                                 "(fixture corpus)")
        parser.add_argument("--min-r10", type=float, default=0.90)
        parser.add_argument("--min-r5", type=float, default=0.80)
        parser.add_argument("--min-mrr", type=float, default=0.65)
        parser.add_argument("--client-context", dest="context_turns", type=int, default=0, metavar="N",
                            help="LoCoMo, old mode: the client sends each turn's N preceding turns as explicit "
                                 "context (default 0: none sent, Engram derives it as for any agent)")
        parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
        parser.add_argument("--dedicated", action="store_true",
                            help="put the eval's tenants in dedicated indices instead of the shared ones")
        parser.add_argument("--consolidation", nargs="?", const=CONSOLIDATION_CORPUS, type=Path, metavar="FILE",
                            help="score consolidation on its labelled fixture (default: engram_eval/corpora/"
                                 "consolidation_corpus.json); with --locomo, against the files' session observations")
        parser.add_argument("--extractor", choices=["rules", "llm"], default=None,
                            help="consolidation extractor (default: ENGRAM_CONSOLIDATION_EXTRACTOR)")
        parser.add_argument("--consolidate", action="store_true",
                            help="LoCoMo: consolidate each conversation first; the facts found credit their turns")
        parser.add_argument("--ranking", action="append", default=[], metavar="NAME=VALUE",
                            help="an ablation: recall with this field of RankingConfig changed "
                                 "(memory_app/recall/ranking.py; repeatable), e.g. --ranking fusion=rrf")
        parser.add_argument("--questions", type=Path, metavar="FILE",
                            help="LoCoMo: ask this question set instead of the files' own (e.g. "
                                 "engram_eval/corpora/temporal_questions.json)")
        parser.add_argument("--sweep", metavar="NAME=V1,V2,...",
                            help="LoCoMo: ask under each value of one ranking field (e.g. dated_weight=0,1) and "
                                 "cross-validate: per fold, the value best (mean R@10) on the "
                                 "other conversations is scored on the held-out ones")
        parser.add_argument("--folds", type=int, default=4,
                            help="--sweep: groups of conversations held out in turn (default 4)")

    def handle(self, *args, corpus, locomo, gate, min_r10, min_r5, min_mrr, context_turns, json: bool,
               consolidation=None, extractor=None, consolidate=False, dedicated=False, questions=None, ranking=(),
               sweep=None, folds=4, **options):
        started = time.monotonic()
        config = _ranking(ranking)
        if sweep is not None:
            if not locomo:
                raise CommandError("--sweep needs --locomo FILES")
            try:
                swept = parse_sweep(sweep, config)
                folds_of([p.stem for p in locomo], folds)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            report = sweep_locomo(paths=locomo, sweep=swept, folds=folds, context_turns=context_turns, log=self.stdout.write, consolidate=consolidate,
                                  extractor=extractor, dedicated=dedicated, questions=questions, ranking=config)
            self.stdout.write(f"LoCoMo cross-validated sweep ({', '.join(p.name for p in locomo)}){_with(ranking)}, "
                              f"{time.monotonic() - started:.0f}s")
            self.stdout.write(format_sweep(report))
            if json:
                self.stdout.write(_json(report))
            return
        if consolidation and locomo:
            report = evaluate_consolidation_locomo(paths=locomo, extractor=extractor, log=self.stdout.write)
            self.stdout.write(f"consolidation against LoCoMo observations ({report['extractor']} extractor), "
                              f"{time.monotonic() - started:.0f}s")
            self.stdout.write(format_report(report))
            if json:
                self.stdout.write(_json(report))
            return
        if consolidation:
            report = evaluate_consolidation(path=consolidation, extractor=extractor, log=self.stdout.write)
            self.stdout.write(f"consolidation fixture {consolidation.name} ({report['extractor']} extractor), "
                              f"{time.monotonic() - started:.0f}s")
            first = report["original_gold"]
            self.stdout.write(f"  {'':<30}{'corrected gold':>16}{'original gold':>16}")
            for key, value in report.items():
                if key not in ("counts", "runs", "extractor", "findings", "original_gold"):
                    self.stdout.write(f"  {key:<30}{value!s:>16}{first[key]!s:>16}")
            self.stdout.write(f"  counts {report['counts']}")
            self.stdout.write(f"  counts, original gold {first['counts']}")
            self.stdout.write(f"  runs   {report['runs']}")
            self.stdout.write("corrected gold:")
            for line in format_findings(report["findings"]):
                self.stdout.write(line)
            self.stdout.write("original gold:")
            for line in format_findings(first["findings"]):
                self.stdout.write(line)
            if json:
                self.stdout.write(_json(report))
            return
        if locomo:
            summary = evaluate_locomo(paths=locomo, context_turns=context_turns, log=self.stdout.write,
                                      consolidate=consolidate, extractor=extractor, dedicated=dedicated,
                                      questions=questions, ranking=config)
            self.stdout.write(f"LoCoMo evidence recall{' (consolidated facts credit their turns)' * consolidate}"
                              f"{f' on {questions.name}' if questions else ''} "
                              f"({', '.join(p.name for p in locomo)}){_with(ranking)}, "
                              f"{time.monotonic() - started:.0f}s")
            self.stdout.write(format_table(summary, metrics=("R@5", "R@10")))
            if json:
                self.stdout.write(_json(summary))
            return
        report = evaluate_fixture(path=corpus, log=self.stdout.write, dedicated=dedicated, ranking=config)
        self.stdout.write(f"fixture corpus {corpus.name}{_with(ranking)}: {report.questions} questions, "
                          f"{time.monotonic() - started:.0f}s")
        self.stdout.write(format_table(report.scores, metrics=("R@1", "R@5", "R@10", "MRR")))
        self.stdout.write(f"leak sweep: {report.leak_probes} hits checked, leaks: {report.leaks}")
        for example in report.leak_examples:
            self.stderr.write(f"  LEAK {example}")
        if json:
            self.stdout.write(_json({"scores": report.scores, "leak_probes": report.leak_probes,
                                     "leaks": report.leaks}))
        if gate:
            failed = gate_failures(report, min_r10=min_r10, min_r5=min_r5, min_mrr=min_mrr)
            if failed:
                raise CommandError("eval gate failed: " + "; ".join(failed))
            self.stdout.write(self.style.SUCCESS("eval gate passed"))


def _json(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


def _ranking(changes: list[str]) -> RankingConfig:
    """The deployment's ranking with the ablation's ``NAME=VALUE`` changes; CommandError for a change
    it cannot take."""
    pairs = [change.partition("=") for change in changes]
    if bad := [change for change, (_name, equals, _value) in zip(changes, pairs, strict=True) if not equals]:
        raise CommandError(f"--ranking takes NAME=VALUE, not {bad[0]!r}")
    try:
        return ranking_config().changed({name.strip(): value for name, _equals, value in pairs})
    except ValueError as exc:
        raise CommandError(f"--ranking: {exc}") from exc


def _with(changes: list[str]) -> str:
    """How a report's title names the ablation it measured (nothing for the deployment's ranking)."""
    return f" with {', '.join(changes)}" if changes else ""
