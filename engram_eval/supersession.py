"""Changes over time, measured through the real services against the real cluster (issue 69).

Two measures on the labelled changes (``engram_eval.changes``):

- **Supersession precision and recall.** Each end-user's statements are imported one at a time in
  date order and consolidated after each, as months apart. A pair (an earlier statement, a later
  one) is *superseded* when a fact the later statement supports supersedes a fact the earlier one
  supports. Recall: changes superseded / changes; precision: changes superseded / pairs superseded
  (changes and non-changes). The kind (natural / harsh) is checked on the changes found.
- **The current value first.** After an entry's later statement is consolidated, its question
  about now and its question about before are asked through ``memory_recall`` (``now``: a week
  after the later statement). The first hit is right for "now" when it holds the new value (its
  words, or it comes from the later statement and does not name the old value only), for
  "before" the same with old and new swapped. Non-changes: the first hit must hold the value that
  stays.

The same on LoCoMo dev conversations (``locomo_changes.json``, conversations given by path): the
whole conversation is imported per speaker's session in order and consolidated after each session;
every supersession made counts, and one is right when its old fact cites a turn that held the old
value and its new fact cites the turn that replaced it. A dev question is right when the first
hit cites (an episode is, or a fact's support holds) a turn of the expected value.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz import fuzz

from memory_app.consolidation.extractors import ExtractorOptions, get_extractor
from memory_app.consolidation.extractors.base import Episode
from memory_app.consolidation.grounding import episode_evidence, is_grounded
from memory_app.consolidation.resolve import Duplicates, StoredFact, fact_id, normalise
from memory_app.consolidation import changes
from memory_app.consolidation.changes import words_of
from memory_app.consolidation.services import (ChangeLinking, _probe_key, changes_read, consolidate_all,
                                               facts_plan)
from memory_app.providers import get_embedder
from memory_app.recall import memory_recall
from memory_app.recall.read import query_asks_past
from memory_app.selectors import subject_export
from tenants.services.subjects import subject_get_or_create

from .locomo import locomo_episodes
from .changes import CHANGES, Change, ChangeSet, DevChangeSet, NonChange, load_changes, load_locomo_changes
from .sandbox import import_by_client_id, sandbox
from tenants.services.keys import KeyLifetimes

QUESTION_DELAY = timedelta(days=7)


_GLOSS = re.compile(r"\s*\([^()]*\)")


def value_in(value: str, text: str) -> bool:
    """Whether ``text`` names ``value`` (normalised, fuzzily: "Virgin Media" in "...with virgin media.").
    A label's gloss in brackets is for the reader: "Tiger (tabby cat)" is named by "Tiger". A value
    is named too when each of its words is, in any order and inflection ("swimming" by "swims",
    "Reolink camera" by "the camera for a Reolink"), unless it says none ("no dog"): its words alone
    would then name the old value."""
    t = normalise(text)
    values = {normalise(value), normalise(_GLOSS.sub("", value))}
    if any(v and fuzz.partial_ratio(v, t) >= 90 for v in values):
        return True
    said = {_stem(w) for w in _VALUE_WORD.findall(t)}
    for v in values:
        words = [w for w in _VALUE_WORD.findall(v) if w not in _VALUE_STOP]
        if words and not _NONE.search(v) and all(_stem(w) in said for w in words):
            return True
    return False


_VALUE_WORD = re.compile(r"[a-z0-9]+")
_VALUE_STOP = frozenset("a an the of at in on to for and or with my our his her their".split())
_NONE = re.compile(r"\b(?:no|not|none|never|without|nothing|nobody|ex|separated|stopped|quit|gave up)\b")


def _stem(word: str) -> str:
    """``word`` without an inflection: "swims", "swimming" and "swim" are one stem."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiousl":
        word = word[:-1]  # "swimm" (from "swimming") is "swim"
    return word


@dataclass(frozen=True)
class Hit:
    """A first hit as the scoring sees it: its text and the statements (dataset ids) it comes from."""

    text: str
    sources: frozenset[str]


def right_answer(hit: Hit | None, *, expected: str, other: str | None, expected_from: Iterable[str]) -> bool:
    """The first hit answers with ``expected``: it names it, or it comes from a statement of
    ``expected_from`` and does not name ``other`` alone."""
    if hit is None:
        return False
    if value_in(expected, hit.text):
        return True
    return bool(hit.sources & set(expected_from)) and not (other and value_in(other, hit.text))


def _ratio(n: float, d: float) -> float | None:
    return round(n / d, 3) if d else None


def _at(day) -> datetime:
    return datetime(day.year, day.month, day.day, 10, 0, tzinfo=UTC)


def _facts(subject) -> list[dict[str, Any]]:
    return [f for f in subject_export(subject=subject)["memories"]["semantic"] if f.get("source") == "consolidation"]


def superseding_pairs(facts: list[dict[str, Any]], turn_of: dict[str, str]) -> list[tuple[str, str, str, dict]]:
    """Every supersession among ``facts`` as (old statement, new statement, kind, new fact), one per
    pair of dataset ids the old and new facts cite."""
    by_id = {f["id"]: f for f in facts}
    out = []
    for new in facts:
        for old_id in new.get("supersedes") or []:
            old = by_id.get(old_id)
            if old is None:
                continue
            for o in {turn_of.get(i, i) for i in old.get("supporting_episode_ids") or []}:
                for n in {turn_of.get(i, i) for i in new.get("supporting_episode_ids") or []}:
                    if o != n:
                        out.append((o, n, new.get("contradiction") or "natural", new))
    return out


# The weights of a stale episode the question figures are also computed at (``weights_grid``):
# (RankingConfig.superseded_weight, RankingConfig.past_boost).
WEIGHTS = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05)
BOOSTS = (0.0, 0.5, 1.0, 2.0, 4.0)
POOL = 50


@dataclass(frozen=True)
class Asked:
    """One question's first POOL hits: each one's score without the stale-episode factor, whether
    it is a stale episode, whether it answers right; and whether the question asks about the past."""

    group: str
    kind: str  # now | before | kept
    base: tuple[float, ...]
    stale: tuple[bool, ...]
    right: tuple[bool, ...]
    past: bool

    def first_right(self, weight: float, boost: float) -> bool:
        if not self.base:
            return False
        factor = (1.0 + boost) if self.past else weight
        scores = [b * (factor if st else 1.0) for b, st in zip(self.base, self.stale, strict=True)]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return self.right[best]


def _ranked(subject, question: str, *, now: datetime, turn_of: dict[str, str]) -> list[tuple[dict, Hit]]:
    hits = memory_recall(subject=subject, query=question, k=POOL, now=now, explain=True)
    out = []
    for h in hits:
        ids = [h["id"], *(h.get("supporting_episode_ids") or [])]
        out.append((h, Hit(text=h["text"], sources=frozenset(turn_of.get(i, i) for i in ids))))
    return out


def _asked(ranked: list[tuple[dict, Hit]], *, group: str, kind: str, right: Callable[[Hit], bool],
           question: str, now: datetime) -> Asked:
    base, stale = [], []
    for h, _ in ranked:
        multipliers = h["explain"]["multipliers"]
        factor = multipliers.get("superseded", 1.0) * multipliers.get("was_true", 1.0)
        base.append(h["score"] / factor if factor else h["score"])
        stale.append(h["explain"].get("superseded_fact", {}).get("as") == "told")
    return Asked(group=group, kind=kind, base=tuple(base), stale=tuple(stale),
                 right=tuple(right(hit) for _, hit in ranked), past=query_asks_past(question, now=now, tz=None))


def weights_grid(asked: list[Asked]) -> dict[str, dict[str, float | None]]:
    """The share right first per question kind at each (weight, boost) of the grid."""
    out = {}
    for weight in WEIGHTS:
        for boost in BOOSTS:
            shares = {}
            for kind in ("now", "before", "kept"):
                of = [a for a in asked if a.kind == kind]
                shares[kind] = _ratio(sum(a.first_right(weight, boost) for a in of), len(of))
            out[f"{weight}/{boost}"] = shares
    return out


def cross_validated(asked: list[Asked]) -> dict[str, Any]:
    """Leave one group (conversation) out: the (weight, boost) that gets most questions right
    first on the other groups (ties: the gentlest), scored on the one left out."""
    groups = sorted({a.group for a in asked})
    folds = {}
    right = total = 0
    for held in groups:
        train = [a for a in asked if a.group != held]
        test = [a for a in asked if a.group == held]
        weight, boost = max(((w, b) for w in WEIGHTS for b in BOOSTS),
                            key=lambda wb: (sum(a.first_right(*wb) for a in train), wb[0], -wb[1]))
        got = sum(a.first_right(weight, boost) for a in test)
        folds[held] = {"weight": weight, "boost": boost, "right": got, "asked": len(test)}
        right, total = right + got, total + len(test)
    return {"folds": folds, "held_out_share": _ratio(right, total)}


def _empty() -> dict[str, float]:
    return defaultdict(float)


def evaluate_changes(*, changes: ChangeSet | None = None, extractor: str | None = None,
                     log: Callable[[str], None] = print, only: Iterable[str] = ()) -> dict[str, Any]:
    """Score the labelled set (``only``: entry ids to keep, for a quick look). Returns the figures,
    per slot family, and every entry behind a shortfall under ``findings``."""
    changes = changes or load_changes(CHANGES)
    keep = set(only)
    entries = [e for e in _entries(changes) if not keep or e.id in keep]
    by_user: dict[str, list[Change | NonChange]] = defaultdict(list)
    for entry in entries:
        by_user[entry.user].append(entry)
    totals: dict[str, float] = _empty()
    families: dict[str, dict[str, float]] = defaultdict(_empty)
    findings: dict[str, list[str]] = defaultdict(list)
    asked: list[Asked] = []
    with sandbox(label="changes") as box:
        tenant = box.tenant(slug="changes", name="Changes eval")
        for n, (user, own) in enumerate(sorted(by_user.items())):
            subject = subject_get_or_create(tenant=tenant, external_id=f"u{n}", display_name=user, actor="eval",
                                            lifetimes=KeyLifetimes.from_settings())
            statements: dict[str, tuple[Any, str]] = {}
            for entry in own:  # a statement shared by two steps of a chain is one episode
                for which in (entry.earlier, entry.later):
                    statements.setdefault(which.text, (which.date, f"statement-{len(statements):03d}"))
            sid = {text: s for text, (_, s) in statements.items()}
            turn_of: dict[str, str] = {}
            for text, (day, statement_id) in sorted(statements.items(), key=lambda kv: kv[1][0]):
                turn_of |= import_by_client_id(subject=subject, episodes=[
                    {"id": statement_id, "text": text, "occurred_at": _at(day).isoformat()}])
                consolidate_all(subject=subject, extractor=extractor)
                for entry in own:
                    if entry.later.text == text:
                        _score_entry(entry, subject=subject, sid=sid, turn_of=turn_of, totals=totals,
                                     family=families[entry.family], findings=findings, asked=asked)
            if n % 25 == 0:
                log(f"  {n + 1}/{len(by_user)} end-users")
    return {"extractor": extractor or "default", **labelled_figures(totals),
            "families": {f: labelled_figures(t) for f, t in sorted(families.items())},
            "weights": weights_grid(asked), "counts": dict(totals), "findings": dict(findings)}


def _score_entry(entry: Change | NonChange, *, subject, sid: dict[str, str], turn_of: dict[str, str],
                 totals: dict[str, float], family: dict[str, float], findings: dict[str, list[str]],
                 asked: list[Asked]) -> None:
    facts = _facts(subject)
    early, late = sid[entry.earlier.text], sid[entry.later.text]
    links = [p for p in superseding_pairs(facts, turn_of) if p[0] == early and p[1] == late]
    now = _at(entry.later.date) + QUESTION_DELAY
    for bucket in (totals, family):
        bucket["pairs_superseded"] += bool(links)
    if isinstance(entry, Change):
        ranked_now = _ranked(subject, entry.question_now, now=now, turn_of=turn_of)
        ranked_before = _ranked(subject, entry.question_before, now=now, turn_of=turn_of)
        hit_now = ranked_now[0][1] if ranked_now else None
        hit_before = ranked_before[0][1] if ranked_before else None
        now_ok = right_answer(hit_now, expected=entry.new_value, other=entry.old_value, expected_from=[late])
        before_ok = right_answer(hit_before, expected=entry.old_value, other=entry.new_value, expected_from=[early])
        asked.append(_asked(ranked_now, group=entry.family, kind="now", question=entry.question_now, now=now,
                            right=lambda h: right_answer(h, expected=entry.new_value, other=entry.old_value,
                                                         expected_from=[late])))
        asked.append(_asked(ranked_before, group=entry.family, kind="before", question=entry.question_before,
                            now=now, right=lambda h: right_answer(h, expected=entry.old_value, other=entry.new_value,
                                                                  expected_from=[early])))
        kind_ok = bool(links) and any(k == entry.kind for _, _, k, _ in links)
        for bucket in (totals, family):
            bucket["changes"] += 1
            bucket["changes_superseded"] += bool(links)
            bucket["kind_right"] += kind_ok
            bucket["now_right"] += now_ok
            bucket["before_right"] += before_ok
        if not links:
            findings["missed"].append(f"{entry.id} [{entry.slot}/{entry.phrasing}] {entry.later.text}")
        elif not kind_ok:
            findings["wrong_kind"].append(f"{entry.id} ({entry.kind}) {entry.later.text}")
        if not now_ok:
            findings["now_wrong"].append(f"{entry.id} {entry.question_now} -> {hit_now.text if hit_now else None}")
        if not before_ok:
            findings["before_wrong"].append(
                f"{entry.id} {entry.question_before} -> {hit_before.text if hit_before else None}")
    else:
        ranked = _ranked(subject, entry.question, now=now, turn_of=turn_of)
        hit = ranked[0][1] if ranked else None
        kept = right_answer(hit, expected=entry.value, other=None, expected_from=[early])
        asked.append(_asked(ranked, group=entry.family, kind="kept", question=entry.question, now=now,
                            right=lambda h: right_answer(h, expected=entry.value, other=None, expected_from=[early])))
        for bucket in (totals, family):
            bucket["non_changes"] += 1
            bucket["non_changes_superseded"] += bool(links)
            bucket["kept_right"] += kept
        if links:
            findings["false_supersession"].append(
                f"{entry.id} [{entry.trap}] {entry.later.text} => {links[0][3]['text']}")
        if not kept:
            findings["kept_wrong"].append(f"{entry.id} {entry.question} -> {hit.text if hit else None}")


def labelled_figures(t: dict[str, float]) -> dict[str, Any]:
    return {"changes": int(t["changes"]), "non_changes": int(t["non_changes"]),
            "precision": _ratio(t["changes_superseded"], t["pairs_superseded"]),
            "recall": _ratio(t["changes_superseded"], t["changes"]),
            "kind_right": _ratio(t["kind_right"], t["changes_superseded"]),
            "false_supersession_rate": _ratio(t["non_changes_superseded"], t["non_changes"]),
            "now_first": _ratio(t["now_right"], t["changes"]),
            "before_first": _ratio(t["before_right"], t["changes"]),
            "kept_first": _ratio(t["kept_right"], t["non_changes"])}


# ------------------------------------------------------------------------------- LoCoMo dev

def _dia(raw: str) -> str:
    return raw.split(":", 1)[0].upper() + ":" + raw.split(":", 1)[1] if ":" in raw else raw


def locomo_sessions(conversation: str, data: dict) -> list[list[dict[str, Any]]]:
    """The conversation's turns as episodes, one list per session in order, each speaker's turn
    labelled with its name ("Caroline: ...") like the LoCoMo import does."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    for episode in locomo_episodes(conversation, data):
        sessions.setdefault(episode["session_id"], []).append(episode)
    return list(sessions.values())


def evaluate_changes_locomo(*, paths: list[Path], labels: DevChangeSet | None = None, extractor: str | None = None,
                            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Per conversation and in all: supersessions made, those a labelled change accounts for,
    labelled changes found, non-changes superseded, and the first hit of each question."""
    labels = labels or load_locomo_changes()
    report: dict[str, Any] = {"extractor": extractor or "default", "conversations": {}}
    total: dict[str, float] = _empty()
    findings: dict[str, list[str]] = defaultdict(list)
    asked: list[Asked] = []
    with sandbox(label="changes-locomo") as box:
        tenant = box.tenant(slug="changes-locomo", name="Changes eval (LoCoMo)")
        for path in paths:
            conversation = path.stem
            data = json.loads(path.read_text())
            subject = subject_get_or_create(tenant=tenant, external_id=f"conv-{conversation}", actor="eval",
                                            lifetimes=KeyLifetimes.from_settings())
            turn_of: dict[str, str] = {}
            sessions = locomo_sessions(conversation, data)
            own = [c for c in labels.changes if c.conversation == conversation]
            own_non = [c for c in labels.non_changes if c.conversation == conversation]
            t: dict[str, float] = _empty()
            for episodes in sessions:
                stored = import_by_client_id(subject=subject, episodes=[
                    {**e, "occurred_at": e["occurred_at"].isoformat()} for e in episodes])
                turn_of |= {memory_id: _dia(e["metadata"]["dia_id"]) for memory_id, e
                            in zip(stored, episodes, strict=True)}
                consolidate_all(subject=subject, extractor=extractor)
                last = {_dia(e["metadata"]["dia_id"]) for e in episodes}
                now = max(e["occurred_at"] for e in episodes) + QUESTION_DELAY
                for change in own:
                    if change.later_turn in last:  # asked once the session of the later turn is in
                        _dev_questions(change, subject=subject, now=now, turn_of=turn_of, t=t, findings=findings,
                                       asked=asked)
            pairs = superseding_pairs(_facts(subject), turn_of)
            made = {(o, n) for o, n, _, _ in pairs}
            links_made = {new["id"] + ">" + o for o, _, _, new in pairs}
            right = set()
            for change in own:
                olds = {change.earlier_turn, *change.old_also}
                news = {change.later_turn, *change.new_also}
                found = {(o, n) for o, n in made if o in olds and n in news}
                right |= found
                t["changes"] += 1
                t["changes_found"] += bool(found)
                if not found:
                    findings["missed"].append(f"{change.id} {change.speaker} {change.slot} "
                                              f"{change.earlier_turn}->{change.later_turn}")
            for non in own_non:
                bad = (non.earlier_turn, non.later_turn) in made
                t["non_changes"] += 1
                t["non_changes_superseded"] += bad
                if bad:
                    findings["false_supersession"].append(f"{non.id} {non.earlier_turn}->{non.later_turn}")
            # One supersession (a new fact replacing an old one) is right when some pair of turns it
            # links is a labelled change's.
            by_link: dict[str, bool] = {}
            for o, n, _, new in pairs:
                key = new["id"] + ">" + o
                by_link[key] = by_link.get(key, False) or (o, n) in right
            t["supersessions"] += len(by_link)
            t["supersessions_right"] += sum(by_link.values())
            for o, n, _, new in pairs:
                if not by_link[new["id"] + ">" + o]:
                    findings["unlabelled_supersession"].append(f"{conversation} {o}->{n}: {new['text']}")
                    by_link[new["id"] + ">" + o] = True  # listed once
            report["conversations"][path.name] = dev_figures(t)
            for key, value in t.items():
                total[key] += value
            log(f"  {path.name}: {dev_figures(t)} ({len(links_made)} links)")
    report["all"] = dev_figures(total)
    report["weights"] = weights_grid(asked)
    report["cross_validated"] = cross_validated(asked)
    report["findings"] = dict(findings)
    return report


def _dev_questions(change, *, subject, now: datetime, turn_of: dict[str, str], t: dict[str, float],
                   findings: dict[str, list[str]], asked: list[Asked]) -> None:
    olds = {change.earlier_turn, *change.old_also}
    news = {change.later_turn, *change.new_also}
    ranked_now = _ranked(subject, change.question_now, now=now, turn_of=turn_of)
    ranked_before = _ranked(subject, change.question_before, now=now, turn_of=turn_of)
    hit_now = ranked_now[0][1] if ranked_now else None
    hit_before = ranked_before[0][1] if ranked_before else None
    now_ok = hit_now is not None and bool(hit_now.sources & news)
    before_ok = hit_before is not None and bool(hit_before.sources & olds) and not (hit_before.sources & news)
    asked.append(_asked(ranked_now, group=change.conversation, kind="now", question=change.question_now, now=now,
                        right=lambda h: bool(h.sources & news)))
    asked.append(_asked(ranked_before, group=change.conversation, kind="before", question=change.question_before,
                        now=now, right=lambda h: bool(h.sources & olds) and not (h.sources & news)))
    t["now_right"] += now_ok
    t["before_right"] += before_ok
    t["asked"] += 1
    if not now_ok:
        findings["now_wrong"].append(f"{change.id} {change.question_now} -> {hit_now.text[:90] if hit_now else None}")
    if not before_ok:
        findings["before_wrong"].append(
            f"{change.id} {change.question_before} -> {hit_before.text[:90] if hit_before else None}")


def dev_figures(t: dict[str, float]) -> dict[str, Any]:
    return {"changes": int(t["changes"]), "supersessions": int(t["supersessions"]),
            "precision": _ratio(t["supersessions_right"], t["supersessions"]),
            "recall": _ratio(t["changes_found"], t["changes"]),
            "non_changes_superseded": int(t["non_changes_superseded"]),
            "now_first": _ratio(t["now_right"], t["asked"]), "before_first": _ratio(t["before_right"], t["asked"])}


# ------------------------------------------------------------------------ offline, for tuning

def detect_offline(*, changes: ChangeSet | None = None, extractor: str | None = None,
                   linking: ChangeLinking | None = None, only: Iterable[str] = ()) -> dict[str, Any]:
    """Supersession precision and recall on the labelled set without the services: the same
    extractor, change reading and ``facts_plan`` as a run, each end-user's facts kept in memory and
    every one of them its candidates' neighbour (a labelled end-user has a handful; a run's kNN
    returns its ten nearest). Seconds instead of minutes, for choosing the linking's thresholds;
    the figures a doc reports come from ``evaluate_changes``."""
    changes = changes or load_changes(CHANGES)
    linking = linking or ChangeLinking.from_settings()
    keep = set(only)
    entries = [e for e in _entries(changes) if not keep or e.id in keep]
    by_user: dict[str, list[Change | NonChange]] = defaultdict(list)
    for entry in entries:
        by_user[entry.user].append(entry)
    embedder = get_embedder()
    extractor_obj = get_extractor(extractor, options=ExtractorOptions.from_settings())
    totals: dict[str, float] = _empty()
    families: dict[str, dict[str, float]] = defaultdict(_empty)
    findings: dict[str, list[str]] = defaultdict(list)
    for user, own in sorted(by_user.items()):
        statements: dict[str, tuple[Any, str]] = {}
        for entry in own:
            for which in (entry.earlier, entry.later):
                statements.setdefault(which.text, (which.date, f"statement-{len(statements):03d}"))
        links = offline_links([(sid, text, _at(day).isoformat()) for text, (day, sid)
                               in sorted(statements.items(), key=lambda kv: kv[1][0])],
                              extractor_obj=extractor_obj, embedder=embedder, linking=linking, display_name=user)
        for entry in own:
            early, late = statements[entry.earlier.text][1], statements[entry.later.text][1]
            found = [(k, text) for o, n, k, text in links if o == early and n == late]
            for bucket in (totals, families[entry.family]):
                bucket["pairs_superseded"] += bool(found)
                if isinstance(entry, Change):
                    bucket["changes"] += 1
                    bucket["changes_superseded"] += bool(found)
                    bucket["kind_right"] += any(k == entry.kind for k, _ in found)
                else:
                    bucket["non_changes"] += 1
                    bucket["non_changes_superseded"] += bool(found)
            if isinstance(entry, Change) and not found:
                findings["missed"].append(f"{entry.id} [{entry.slot}/{entry.phrasing}] {entry.earlier.text} || "
                                          f"{entry.later.text}")
            elif isinstance(entry, Change) and not any(k == entry.kind for k, _ in found):
                findings["wrong_kind"].append(f"{entry.id} ({entry.kind}) {entry.later.text}")
            elif isinstance(entry, NonChange) and found:
                findings["false_supersession"].append(f"{entry.id} [{entry.trap}] {entry.earlier.text} || "
                                                      f"{entry.later.text} => {found[0][1]}")
    figures = {k: v for k, v in labelled_figures(totals).items() if "first" not in k}
    return {**figures, "families": {f: labelled_figures(t) for f, t in sorted(families.items())},
            "findings": dict(findings)}


def offline_links(statements: list[tuple[str, str, str]], *, extractor_obj, embedder, linking: ChangeLinking,
                  display_name: str, neighbours_k: int | None = None) -> list[tuple[str, str, str, str]]:
    """Consolidate ``statements`` ((id, text, occurred_at), in order, one run each) in memory;
    every supersession made as (old statement, new statement, kind, new fact's text).
    ``neighbours_k``: each candidate's neighbours are the stored facts of its ``neighbours_k``
    highest cosines (None: all)."""
    return offline_runs([[s] for s in statements], extractor_obj=extractor_obj, embedder=embedder, linking=linking,
                        display_name=display_name, neighbours_k=neighbours_k)


def offline_runs(runs: list[list[tuple[str, str, str]]], *, extractor_obj, embedder, linking: ChangeLinking,
                 display_name: str, neighbours_k: int | None = None, memo: dict | None = None
                 ) -> list[tuple[str, str, str, str]]:
    """``offline_links`` with several episodes per run (a LoCoMo session). ``memo``: extractions
    and vectors kept across calls (the same runs scored at other thresholds)."""
    memo = {} if memo is None else memo
    duplicates = Duplicates.from_settings()
    scope = {"tenant_id": "offline", "user_id": display_name}
    current: dict[str, tuple[StoredFact, Any]] = {}
    support: dict[str, set[str]] = {}
    out = []
    for run in runs:
        episodes = [Episode(id=i, text=text, occurred_at=at) for i, text, at in run]
        by_id = {e.id: e for e in episodes}
        key = (tuple(run), display_name)
        # Named as consolidation names the end-user (services.user_name: the display name, else "the user").
        name = " ".join(display_name.split()) or "the user"
        extraction = memo.get(key) or memo.setdefault(key, extractor_obj.extract(episodes=episodes, context=[],
                                                                                 user_name=name))
        grounded = []
        for c in extraction.facts:
            texts = [episode_evidence(by_id[i].text, by_id[i].occurred_at) for i in c.episode_ids if i in by_id]
            if texts and is_grounded(c.text, [*texts, name]):  # as services._plan grounds them
                grounded.append(c)
        facts, probes, _ = changes_read(facts=grounded, new_episodes=episodes, episodes=by_id,
                                        display_name=display_name)
        if not facts:
            continue
        missing = [c.text for c in facts if c.text not in memo]
        for text, vector in zip(missing, embedder.embed_documents(missing) if missing else [], strict=True):
            memo[text] = vector
        vectors = [memo[c.text] for c in facts]
        neighbours = []
        stored = list(current.values())
        cosines = (np.asarray(vectors, dtype=float) @ np.asarray([v for _, v in stored], dtype=float).T
                   if stored else np.zeros((len(vectors), 0)))
        for row, c in zip(cosines, facts, strict=True):
            order = list(np.argsort(-row)[:neighbours_k] if neighbours_k else np.argsort(-row))
            # the run's lexical leg, for the words a change's search adds (``changes.neighbour_text``)
            added = set(words_of(changes.neighbour_text(c.text, probes.get(_probe_key(c)))[len(c.text):]))
            order += [i for i in range(len(stored)) if i not in order and added & set(words_of(stored[i][0].text))]
            neighbours.append([replace(stored[i][0], cosine=float(row[i]), supporting_episode_ids=list(
                support[stored[i][0].id])) for i in order])
        new_ids = [fact_id(scope, c) for c in facts]
        actions = facts_plan(facts=facts, new_ids=new_ids, neighbours=neighbours, vectors=vectors,
                             existing={i for i in new_ids if i in current}, probes=probes,
                             episodes=by_id, display_name=display_name, linking=linking, duplicates=duplicates)
        for action, vector in zip(actions, vectors, strict=True):
            candidate = action.candidate
            if action.kind in ("create", "supersede"):
                topics = tuple(action.change["topics"]) if action.change else ()
                current[action.memory_id] = (StoredFact(id=action.memory_id, text=candidate.text, slot=action.slot,
                                                        value=candidate.value, topics=topics,
                                                        valid_from=action.valid_from), vector)
                support[action.memory_id] = set(candidate.episode_ids)
                for old in action.supersedes:
                    if old in current:
                        for o in support[old]:
                            for n in candidate.episode_ids:
                                if n != o:
                                    why = action.change or {}
                                    out.append((o, n, action.contradiction,
                                                f"{candidate.text} [{why.get('cue')}, by {why.get('by')}: "
                                                f"{' '.join(why.get('shared') or ())} | {current[old][0].text}]"))
                        current.pop(old)
            elif action.kind == "merge" and action.memory_id in support:
                support[action.memory_id] |= set(candidate.episode_ids)
    return out


def detect_offline_locomo(*, paths: list[Path], labels: DevChangeSet | None = None, extractor: str | None = None,
                          linking: ChangeLinking | None = None, neighbours_k: int = 10, memo: dict | None = None
                          ) -> dict[str, Any]:
    """``evaluate_changes_locomo``'s supersession figures without the services (each session one
    run; a candidate's neighbours: the ``neighbours_k`` stored facts nearest by vector)."""
    labels = labels or load_locomo_changes()
    linking = linking or ChangeLinking.from_settings()
    embedder = get_embedder()
    extractor_obj = get_extractor(extractor, options=ExtractorOptions.from_settings())
    report: dict[str, Any] = {"conversations": {}, "findings": defaultdict(list)}
    total: dict[str, float] = _empty()
    for path in paths:
        conversation = path.stem
        runs = [[(_dia(e["metadata"]["dia_id"]), e["text"], e["occurred_at"].isoformat()) for e in session]
                for session in locomo_sessions(conversation, json.loads(path.read_text()))]
        links = offline_runs(runs, extractor_obj=extractor_obj, embedder=embedder, linking=linking, display_name="",
                             neighbours_k=neighbours_k, memo=memo)
        t = dev_score(links, [c for c in labels.changes if c.conversation == conversation],
                      [c for c in labels.non_changes if c.conversation == conversation], report["findings"],
                      conversation=conversation)
        report["conversations"][path.name] = dev_figures(t)
        for key, value in t.items():
            total[key] += value
    report["all"] = dev_figures(total)
    report["findings"] = dict(report["findings"])
    return report


def dev_score(links: list[tuple[str, str, str, str]], changes: list, non_changes: list,
              findings: dict[str, list[str]], *, conversation: str) -> dict[str, float]:
    """Supersession figures of one conversation from its links (old turn, new turn, kind, new
    fact's text): a supersession (one new fact's text replacing facts of one old turn) is right
    when a labelled change links those turns."""
    t: dict[str, float] = _empty()
    made = {(o, n) for o, n, _, _ in links}
    right = set()
    for change in changes:
        olds, news = {change.earlier_turn, *change.old_also}, {change.later_turn, *change.new_also}
        found = {(o, n) for o, n in made if o in olds and n in news}
        right |= found
        t["changes"] += 1
        t["changes_found"] += bool(found)
        if not found:
            findings["missed"].append(f"{change.id} {change.speaker} {change.slot} {change.earlier_turn}->"
                                      f"{change.later_turn}")
    for non in non_changes:
        bad = (non.earlier_turn, non.later_turn) in made
        t["non_changes"] += 1
        t["non_changes_superseded"] += bad
    by_link: dict[tuple[str, str], bool] = {}
    for o, n, _, text in links:
        by_link[(o, text)] = by_link.get((o, text), False) or (o, n) in right
    t["supersessions"] += len(by_link)
    t["supersessions_right"] += sum(by_link.values())
    for (o, text), ok in by_link.items():
        if not ok:
            findings["unlabelled_supersession"].append(f"{conversation} {o}: {text}")
    return t


LINKING_GRID = tuple(ChangeLinking(min_topic_cosine=t, min_cosine=v) for t in (0.25, 0.35, 0.45, 0.6)
                     for v in (0.55, 0.65, 0.75, 1.01))


def linking_cross_validated(*, paths: list[Path], labels: DevChangeSet | None = None,
                            grid: Iterable[ChangeLinking] = LINKING_GRID) -> dict[str, Any]:
    """Leave one dev conversation out: on the other three, the thresholds with the most right
    supersessions minus wrong ones (ties: the stricter), scored on the one left out (offline)."""
    memo: dict = {}
    grid = list(grid)
    per: dict[tuple[float, float], dict[str, dict[str, Any]]] = {}
    for linking in grid:
        report = detect_offline_locomo(paths=paths, labels=labels, linking=linking, memo=memo)
        per[(linking.min_topic_cosine, linking.min_cosine)] = report["conversations"]

    def net(figures: dict[str, Any]) -> float:
        right = round((figures["precision"] or 0) * figures["supersessions"])
        return right - (figures["supersessions"] - right)

    folds = {}
    for path in paths:
        others = [p.name for p in paths if p != path]
        best = max(per, key=lambda key: (sum(net(per[key][o]) for o in others), key[0], key[1]))
        folds[path.name] = {"min_topic_cosine": best[0], "min_cosine": best[1], **per[best][path.name]}
    overall = max(per, key=lambda key: (sum(net(per[key][p.name]) for p in paths), key[0], key[1]))
    return {"folds": folds, "chosen_on_all": {"min_topic_cosine": overall[0], "min_cosine": overall[1]},
            "grid": {f"{t}/{v}": figures for (t, v), figures in per.items()}}


def _entries(changes: Any) -> list[Change | NonChange]:
    """The labelled changes and non-changes as one list (one type for both)."""
    return [*changes.changes, *changes.non_changes]
