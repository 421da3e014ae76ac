"""Resolution: what each grounded candidate does to what is stored.

A fact candidate merges into a stored fact of the same slot and value (or nearly the same words),
supersedes one of the same slot with another value or one it names as replaced, or is created.
A playbook candidate counts an outcome on a playbook with a matching trigger, or a success
proposes a new one. Ids derive from the end-user and the candidate, so a rerun writes once."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dateutil import parser as date_parser
from django.conf import settings
from rapidfuzz import fuzz

from memory_app.consolidation.extractors import FactCandidate, PlaybookCandidate
from memory_app.consolidation.extractors.rules import infer_slot

_MONTHS = {m: n for n, names in enumerate([("jan", "january"), ("feb", "february"), ("mar", "march"),
                                           ("apr", "april"), ("may",), ("jun", "june"), ("jul", "july"),
                                           ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"),
                                           ("nov", "november"), ("dec", "december")], start=1) for m in names}
_DEFAULT_DATE = datetime(1900, 1, 1)


def deterministic_id(kind: str, scope: dict[str, str], *parts: str) -> str:
    digest = hashlib.sha256("\x1f".join([kind, scope["tenant_id"], scope["user_id"], *parts]).encode()).hexdigest()
    return f"c{kind[0]}{digest[:30]}"


def fact_id(scope: dict[str, str], candidate: FactCandidate) -> str:
    return deterministic_id("fact", scope, normalise(candidate.text), *sorted(candidate.episode_ids))


def playbook_id(scope: dict[str, str], candidate: PlaybookCandidate) -> str:
    return deterministic_id("playbook", scope, normalise(candidate.trigger), normalise(candidate.steps),
                            *sorted(candidate.episode_ids))


def normalise(text: str) -> str:
    text = text.lower().replace("favorite", "favourite").replace("color", "colour")
    text = re.sub(r"\b(?:a|an|the|my|user|user's)\b", " ", text)
    return re.sub(r"[^\w]+", " ", text).strip()


_CLOCK = re.compile(r"\b(?P<hour>1[0-2]|0?[1-9])(?::(?P<minute>[0-5]\d))?\s*(?P<half>[ap])\.?m\b\.?", re.I)


def _clock(m: re.Match) -> str:
    """"10pm" → "22:00", "7:30am" → "7:30": a time written on the 24-hour clock."""
    hour = int(m["hour"]) % 12 + (12 if m["half"].lower() == "p" else 0)
    return f"{hour}:{m['minute'] or '00'}"


def quantities(text: str) -> set[str]:
    """Numbers and month names in a text, normalised ("3rd" → 3, "March" → m3): two facts that
    differ here are never duplicates of each other."""
    text = _CLOCK.sub(_clock, text)
    out = {re.sub(r"^0+(?=\d)", "", n) for n in re.findall(r"\d+(?:[.,:]\d+)*", text)}
    out |= {f"m{_MONTHS[w]}" for w in re.findall(r"[a-z]+", text.lower()) if w in _MONTHS and w != "may"}
    return out


def same_value(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    na, nb = normalise(a), normalise(b)
    if quantities(a) != quantities(b):
        return _same_date(a, b)
    if na == nb or fuzz.ratio(na, nb) >= 90:
        return True
    return _same_date(a, b)


def _same_date(a: str, b: str) -> bool:
    # "March 3rd, 1990" and "3 March 1990" are the same date written differently.
    if not (quantities(a) & {f"m{n}" for n in range(1, 13)}) or not (quantities(b) & {f"m{n}" for n in range(1, 13)}):
        return False
    try:
        return date_parser.parse(a, fuzzy=True, default=_DEFAULT_DATE) == \
            date_parser.parse(b, fuzzy=True, default=_DEFAULT_DATE)
    except (ValueError, OverflowError):
        return False


@dataclass
class StoredFact:
    id: str
    text: str
    slot: str | None
    value: str | None
    cosine: float = 0.0  # similarity to the candidate being resolved (kNN), 0 when unknown
    supporting_episode_ids: list[str] = field(default_factory=list)
    in_run: bool = False
    topics: tuple[str, ...] = ()  # the topics of the change that wrote it (memory_app.consolidation.changes)
    valid_from: str | None = None  # when it became true (ISO), when known

    @classmethod
    def from_source(cls, memory_id: str, source: dict[str, Any]) -> StoredFact:
        meta = (source.get("metadata") or {}).get("consolidation") or {}
        slot, value = (meta.get("slot"), meta.get("value")) if meta.get("slot") else infer_slot(source["text"])
        change = meta.get("change") if isinstance(meta.get("change"), dict) else None
        change = change or {}
        topics = tuple(t for t in change.get("topics") or () if isinstance(t, str))
        return cls(id=memory_id, text=source["text"], slot=slot, value=value,
                   supporting_episode_ids=list(source.get("supporting_episode_ids") or []), topics=topics,
                   valid_from=source.get("valid_from") if isinstance(source.get("valid_from"), str) else None)


@dataclass
class FactAction:
    kind: str  # create | merge | supersede | exists
    candidate: FactCandidate
    memory_id: str  # the new fact (create, supersede, exists) or the fact merged into (merge)
    supersedes: list[str] = field(default_factory=list)
    contradiction: str = "natural"
    target_text: str | None = None  # merge: the fact merged into; supersede: the first fact replaced
    slot: str | None = None
    change: dict[str, Any] | None = None  # a change found in natural phrasing: its cue, link and topics
    valid_from: str | None = None  # the earliest date of its turns: when it became true

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.kind, "id": self.memory_id, "text": self.candidate.text, "slot": self.slot,
                "supporting_episode_ids": list(self.candidate.episode_ids), "supersedes": self.supersedes,
                "contradiction": self.contradiction if self.supersedes else None, "target_text": self.target_text,
                **({"change": self.change} if self.change else {})}


@dataclass
class PlaybookAction:
    kind: str  # create | outcome
    candidate: PlaybookCandidate
    playbook_id: str
    target_trigger: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.kind, "id": self.playbook_id, "trigger": self.candidate.trigger,
                "steps": self.candidate.steps, "outcome": self.candidate.outcome,
                "supporting_episode_ids": list(self.candidate.episode_ids), "target_trigger": self.target_trigger}


@dataclass(frozen=True)
class Duplicates:
    """When a candidate is a stored fact said again (ENGRAM_CONSOLIDATION_MERGE_COSINE, _DUPLICATE_LEXICAL,
    _DUPLICATE_COSINE; config/settings/base.py explains each), as read at a run's entry."""

    merge_cosine: float
    lexical: float
    cosine: float

    @classmethod
    def from_settings(cls) -> Duplicates:
        return cls(merge_cosine=settings.ENGRAM_CONSOLIDATION_MERGE_COSINE,
                   lexical=settings.ENGRAM_CONSOLIDATION_DUPLICATE_LEXICAL,
                   cosine=settings.ENGRAM_CONSOLIDATION_DUPLICATE_COSINE)


def resolve_fact(candidate: FactCandidate, *, new_id: str, neighbours: list[StoredFact], exists: bool,
                 duplicates: Duplicates) -> FactAction:
    """Decide one candidate against its neighbours (stored and earlier in this run)."""
    if exists:  # an earlier attempt of this very candidate landed: only its supersession may be missing
        return FactAction(kind="exists", candidate=candidate, memory_id=new_id, slot=candidate.slot)
    slot = candidate.slot
    duplicate: StoredFact | None = None
    replaced: list[StoredFact] = []
    for fact in neighbours:
        if fact.id == new_id:
            continue
        if slot and fact.slot == slot:
            if same_value(candidate.value, fact.value):
                duplicate = duplicate or fact
            else:
                replaced.append(fact)
            continue
        if candidate.replaces and fact.value and same_value(candidate.replaces, fact.value):
            replaced.append(fact)
            slot = slot or fact.slot
            continue
        if (slot is None or fact.slot is None) and _near_duplicate(candidate.text, fact, duplicates):
            duplicate = duplicate or fact
    if candidate.supersedes:
        # The extractor named the facts this replaces (an LLM shown the stored facts): its word stands.
        named = [f for f in neighbours if f.id in candidate.supersedes]
        contradiction = _contradiction(candidate.change)
        return FactAction(kind="supersede", candidate=candidate, memory_id=new_id,
                          supersedes=list(dict.fromkeys([*candidate.supersedes, *(f.id for f in replaced)])),
                          contradiction=contradiction, target_text=named[0].text if named else None,
                          slot=slot or (named[0].slot if named else None))
    if duplicate is not None:
        return FactAction(kind="merge", candidate=candidate, memory_id=duplicate.id, target_text=duplicate.text,
                          slot=duplicate.slot or slot)
    if replaced:
        contradiction = _contradiction(candidate.change)
        return FactAction(kind="supersede", candidate=candidate, memory_id=new_id,
                          supersedes=list(dict.fromkeys(f.id for f in replaced)), contradiction=contradiction,
                          target_text=replaced[0].text, slot=slot)
    return FactAction(kind="create", candidate=candidate, memory_id=new_id, slot=slot)


def _contradiction(change: str | None) -> str:
    """The supersession's kind: a correction (harsh), a plan that came true (fulfilled), else a change."""
    return change if change in ("harsh", "fulfilled") else "natural"


def _near_duplicate(text: str, fact: StoredFact, duplicates: Duplicates) -> bool:
    if quantities(text) != quantities(fact.text):
        return False  # never merge facts whose numbers or dates differ
    if fact.cosine >= duplicates.merge_cosine:
        return True  # the seeds' rule: this similar to a live fact, whoever wrote it, is that fact
    lexical = fuzz.token_set_ratio(normalise(text), normalise(fact.text))
    if lexical < duplicates.lexical:
        return False
    # Same words in the same run need no vector to confirm; stored facts need the kNN to agree too.
    return fact.in_run or fact.cosine >= duplicates.cosine


@dataclass
class StoredPlaybook:
    id: str
    trigger: str
    steps: str
    cosine: float = 0.0
    supporting_episode_ids: list[str] = field(default_factory=list)


def _steps(text: str) -> str:
    return normalise(re.sub(r"(?m)^\s*\d+[.)]\s*", "", text))


def _same_thread(candidate: PlaybookCandidate, playbook: StoredPlaybook) -> bool:
    """Whether an outcome belongs to a stored playbook: it cites a turn of the playbook's own
    thread (its problem or a step), or it reports the playbook's steps tried again."""
    if set(candidate.episode_ids) & set(playbook.supporting_episode_ids):
        return True
    return bool(candidate.steps.strip()) and fuzz.token_set_ratio(_steps(candidate.steps), _steps(playbook.steps)) >= 80


def resolve_playbook(candidate: PlaybookCandidate, *, new_id: str, neighbours: list[StoredPlaybook]
                     ) -> PlaybookAction | None:
    matches = []  # (score, playbook) of the stored playbooks for the same trouble
    for playbook in neighbours:
        score = fuzz.token_set_ratio(normalise(candidate.trigger), normalise(playbook.trigger))
        if score >= 80 or (score >= 60 and playbook.cosine >= 0.85):
            matches.append((score, playbook))
    if matches:
        if candidate.outcome is None:
            return None
        # The same trouble in another thread, handled otherwise, says nothing of these steps: an
        # outcome goes to the playbook of its own thread, else a success starts a playbook.
        own = [(score, p) for score, p in matches if _same_thread(candidate, p)]
        if own:
            best = max(own, key=lambda m: m[0])[1]
            return PlaybookAction(kind="outcome", candidate=candidate, playbook_id=best.id,
                                  target_trigger=best.trigger)
    if candidate.outcome:
        return PlaybookAction(kind="create", candidate=candidate, playbook_id=new_id)
    return None
