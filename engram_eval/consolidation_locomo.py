"""Consolidation scored against LoCoMo's own observations (third-party gold).

Every LoCoMo session carries ``session_N_observation``: per speaker, facts a person wrote from the
session, each with the turn it came from (a sentence such as "Ana paints landscapes at the lake on
weekends." with ``D1:14``). A conversation is imported as one end-user (each turn
"Speaker: text", dated by its session, as the recall eval does), consolidated through the real
services until nothing waits, and every fact consolidation wrote (current or superseded) is
scored:

- **coverage**: share of observations matched by a written fact that cites one of the
  observation's evidence turns and says the same thing, i.e. the MiniLM cosine of the two texts
  is at least the threshold (0.6 by default, the issue's; the figures at other thresholds are
  reported beside it: a fact that cites the right turn rarely says something else, so the
  threshold mostly measures wording);
- **precision**: share of written facts that match an observation of a turn they cite at the same
  threshold (a fact about a turn no observation covers counts against it);
- **grounded share**: share of written facts that their cited turns support (``fact_supported``):
  the fact is about a cited turn's speaker, every content word of it is in a cited turn (or is a
  date a time phrase of the turn names against its session's date), and it is negated only if a
  cited turn holds a negation;
- facts per 100 turns, and speed: the extractor alone (turns/s, in-process), a dry run of the
  whole conversation, and the consolidation runs that wrote the facts.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from memory_app.consolidation.extractors import Episode, ExtractorOptions, get_extractor
from memory_app.consolidation.grounding import content_words, ungrounded_words
from memory_app.consolidation.services import consolidate_all, consolidation_run
from memory_app.providers import get_embedder

from .locomo import locomo_episodes, locomo_session_date
from .sandbox import import_by_client_id, sandbox
from language.temporal import statement_dates
from memory_app.selectors import subject_export
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes

THRESHOLDS = (0.5, 0.6, 0.7, 0.8)
_DIA = re.compile(r"D\s*\d+\s*:\s*\d+", re.I)
_NEGATION = re.compile(r"\b(?:not|no|never|nobody|nothing|none|neither|nor|no longer)\b|n't\b", re.I)


@dataclass(frozen=True)
class Observation:
    speaker: str
    text: str
    turns: tuple[str, ...]  # dia ids, normalised ("D1:14")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    when: datetime


@dataclass(frozen=True)
class WrittenFact:
    text: str
    turns: tuple[str, ...]


def _dia(raw: str) -> str:
    return re.sub(r"\s+", "", raw).upper().replace("D0", "D")


def observations(data: dict) -> list[Observation]:
    """Every ``session_N_observation`` item (evidence written as a string or a list of ids)."""
    out = []
    n = 1
    while f"session_{n}" in data:
        for speaker, items in (data.get(f"session_{n}_observation") or {}).items():
            for text, evidence in items:
                raw = evidence if isinstance(evidence, str) else " ".join(map(str, evidence))
                turns = tuple(dict.fromkeys(_dia(m) for m in _DIA.findall(raw)))
                if turns:
                    out.append(Observation(speaker=speaker, text=text, turns=turns))
        n += 1
    return out


def fact_supported(fact: WrittenFact, turns: dict[str, Turn]) -> bool:
    """Whether the fact's cited turns support it (see the module docstring)."""
    cited = [turns[t] for t in fact.turns if t in turns]
    if not cited:
        return False
    speakers = {t.speaker for t in cited}
    if not any(re.search(rf"\b{re.escape(s)}\b", fact.text) for s in speakers):
        return False
    evidence = [f"{t.speaker}: {t.text} " + " ".join(d.rendered for d in statement_dates(t.text, when=t.when))
                for t in cited]
    if not content_words(fact.text) or ungrounded_words(fact.text, evidence):
        return False
    return not (_NEGATION.search(fact.text) and not any(_NEGATION.search(t.text) for t in cited))


def coverage(observed: list[Observation], facts: list[WrittenFact], *, embed: Callable[[list[str]], Any],
             thresholds: Iterable[float] = THRESHOLDS) -> dict[str, Any]:
    """Share of observations matched, per threshold, and each observation's best cosine
    (against the facts citing one of its evidence turns; 0 when none does)."""
    by_turn: dict[str, list[int]] = {}
    for i, fact in enumerate(facts):
        for turn in fact.turns:
            by_turn.setdefault(turn, []).append(i)
    fact_vectors = np.asarray(embed([f.text for f in facts]) if facts else np.zeros((0, 1)), dtype=np.float32)
    obs_vectors = np.asarray(embed([o.text for o in observed]) if observed else np.zeros((0, 1)), dtype=np.float32)
    best = []
    fact_best = [0.0] * len(facts)  # each fact's best cosine to an observation of a turn it cites
    for o, vector in zip(observed, obs_vectors, strict=True):
        candidates = sorted({i for t in o.turns for i in by_turn.get(t, [])})
        if not candidates:
            best.append(0.0)
            continue
        cosines = fact_vectors[candidates] @ vector
        best.append(float(cosines.max()))
        for i, c in zip(candidates, cosines.tolist(), strict=True):
            fact_best[i] = max(fact_best[i], c)
    shares = {f"{t:.1f}": round(sum(b >= t for b in best) / len(best), 3) if best else 0.0 for t in thresholds}
    precision = {f"{t:.1f}": round(sum(b >= t for b in fact_best) / len(facts), 3) if facts else 0.0
                 for t in thresholds}
    cited = sum(bool(set(o.turns) & set(by_turn)) for o in observed)
    return {"coverage": shares, "precision": precision,
            "cites_evidence": round(cited / len(observed), 3) if observed else 0.0, "best": best,
            "fact_best": fact_best}


def conversation_turns(data: dict) -> dict[str, Turn]:
    out = {}
    n = 1
    while f"session_{n}" in data:
        when = locomo_session_date(data[f"session_{n}_date_time"])
        for turn in data[f"session_{n}"]:
            out[_dia(turn["dia_id"])] = Turn(dia_id=_dia(turn["dia_id"]), speaker=turn["speaker"], text=turn["text"],
                                             when=when)
        n += 1
    return out


def extraction_speed(episodes: list[dict[str, Any]], *, extractor: str | None) -> tuple[int, float]:
    """(facts proposed, seconds) for the extractor alone over the whole conversation."""
    eps = [Episode(id=e["id"], text=e["text"], occurred_at=e["occurred_at"].isoformat(), session_id=e["session_id"])
           for e in episodes]
    started = time.perf_counter()
    proposed = get_extractor(extractor, options=ExtractorOptions.from_settings()).extract(episodes=eps, context=[])
    return len(proposed.facts), time.perf_counter() - started


def evaluate_consolidation_locomo(*, paths: list[Path], extractor: str | None = None,
                                  thresholds: Iterable[float] = THRESHOLDS, log: Callable[[str], None] = print,
                                  examples: int = 0) -> dict[str, Any]:
    """Per conversation: coverage (per threshold), grounded share, facts per 100 turns and speed;
    ``examples`` > 0 logs that many unsupported facts and unmatched observations of each."""
    embedder = get_embedder()
    thresholds = tuple(thresholds)
    report: dict[str, Any] = {"extractor": extractor or "default", "conversations": {}}
    with sandbox() as box:
        tenant = box.tenant(slug="locomo-consolidation", name="LoCoMo consolidation")
        for path in paths:
            data = json.loads(path.read_text())
            conversation = path.stem
            turns = conversation_turns(data)
            episodes = locomo_episodes(conversation, data)
            proposed, seconds = extraction_speed(episodes, extractor=extractor)
            subject = subject_get_or_create(tenant=tenant, external_id=f"conv-{conversation}", actor="eval",
                                            lifetimes=KeyLifetimes.from_settings())
            turn_of = import_by_client_id(subject=subject, episodes=[
                {**e, "occurred_at": e["occurred_at"].isoformat()} for e in episodes])
            dia_of = {stored: _dia(e["metadata"]["dia_id"]) for stored, e in
                      zip(turn_of, episodes, strict=True)}
            dry = consolidation_run(subject=subject, extractor=extractor, dry_run=True).run
            runs = consolidate_all(subject=subject, extractor=extractor)
            written = [WrittenFact(text=f["text"], turns=tuple(dia_of[i] for i in f.get("supporting_episode_ids") or []
                                                               if i in dia_of))
                       for f in subject_export(subject=subject)["memories"]["semantic"]
                       if f.get("source") == "consolidation"]
            observed = observations(data)
            matched = coverage(observed, written, embed=embedder.embed_documents, thresholds=thresholds)
            supported = [fact_supported(f, turns) for f in written]
            figures = {
                "turns": len(turns), "observations": len(observed), "facts": len(written),
                "facts_per_100_turns": round(100 * len(written) / len(turns), 1),
                "coverage": matched["coverage"], "precision": matched["precision"],
                "cites_evidence": matched["cites_evidence"],
                "grounded_share": round(sum(supported) / len(written), 3) if written else 0.0,
                "extractor_turns_per_s": round(len(episodes) / seconds, 1) if seconds else None,
                "extractor_facts_proposed": proposed,
                "dry_run": {"episodes": dry.episodes_read, "seconds": round(dry.duration_ms / 1000, 2),
                            "turns_per_s": round(dry.episodes_read / max(dry.duration_ms / 1000, 1e-3), 1)},
                "runs": {"runs": runs["runs"], "seconds": round(runs["duration_ms"] / 1000, 2),
                         "facts_created": runs["facts_created"], "facts_merged": runs["facts_merged"],
                         "facts_superseded": runs["facts_superseded"],
                         "candidates_dropped": runs["candidates_dropped"]},
            }
            report["conversations"][path.name] = figures
            log(f"  {path.name}: {len(turns)} turns, {len(observed)} observations, {len(written)} facts, "
                f"coverage {matched['coverage']}, precision {matched['precision']}, "
                f"grounded {figures['grounded_share']}")
            if examples:
                for fact, _ok in [(f, ok) for f, ok in zip(written, supported, strict=True) if not ok][:examples]:
                    log(f"    unsupported: {fact.turns} {fact.text}")
                missed = [(o, b) for o, b in zip(observed, matched["best"], strict=True) if b < 0.6][:examples]
                for o, b in missed:
                    facts_there = [f.text for f in written if set(f.turns) & set(o.turns)]
                    log(f"    missed ({b:.2f}): {o.turns} {o.text} <- {facts_there[:2]}")
    return report


def format_report(report: dict[str, Any]) -> str:
    rows = [f"{'':<12}{'turns':>6}{'obs':>5}{'facts':>6}{'/100t':>7}"
            + "".join(f"{'cov@' + t:>9}" for t in next(iter(report['conversations'].values()))['coverage'])
            + f"{'prec@0.6':>9}{'grounded':>10}{'extract t/s':>13}{'dry run t/s':>13}"]
    for name, f in report["conversations"].items():
        rows.append(f"{name:<12}{f['turns']:>6}{f['observations']:>5}{f['facts']:>6}{f['facts_per_100_turns']:>7}"
                    + "".join(f"{v:>9.3f}" for v in f["coverage"].values())
                    + f"{f['precision']['0.6']:>9.3f}{f['grounded_share']:>10.3f}"
                    + f"{f['extractor_turns_per_s']:>13}{f['dry_run']['turns_per_s']:>13}")
    return "\n".join(rows)
