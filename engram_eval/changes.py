"""The labelled changes of issue 69, read into typed entries.

Two sets live in ``corpora/``: ``changes.json`` (sentences written for this project: changes of a
slot's value and non-changes that must not supersede) and ``locomo_changes.json`` (the changes in
the four LoCoMo development conversations, named by turn id). Pure Python: no Django, no settings;
a malformed entry is refused with its id, so a later edit cannot slip a broken label into a score.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from .corpora import CHANGES, LOCOMO_CHANGES

KINDS = ("natural", "harsh", "fulfilled")
VOICES = ("I", "we", "household", "third")
TENSES = ("past", "present_perfect", "present", "future")
TRAPS = ("near_miss", "hypothetical", "other_person", "addition", "same_value", "negated_plan", "negated", "put_off",
         "question", "temporary", "past_reference", "quoted")
# A slot is "family" or "family:qualifier" ("device:router", "relation:partner"). The families follow
# the rules extractor's keys where it has one (employer, occupation, home, car, diet, relation:<role>).
SLOT_FAMILIES = ("employer", "occupation", "home", "relation", "pet", "phone", "car", "device", "setting",
                 "contact", "diet", "school", "hobby", "provider", "health", "plan")
# "plan": a plan that became done ("going camping next month" → "went camping"; kind 'fulfilled') or was
# given up ("decided against the Camino walk"; kind 'natural').
DEV_SLOT_FAMILIES = SLOT_FAMILIES
# The ways of saying a change that the issue names; every one is in the set at least once.
CUE_PHRASINGS = ("replaced", "switched", "swapped_for", "moved_to", "quit", "started_at", "split_up",
                 "passed_away", "adopted", "instead_of", "from_now_on", "changed_to", "no_longer",
                 "not_any_more", "got_rid_of", "upgraded_to", "traded_in", "now_that", "ever_since",
                 "these_days", "used_to_but_now", "correction")
_SLOT = re.compile(r"^[a-z_]+(?::[a-z_]+)?$")
_DIA_ID = re.compile(r"^D\d+:\d+$")
_PHRASING = re.compile(r"^[a-z_]+$")


class ChangeSetError(ValueError):
    """A label that does not fit the schema; the message names the entry."""


@dataclass(frozen=True)
class Statement:
    date: date
    text: str


@dataclass(frozen=True)
class Change:
    """An earlier statement of a slot's value and a later one that replaces it."""

    id: str
    slot: str
    kind: str
    voice: str
    phrasing: str
    tense: str
    user: str
    earlier: Statement
    later: Statement
    old_value: str
    new_value: str
    question_now: str
    question_before: str
    chain: str | None = None
    step: int | None = None

    @property
    def family(self) -> str:
        return self.slot.split(":")[0]


@dataclass(frozen=True)
class NonChange:
    """A later statement that must not supersede the earlier one: ``value`` stays true."""

    id: str
    slot: str
    trap: str
    voice: str
    user: str
    earlier: Statement
    later: Statement
    value: str
    question: str

    @property
    def family(self) -> str:
        return self.slot.split(":")[0]


@dataclass(frozen=True)
class ChangeSet:
    changes: tuple[Change, ...]
    non_changes: tuple[NonChange, ...]

    def chains(self) -> dict[str, list[Change]]:
        """Each chain's changes in step order (A→B, then B→C)."""
        chains: dict[str, list[Change]] = {}
        for change in self.changes:
            if change.chain:
                chains.setdefault(change.chain, []).append(change)
        return {name: sorted(steps, key=lambda c: c.step or 0) for name, steps in chains.items()}


@dataclass(frozen=True)
class DevChange:
    """A change in a LoCoMo conversation: the turn that held the old value and the one that replaced it.
    ``old_also``/``new_also`` name other turns of the speaker that state the same old or new value."""

    id: str
    conversation: str
    speaker: str
    slot: str
    kind: str
    earlier_turn: str
    later_turn: str
    old_value: str
    new_value: str
    question_now: str
    question_before: str
    chain: str | None = None
    step: int | None = None
    old_also: tuple[str, ...] = ()
    new_also: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        return self.slot.split(":")[0]


@dataclass(frozen=True)
class DevNonChange:
    id: str
    conversation: str
    speaker: str
    slot: str
    trap: str
    earlier_turn: str
    later_turn: str
    value: str
    question: str
    why: str


@dataclass(frozen=True)
class DevExclusion:
    """A candidate judged not to be a change, kept with the reason."""

    conversation: str
    speaker: str
    slot: str
    turns: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class DevChangeSet:
    conversations: tuple[str, ...]
    changes: tuple[DevChange, ...]
    non_changes: tuple[DevNonChange, ...]
    excluded: tuple[DevExclusion, ...]


def _keys(entry: dict, name: str, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    required, allowed = set(required), set(required) | set(optional)
    if missing := required - entry.keys():
        raise ChangeSetError(f"{name}: missing {sorted(missing)}")
    if extra := entry.keys() - allowed:
        raise ChangeSetError(f"{name}: unknown {sorted(extra)}")


def _text(entry: dict, key: str, name: str) -> str:
    value = entry[key]
    if not isinstance(value, str) or not value.strip():
        raise ChangeSetError(f"{name}: {key} must be non-empty text")
    return value


def _one_of(entry: dict, key: str, allowed: Iterable[str], name: str) -> str:
    value = entry[key]
    if value not in allowed:
        raise ChangeSetError(f"{name}: {key} {value!r} is not one of {sorted(allowed)}")
    return value


def _slot(entry: dict, name: str, families: Iterable[str]) -> str:
    slot = _text(entry, "slot", name)
    if not _SLOT.match(slot) or slot.split(":")[0] not in families:
        raise ChangeSetError(f"{name}: slot {slot!r} is not family[:qualifier] of {sorted(families)}")
    return slot


def _question(entry: dict, key: str, name: str) -> str:
    question = _text(entry, key, name)
    if not question.endswith("?") or "{" in question:
        raise ChangeSetError(f"{name}: {key} must be a filled-in question")
    return question


def _statement(entry: dict, key: str, name: str) -> Statement:
    raw = entry[key]
    if not isinstance(raw, dict):
        raise ChangeSetError(f"{name}: {key} must be an object with date and text")
    _keys(raw, f"{name}.{key}", ("date", "text"))
    try:
        when = date.fromisoformat(raw["date"])
    except (TypeError, ValueError) as exc:
        raise ChangeSetError(f"{name}.{key}: date {raw['date']!r} is not YYYY-MM-DD") from exc
    return Statement(date=when, text=_text(raw, "text", f"{name}.{key}"))


def _months_apart(earlier: date, later: date) -> int:
    return (later.year - earlier.year) * 12 + later.month - earlier.month


def _ordered(earlier: Statement, later: Statement, name: str) -> None:
    # Two calendar months at least: a "last month" in the later statement then falls after the earlier one.
    if _months_apart(earlier.date, later.date) < 2:
        raise ChangeSetError(f"{name}: the later statement must be two calendar months or more after the earlier")


def _change(entry: dict) -> Change:
    name = str(entry.get("id", "?"))
    _keys(entry, name, ("id", "slot", "kind", "voice", "phrasing", "tense", "user", "earlier", "later", "old_value",
                        "new_value", "question_now", "question_before"), ("chain", "step"))
    earlier, later = _statement(entry, "earlier", name), _statement(entry, "later", name)
    _ordered(earlier, later, name)
    phrasing = _text(entry, "phrasing", name)
    if not _PHRASING.match(phrasing):
        raise ChangeSetError(f"{name}: phrasing {phrasing!r} must be a snake_case label")
    change = Change(id=name, slot=_slot(entry, name, SLOT_FAMILIES), kind=_one_of(entry, "kind", KINDS, name),
                    voice=_one_of(entry, "voice", VOICES, name), phrasing=phrasing,
                    tense=_one_of(entry, "tense", TENSES, name), user=_text(entry, "user", name),
                    earlier=earlier, later=later, old_value=_text(entry, "old_value", name),
                    new_value=_text(entry, "new_value", name),
                    question_now=_question(entry, "question_now", name),
                    question_before=_question(entry, "question_before", name),
                    chain=entry.get("chain"), step=entry.get("step"))
    if change.old_value == change.new_value:
        raise ChangeSetError(f"{name}: old and new value are the same")
    if (change.kind == "harsh") != (change.phrasing == "correction"):
        raise ChangeSetError(f"{name}: a harsh change is a correction, and a correction is harsh")
    if change.kind == "fulfilled" and change.family != "plan":
        raise ChangeSetError(f"{name}: only a plan comes true (fulfilled); a plan given up is natural")
    _chain_fields(change.chain, change.step, name)
    return change


def _chain_fields(chain: Any, step: Any, name: str) -> None:
    if (chain is None) != (step is None):
        raise ChangeSetError(f"{name}: chain and step come together")
    if chain is not None and (not isinstance(chain, str) or not chain or not isinstance(step, int) or step < 1):
        raise ChangeSetError(f"{name}: chain must be a name and step a positive number")


def _non_change(entry: dict) -> NonChange:
    name = str(entry.get("id", "?"))
    _keys(entry, name, ("id", "slot", "trap", "voice", "user", "earlier", "later", "value", "question"))
    earlier, later = _statement(entry, "earlier", name), _statement(entry, "later", name)
    _ordered(earlier, later, name)
    return NonChange(id=name, slot=_slot(entry, name, SLOT_FAMILIES), trap=_one_of(entry, "trap", TRAPS, name),
                     voice=_one_of(entry, "voice", VOICES, name), user=_text(entry, "user", name),
                     earlier=earlier, later=later, value=_text(entry, "value", name),
                     question=_question(entry, "question", name))


def _unique(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ChangeSetError(f"{what}: id {i} appears twice")
        seen.add(i)


def _check_chains(steps_by_chain: dict[str, list], *, earlier: str, later: str) -> None:
    """Steps number 1..n, and each step starts where the one before it ended (same statement, same value)."""
    for name, steps in steps_by_chain.items():
        if [s.step for s in steps] != list(range(1, len(steps) + 1)) or len(steps) < 2:
            raise ChangeSetError(f"{name}: a chain has steps 1..n, n ≥ 2")
        for before, after in zip(steps, steps[1:]):
            if getattr(after, earlier) != getattr(before, later) or after.old_value != before.new_value:
                raise ChangeSetError(f"{name}: step {after.step} does not start where step {before.step} ended")
            if len({s.slot for s in steps}) != 1:
                raise ChangeSetError(f"{name}: a chain stays on one slot")


def parse_changes(data: dict) -> ChangeSet:
    """The synthetic set from its JSON object; ChangeSetError on the first entry that does not fit."""
    _keys(data, "changes.json", ("about", "changes", "non_changes"))
    changes = tuple(_change(e) for e in data["changes"])
    non_changes = tuple(_non_change(e) for e in data["non_changes"])
    _unique([c.id for c in changes] + [n.id for n in non_changes], "changes.json")
    result = ChangeSet(changes=changes, non_changes=non_changes)
    _check_chains(result.chains(), earlier="earlier", later="later")
    return result


def load_changes(path: Path = CHANGES) -> ChangeSet:
    return parse_changes(json.loads(Path(path).read_text(encoding="utf-8")))


def _dia(entry: dict, key: str, name: str) -> str:
    value = entry[key]
    if not isinstance(value, str) or not _DIA_ID.match(value):
        raise ChangeSetError(f"{name}: {key} {value!r} is not a dia_id like D3:12")
    return value


def _dias(entry: dict, key: str, name: str) -> tuple[str, ...]:
    values = entry.get(key, [])
    if not isinstance(values, list):
        raise ChangeSetError(f"{name}: {key} must be a list of dia_ids")
    return tuple(_dia({key: v}, key, name) for v in values)


def _turn_order(dia_id: str) -> tuple[int, int]:
    session, turn = dia_id[1:].split(":")
    return int(session), int(turn)


def _dev_change(entry: dict, conversations: tuple[str, ...]) -> DevChange:
    name = str(entry.get("id", "?"))
    _keys(entry, name, ("id", "conversation", "speaker", "slot", "kind", "earlier_turn", "later_turn", "old_value",
                        "new_value", "question_now", "question_before"), ("chain", "step", "old_also", "new_also"))
    change = DevChange(id=name, conversation=_one_of(entry, "conversation", conversations, name),
                       speaker=_text(entry, "speaker", name), slot=_slot(entry, name, DEV_SLOT_FAMILIES),
                       kind=_one_of(entry, "kind", KINDS, name), earlier_turn=_dia(entry, "earlier_turn", name),
                       later_turn=_dia(entry, "later_turn", name), old_value=_text(entry, "old_value", name),
                       new_value=_text(entry, "new_value", name),
                       question_now=_question(entry, "question_now", name),
                       question_before=_question(entry, "question_before", name),
                       chain=entry.get("chain"), step=entry.get("step"),
                       old_also=_dias(entry, "old_also", name), new_also=_dias(entry, "new_also", name))
    if _turn_order(change.earlier_turn) >= _turn_order(change.later_turn):
        raise ChangeSetError(f"{name}: the earlier turn must come before the later one")
    _chain_fields(change.chain, change.step, name)
    return change


def _dev_non_change(entry: dict, conversations: tuple[str, ...]) -> DevNonChange:
    name = str(entry.get("id", "?"))
    _keys(entry, name, ("id", "conversation", "speaker", "slot", "trap", "earlier_turn", "later_turn", "value",
                        "question", "why"))
    non_change = DevNonChange(id=name, conversation=_one_of(entry, "conversation", conversations, name),
                              speaker=_text(entry, "speaker", name), slot=_slot(entry, name, DEV_SLOT_FAMILIES),
                              trap=_one_of(entry, "trap", TRAPS, name), earlier_turn=_dia(entry, "earlier_turn", name),
                              later_turn=_dia(entry, "later_turn", name), value=_text(entry, "value", name),
                              question=_question(entry, "question", name), why=_text(entry, "why", name))
    if _turn_order(non_change.earlier_turn) >= _turn_order(non_change.later_turn):
        raise ChangeSetError(f"{name}: the earlier turn must come before the later one")
    return non_change


def _dev_exclusion(entry: dict, conversations: tuple[str, ...]) -> DevExclusion:
    name = f"excluded {entry.get('conversation')}/{entry.get('slot')}"
    _keys(entry, name, ("conversation", "speaker", "slot", "turns", "why"))
    turns = _dias(entry, "turns", name)
    if not turns:
        raise ChangeSetError(f"{name}: names no turn")
    return DevExclusion(conversation=_one_of(entry, "conversation", conversations, name),
                        speaker=_text(entry, "speaker", name), slot=_slot(entry, name, DEV_SLOT_FAMILIES),
                        turns=turns, why=_text(entry, "why", name))


def parse_locomo_changes(data: dict) -> DevChangeSet:
    _keys(data, "locomo_changes.json", ("about", "conversations", "changes", "non_changes", "excluded"))
    conversations = tuple(data["conversations"])
    result = DevChangeSet(conversations=conversations,
                          changes=tuple(_dev_change(e, conversations) for e in data["changes"]),
                          non_changes=tuple(_dev_non_change(e, conversations) for e in data["non_changes"]),
                          excluded=tuple(_dev_exclusion(e, conversations) for e in data["excluded"]))
    _unique([c.id for c in result.changes] + [n.id for n in result.non_changes], "locomo_changes.json")
    chains: dict[str, list[DevChange]] = {}
    for change in result.changes:
        if change.chain:
            chains.setdefault(change.chain, []).append(change)
    _check_chains({k: sorted(v, key=lambda c: c.step or 0) for k, v in chains.items()},
                  earlier="earlier_turn", later="later_turn")
    return result


def load_locomo_changes(path: Path = LOCOMO_CHANGES) -> DevChangeSet:
    return parse_locomo_changes(json.loads(Path(path).read_text(encoding="utf-8")))


def locomo_turns(path: Path) -> dict[str, tuple[str, str]]:
    """dia_id → (speaker, text) of every turn of one LoCoMo conversation file (flat or nested)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    conv = data.get("conversation", data)
    turns: dict[str, tuple[str, str]] = {}
    n = 1
    while f"session_{n}" in conv:
        for turn in conv[f"session_{n}"]:
            turns[turn["dia_id"]] = (turn["speaker"], turn["text"])
        n += 1
    return turns


def locomo_label_problems(labels: DevChangeSet, directory: Path) -> list[str]:
    """Every labelled turn that is missing from its conversation file or said by someone else.
    Exclusions need only exist and name at least one turn of their speaker (a question from the
    other speaker can be part of why a candidate was excluded)."""
    problems: list[str] = []
    for conversation in labels.conversations:
        path = Path(directory) / f"{conversation}.json"
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        turns = locomo_turns(path)
        for entry in [*labels.changes, *labels.non_changes]:
            if entry.conversation != conversation:
                continue
            named = [entry.earlier_turn, entry.later_turn,
                     *getattr(entry, "old_also", ()), *getattr(entry, "new_also", ())]
            for dia_id in named:
                if dia_id not in turns:
                    problems.append(f"{entry.id}: {dia_id} is not a turn of conversation {conversation}")
                elif turns[dia_id][0] != entry.speaker:
                    problems.append(f"{entry.id}: {dia_id} is said by {turns[dia_id][0]}, not {entry.speaker}")
        for exclusion in labels.excluded:
            if exclusion.conversation != conversation:
                continue
            missing = [t for t in exclusion.turns if t not in turns]
            if missing:
                problems.append(f"excluded {conversation}/{exclusion.slot}: {missing} are not turns")
            elif all(turns[t][0] != exclusion.speaker for t in exclusion.turns):
                problems.append(f"excluded {conversation}/{exclusion.slot}: no turn of {exclusion.speaker}")
    return problems


def summary(labelled: ChangeSet, dev: DevChangeSet) -> str:
    """Counts per slot family of both sets, as the docs and the issue note report them."""
    lines = [f"{'family':<11} {'changes':>7} {'harsh':>5} {'non-changes':>11} {'dev changes':>11}"]
    families = list(SLOT_FAMILIES)
    for family in families:
        changes = [c for c in labelled.changes if c.family == family]
        lines.append(f"{family:<11} {len(changes):>7} {sum(c.kind == 'harsh' for c in changes):>5} "
                     f"{sum(n.family == family for n in labelled.non_changes):>11} "
                     f"{sum(c.family == family for c in dev.changes):>11}")
    lines.append(f"{'total':<11} {len(labelled.changes):>7} {sum(c.kind == 'harsh' for c in labelled.changes):>5} "
                 f"{len(labelled.non_changes):>11} {len(dev.changes):>11}")
    lines.append(f"chains: {len(labelled.chains())} (own), {len({c.chain for c in dev.changes if c.chain})} (dev); "
                 f"dev non-changes: {len(dev.non_changes)}; dev exclusions: {len(dev.excluded)}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(load_changes(), load_locomo_changes()))
