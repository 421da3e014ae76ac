"""Recall quality on the fixture corpus, through the real services against the real cluster.

The corpus (``engram_eval/corpora/eval_corpus.json``) holds tenants, end-users with every memory
type, supersession and near-duplicate facts, and paraphrased questions per evaluated document:
R@1/5/10 and MRR overall and per memory type, plus a cross-subject leak sweep made through each
end-user's own key.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from memory_app.recall import memory_recall
from memory_app.recall.ranking import RankingConfig
from memory_app.validation import clean_datetime
from tenants.models import Subject

from .sandbox import Sandbox, sandbox
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_outcome_record, playbook_write
from memory_app.services.imports import episodes_import
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes

KS = (1, 5, 10)


@dataclass
class Scores:
    """Per-question recall figures, aggregated overall and per group."""

    rows: list[tuple[str, dict[str, float]]] = field(default_factory=list)

    def add(self, group: str, values: dict[str, float]) -> None:
        self.rows.append((group, values))

    def summary(self) -> dict[str, dict[str, float]]:
        groups: dict[str, list[dict[str, float]]] = defaultdict(list)
        for group, values in self.rows:
            groups["overall"].append(values)
            groups[group].append(values)
        return {g: {"n": len(v), **{m: round(mean(x[m] for x in v), 4) for m in v[0]}}
                for g, v in sorted(groups.items(), key=lambda kv: (kv[0] != "overall", kv[0]))}


def question_scores(ranked: list[str], expected: list[str]) -> dict[str, float]:
    """R@k (share of ``expected`` in the top k of ``ranked``) and the reciprocal rank of the first hit."""
    out = {f"R@{k}": len(set(ranked[:k]) & set(expected)) / len(expected) for k in KS}
    first = next((n for n, i in enumerate(ranked, start=1) if i in expected), None)
    out["MRR"] = 1.0 / first if first else 0.0
    return out


def format_table(summary: dict[str, dict[str, float]], *, metrics: tuple[str, ...]) -> str:
    lines = [f"{'':<16}{'n':>5}" + "".join(f"{m:>8}" for m in metrics)]
    for group, values in summary.items():
        lines.append(f"{group:<16}{values['n']:>5}" + "".join(f"{values[m]:>8.3f}" for m in metrics))
    return "\n".join(lines)


@dataclass
class FixtureReport:
    scores: dict[str, dict[str, float]]
    questions: int
    leak_probes: int
    leaks: int
    leak_examples: list[str]


def gate_failures(report: FixtureReport, *, min_r10: float, min_r5: float, min_mrr: float) -> list[str]:
    """What keeps ``report`` below the gate (empty when it passes). MRR is gated beside R@k because
    an answer pushed from rank 1 to ranks 2-5 leaves R@5 and R@10 unchanged."""
    overall = report.scores["overall"]
    failed = [f"R@10 {overall['R@10']:.3f} < {min_r10}"] * (overall["R@10"] < min_r10)
    failed += [f"R@5 {overall['R@5']:.3f} < {min_r5}"] * (overall["R@5"] < min_r5)
    failed += [f"MRR {overall['MRR']:.3f} < {min_mrr}"] * (overall["MRR"] < min_mrr)
    failed += [f"{report.leaks} leaks"] * (report.leaks > 0)
    return failed


def evaluate_fixture(*, path: Path, k: int = 10, log: Callable[[str], None] = print,
                     dedicated: bool = False, ranking: RankingConfig | None = None) -> FixtureReport:
    """Score recall on the corpus at ``path``. ``dedicated``: every tenant in dedicated indices
    (its own index statistics) instead of the shared ones. ``ranking``: how recall ranks (default:
    the deployment's; an ablation passes its own)."""
    corpus = json.loads(path.read_text())
    now = clean_datetime(corpus["now"], field="now")
    with sandbox() as box:
        key_to_id, key_type, subjects = _load_fixture(box, corpus, log=log, dedicated=dedicated)
        scores = Scores()
        leak_probes = leaks = 0
        leak_examples: list[str] = []
        for q in corpus["questions"]:
            subject = subjects[(q["tenant"], q["subject"])]
            results = memory_recall(subject=subject, query=q["question"], k=k, now=now, ranking=ranking)
            ranked = [r["id"] for r in results]
            expected = [key_to_id[e] for e in q["expected"]]
            scores.add(key_type[q["expected"][0]], question_scores(ranked, expected))
            for r in results:  # every hit must be the asker's own or its tenant's catalog
                leak_probes += 1
                if r["tenant_id"] != subject.tenant.slug or r.get("user_id") not in (None, str(subject.user_id)):
                    leaks += 1
                    leak_examples.append(f"{q['subject']}: {r['id']}")
        # Sweep: every subject asks for every other subject's memories by their own words.
        for (_tenant, external_id), subject in subjects.items():
            tenant_slug = subject.tenant.slug
            for other in corpus["subjects"]:
                if other["external_id"] == external_id:
                    continue
                for memory in other["semantic"] + other["episodic"]:
                    results = memory_recall(subject=subject, query=memory["text"], k=k,
                                            include_superseded=True, now=now, ranking=ranking)
                    for r in results:
                        leak_probes += 1
                        if r["tenant_id"] != tenant_slug or r.get("user_id") not in (None, str(subject.user_id)):
                            leaks += 1
                            leak_examples.append(f"{external_id}: {r['id']}")
        return FixtureReport(scores=scores.summary(), questions=len(corpus["questions"]), leak_probes=leak_probes,
                             leaks=leaks, leak_examples=leak_examples[:10])


def _load_fixture(box: Sandbox, corpus: dict, *, log: Callable[[str], None], dedicated: bool = False):
    key_to_id: dict[str, str] = {}
    key_type: dict[str, str] = {}
    tenants = {}
    for t in corpus["tenants"]:
        tenants[t["slug"]] = box.tenant(slug=t["slug"], name=t["name"], dedicated=dedicated)
        for entry in t["catalog"]:
            written = catalog_entry_write(tenant=tenants[t["slug"]], title=entry["title"], text=entry["text"])
            key_to_id[entry["key"]], key_type[entry["key"]] = written["id"], "catalog"
    subjects: dict[tuple[str, str], Subject] = {}
    for s in corpus["subjects"]:
        subject = subject_get_or_create(tenant=tenants[s["tenant"]], external_id=s["external_id"],
                                                        actor="eval", lifetimes=KeyLifetimes.from_settings())
        subjects[(s["tenant"], s["external_id"])] = subject
        ids = episodes_import(subject=subject, episodes=[
            {"text": e["text"], "occurred_at": e["occurred_at"]} for e in s["episodic"]])
        for e, memory_id in zip(s["episodic"], ids, strict=True):
            key_to_id[e["key"]], key_type[e["key"]] = memory_id, "episodic"
        for f in s["semantic"]:  # in file order, so superseded facts exist before their successors
            written = fact_write(subject=subject, text=f["text"], confidence=f.get("confidence", 1.0),
                                          supersedes=[key_to_id[x] for x in f.get("supersedes") or []],
                                          contradiction=f.get("contradiction") or "natural")
            key_to_id[f["key"]], key_type[f["key"]] = written["id"], "semantic"
        for p in s["procedural"]:
            written = playbook_write(subject=subject, trigger=p["trigger"], steps=p["steps"])
            key_to_id[p["key"]], key_type[p["key"]] = written["id"], "procedural"
            for outcome, times in ((True, p.get("success", 0)), (False, p.get("failure", 0))):
                for _ in range(times):
                    playbook_outcome_record(subject=subject, playbook_id=written["id"], success=outcome)
        log(f"  loaded {s['tenant']}/{s['external_id']}")
    return key_to_id, key_type, subjects
