"""Consolidation quality on a labelled fixture, through the real services against the real cluster.

Each persona's turns are imported and consolidated until nothing waits; every fact written is
matched to at most one gold fact (it must cite one of the gold fact's turns and contain its value,
fuzzily). Figures: extraction precision and recall, duplicate-merge precision and recall,
contradiction detection (and its kind), false supersessions, playbook outcome counts; and each
fact behind a shortfall (``findings``), so that every figure can be checked fact by fact. The same
facts are scored against the corrected gold and against the gold as first written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from memory_app.consolidation.resolve import normalise
from memory_app.consolidation.services import consolidate_all
from memory_app.selectors import subject_export

from .sandbox import import_by_client_id, sandbox
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes


# What the findings list, each with its label: facts written that match no gold fact, gold facts no
# written fact matches, supporting turns counted as wrong merges, supersession links no gold accounts
# for, gold supersessions not found.
FINDINGS = {"false_positives": "false positive", "missed": "missed", "wrong_merges": "wrong merge",
            "false_supersessions": "false supersession", "missed_contradictions": "missed contradiction"}


def _value_in(value: str, text: str) -> bool:
    return fuzz.partial_ratio(normalise(value), normalise(text)) >= 90


def gold_facts(persona: dict, *, original: bool = False) -> list[dict[str, Any]]:
    """The persona's gold facts as corrected, or (``original``) as first written: without the facts
    a correction ``added``, with the fields it ``changed`` back at their ``original`` values."""
    if not original:
        return persona["facts"]
    return [{**f, **f.get("original", {})} for f in persona["facts"] if "added" not in f]


def new_totals() -> dict[str, float]:
    return dict.fromkeys(("written", "written_matched", "gold", "gold_matched", "merged_in", "merged_in_correct",
                          "restated", "restated_merged", "contradictions", "detected", "detected_kind", "links",
                          "false_links", "playbooks", "playbooks_exact", "playbooks_found"), 0)


def evaluate_consolidation(*, path: Path, extractor: str | None = None, log: Callable[[str], None] = print
                           ) -> dict[str, Any]:
    """Score consolidation on the corpus at ``path``. Precision: written facts matching a gold fact
    / written facts; recall: gold facts matched / gold facts. Merge precision: merged-in episodes
    (support beyond a fact's first) of facts that match a gold fact, that are turns of that gold
    fact; merge recall: restated gold facts whose written fact cites every restating turn.
    Contradiction detection: gold supersessions whose new fact supersedes the old one ("kind" also
    matches natural/harsh); false supersessions: links no gold supersession accounts for.
    Playbooks: per gold playbook, one with that trigger exists (found) with the gold
    success/failure counts (exact). The report holds these figures against the corrected gold,
    and under ``original_gold`` against the gold and scoring as first written."""
    corpus = json.loads(path.read_text())
    totals, first_totals = new_totals(), new_totals()
    run_totals: dict[str, int] = {}
    findings: dict[str, list[dict[str, Any]]] = {k: [] for k in FINDINGS}
    first_findings: dict[str, list[dict[str, Any]]] = {k: [] for k in FINDINGS}
    with sandbox() as box:
        tenant = box.tenant(slug="consolidation", name="Consolidation eval")
        for persona in corpus["personas"]:
            subject = subject_get_or_create(tenant=tenant, external_id=persona["external_id"],
                                                            actor="eval", lifetimes=KeyLifetimes.from_settings())
            # The gold names turns by the corpus's ids: a fact's supporting episodes are mapped back.
            turn_of = import_by_client_id(subject=subject, episodes=[
                {"id": t["id"], "text": t["text"], "occurred_at": t["occurred_at"], "session_id": t["session_id"]}
                for t in persona["turns"]])
            for key, value in consolidate_all(subject=subject, extractor=extractor).items():
                run_totals[key] = run_totals.get(key, 0) + value
            memories = subject_export(subject=subject)["memories"]
            written = []
            for fact in memories["semantic"]:
                if fact.get("source") == "consolidation":
                    support = [turn_of.get(i, i) for i in fact.get("supporting_episode_ids") or []]
                    written.append({**fact, "supporting_episode_ids": support})
            _score_persona(persona, written, memories["procedural"], totals, findings=findings)
            _score_persona(persona, written, memories["procedural"], first_totals, findings=first_findings,
                           original=True)
            log(f"  {persona['external_id']}: {len(persona['turns'])} turns, {len(written)} facts written")
    return {"extractor": extractor or "default", **figures(totals), "runs": run_totals, "findings": findings,
            "original_gold": {**figures(first_totals), "findings": first_findings}}


def figures(totals: dict[str, float]) -> dict[str, Any]:
    def ratio(a: str, b: str) -> float:
        return round(totals[a] / totals[b], 3) if totals[b] else 0.0

    return {
        "extraction_precision": ratio("written_matched", "written"),
        "extraction_recall": ratio("gold_matched", "gold"),
        "merge_precision": ratio("merged_in_correct", "merged_in"),
        "merge_recall": ratio("restated_merged", "restated"),
        "contradiction_detection_rate": ratio("detected", "contradictions"),
        "contradiction_kind_rate": ratio("detected_kind", "contradictions"),
        "false_supersessions": int(totals["false_links"]),
        "supersession_links": int(totals["links"]),
        "playbook_outcomes_exact": ratio("playbooks_exact", "playbooks"),
        "playbooks_found": ratio("playbooks_found", "playbooks"),
        "counts": {k: int(v) for k, v in totals.items()},
    }


def format_findings(findings: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One line per finding: who, what was written or expected, and the turns it cites."""
    lines = []
    for kind, label in FINDINGS.items():
        for f in findings.get(kind, []):
            turns = ", ".join(f.get("turns") or [])
            lines.append(f"  {label}: {f['persona']}: {f['text']!r} ({turns})"
                         + (f" {f['note']}" if f.get("note") else ""))
    return lines


def _score_persona(persona: dict, written: list[dict], playbooks: list[dict], totals: dict[str, float], *,
                   findings: dict[str, list[dict[str, Any]]] | None = None, original: bool = False) -> None:
    gold = gold_facts(persona, original=original)
    found = findings if findings is not None else {k: [] for k in FINDINGS}
    who = persona.get("external_id", "")

    def cites(w: dict) -> list[str]:
        return list(w.get("supporting_episode_ids") or [])

    # Greedy one-to-one matching, best textual agreement first.
    pairs = []
    for w in written:
        support = set(w.get("supporting_episode_ids") or [])
        for g in gold:
            if support & set(g["turns"]) and _value_in(g["value"], w["text"]):
                pairs.append((fuzz.token_set_ratio(normalise(g["text"]), normalise(w["text"])), w["id"], g["key"]))
    gold_of: dict[str, str] = {}
    written_of: dict[str, str] = {}
    for _, wid, gkey in sorted(pairs, reverse=True):
        if wid not in gold_of and gkey not in written_of:
            gold_of[wid], written_of[gkey] = gkey, wid
    by_key = {g["key"]: g for g in gold}
    totals["written"] += len(written)
    totals["written_matched"] += len(gold_of)
    totals["gold"] += len(gold)
    totals["gold_matched"] += len(written_of)
    found["false_positives"] += [{"persona": who, "text": w["text"], "turns": cites(w)}
                                 for w in written if w["id"] not in gold_of]
    found["missed"] += [{"persona": who, "text": g["text"], "turns": g["turns"], "note": f"[{g['key']}]"}
                        for g in gold if g["key"] not in written_of]

    for w in written:
        support = cites(w)
        extra = support[1:]
        g = by_key.get(gold_of.get(w["id"], ""))
        if g is None and not original:
            # A fact matching no gold fact is already a false positive, and no gold turns judge what
            # it cites: its second turn is often evidence, not a merge (an age and the naming turn).
            continue
        totals["merged_in"] += len(extra)
        totals["merged_in_correct"] += sum(1 for e in extra if g and e in g["turns"])
        found["wrong_merges"] += [{"persona": who, "text": w["text"], "turns": support, "note": f"merged in: {e}"}
                                  for e in extra if not (g and e in g["turns"])]
    for g in gold:
        if len(g["turns"]) > 1:
            totals["restated"] += 1
            wid = written_of.get(g["key"])
            w = next((x for x in written if x["id"] == wid), None)
            totals["restated_merged"] += bool(w and set(g["turns"]) <= set(w.get("supporting_episode_ids") or []))

    written_by_id = {w["id"]: w for w in written}
    for g in gold:
        if "supersedes" not in g:
            continue
        totals["contradictions"] += 1
        new, old = written_of.get(g["key"]), written_of.get(g["supersedes"])
        if new and old and old in (written_by_id[new].get("supersedes") or []):
            totals["detected"] += 1
            totals["detected_kind"] += written_by_id[new].get("contradiction") == g["contradiction"]
        else:
            found["missed_contradictions"].append({"persona": who, "text": g["text"], "turns": g["turns"],
                                                   "note": f"[{g['key']} supersedes {g['supersedes']}]"})
    for w in written:
        for old in w.get("supersedes") or []:
            totals["links"] += 1
            new_gold, old_gold = by_key.get(gold_of.get(w["id"], "")), gold_of.get(old)
            if not (new_gold and old_gold and new_gold.get("supersedes") == old_gold):
                totals["false_links"] += 1
                replaced = written_by_id.get(old, {}).get("text", old)
                found["false_supersessions"].append({"persona": who, "text": w["text"], "turns": cites(w),
                                                     "note": f"supersedes {replaced!r}"})

    for gp in persona["playbooks"]:
        totals["playbooks"] += 1
        match = [p for p in playbooks if fuzz.token_set_ratio(normalise(gp["trigger"]), normalise(p["trigger"])) >= 80]
        totals["playbooks_found"] += bool(match)
        totals["playbooks_exact"] += any((p.get("success_count"), p.get("failure_count")) ==
                                         (gp["success"], gp["failure"]) for p in match)
