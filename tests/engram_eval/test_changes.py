"""The labelled changes of issue 69: schema, coverage and counts, the dev labels against the LoCoMo
conversations, and no LoCoMo text copied into the repository.

The conversation checks read ENGRAM_LOCOMO_DEV, else ../shared/data/locomo-dev beside the checkout
(where CI has it), and skip when neither exists.
"""

import copy
import json
import os
import re
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram_eval.changes import (
    CUE_PHRASINGS,
    DEV_SLOT_FAMILIES,
    KINDS,
    SLOT_FAMILIES,
    TENSES,
    TRAPS,
    VOICES,
    ChangeSetError,
    load_changes,
    load_locomo_changes,
    locomo_label_problems,
    locomo_turns,
    parse_changes,
    parse_locomo_changes,
)
from engram_eval.corpora import CHANGES, LOCOMO_CHANGES

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "consolidation.md"
DOC_SECTION = "## The labelled changes (issue 69)"


def _dev_directory() -> Path | None:
    for candidate in (os.environ.get("ENGRAM_LOCOMO_DEV"), REPO.parent / "shared" / "data" / "locomo-dev"):
        if candidate and (Path(candidate) / "26.json").exists():
            return Path(candidate)
    return None


needs_conversations = pytest.mark.skipif(_dev_directory() is None,
                                         reason="LoCoMo dev conversations not found (set ENGRAM_LOCOMO_DEV)")


@pytest.fixture(scope="module")
def labelled():
    return load_changes()


@pytest.fixture(scope="module")
def dev():
    return load_locomo_changes()


def test_the_labelled_set_has_its_counts(labelled):
    assert len(labelled.changes) >= 120
    assert len(labelled.non_changes) >= len(labelled.changes)
    # One end-user per entry (a chain is one entry of several steps).
    users = [c.user for c in labelled.changes if not c.chain] + [s[0].user for s in labelled.chains().values()]
    users += [n.user for n in labelled.non_changes]
    assert len(users) == len(set(users))


def test_every_slot_family_has_changes_and_non_changes(labelled):
    changes = Counter(c.family for c in labelled.changes)
    non_changes = Counter(n.family for n in labelled.non_changes)
    assert set(changes) == set(non_changes) == set(SLOT_FAMILIES)
    assert min(changes.values()) >= 6 and min(non_changes.values()) >= 6, (changes, non_changes)
    partners = [c for c in labelled.changes if c.slot == "relation:partner"]
    others = [c for c in labelled.changes if c.family == "relation" and c.slot != "relation:partner"]
    assert len(partners) >= 6 and len(others) >= 6


def test_every_cue_the_issue_names_is_used(labelled):
    phrasings = Counter(c.phrasing for c in labelled.changes)
    assert all(phrasings[cue] >= 1 for cue in CUE_PHRASINGS), [c for c in CUE_PHRASINGS if not phrasings[c]]
    assert len(phrasings) >= 35


# Each cue word is said in a change and also in a statement that must not supersede anything, so a
# rule keyed on the word alone gets some of the set wrong.
CUE_WORDS = ("replaced", "switched", "swapped", "moved", "quit", "started", "split up", "passed away", "adopted",
             "instead", "from now on", "changed", "no longer", "any more", "got rid of", "upgraded", "traded",
             "now that", "ever since", "these days", "used to")


@pytest.mark.parametrize("cue", CUE_WORDS)
def test_a_cue_word_is_said_in_changes_and_in_non_changes(labelled, cue):
    said = re.compile(rf"\b{re.escape(cue)}\b", re.I)
    assert any(said.search(c.later.text) for c in labelled.changes)
    assert any(said.search(n.later.text) for n in labelled.non_changes)


def test_kinds_voices_tenses_and_traps_are_all_used(labelled):
    kinds = Counter(c.kind for c in labelled.changes)
    values = Counter(c.kind for c in labelled.changes if c.family != "plan")
    # corrections among the changes of a value (a plan that came true or was given up replaces none)
    assert set(kinds) == set(KINDS) and 0.1 <= values["harsh"] / (values["natural"] + values["harsh"]) <= 0.3
    assert set(Counter(c.voice for c in labelled.changes)) == set(VOICES)
    assert min(Counter(c.tense for c in labelled.changes).values()) >= 3
    assert set(Counter(c.tense for c in labelled.changes)) == set(TENSES)
    assert set(Counter(n.trap for n in labelled.non_changes)) == set(TRAPS)
    assert {"I", "we", "third"} <= {n.voice for n in labelled.non_changes}


def test_chains_run_a_to_b_to_c_on_one_slot(labelled):
    chains = labelled.chains()
    assert len(chains) >= 5
    for steps in chains.values():
        assert len(steps) >= 2 and len({s.user for s in steps}) == 1
        assert steps[0].earlier.date < steps[0].later.date <= steps[1].earlier.date < steps[1].later.date
        # The question about "before" the last step expects the middle value, not the first.
        assert steps[-1].old_value == steps[-2].new_value != steps[0].old_value


def test_questions_differ_and_statements_are_unique(labelled):
    for c in labelled.changes:
        assert c.question_now != c.question_before
    said = [c.later.text for c in labelled.changes] + [n.later.text for n in labelled.non_changes]
    assert len(said) == len(set(said))


def _entry():
    return {"id": "c1", "slot": "phone", "kind": "natural", "voice": "I", "phrasing": "replaced", "tense": "past",
            "user": "Ann", "earlier": {"date": "2025-01-10", "text": "My phone is a Moto G."},
            "later": {"date": "2025-04-02", "text": "I replaced the Moto with a Pixel."},
            "old_value": "Moto G", "new_value": "Pixel", "question_now": "What phone does Ann use?",
            "question_before": "What phone did Ann have before the Pixel?"}


def _set(*changes, non_changes=()):
    return {"about": "", "changes": list(changes), "non_changes": list(non_changes)}


def test_a_valid_entry_parses_into_typed_values():
    change = parse_changes(_set(_entry())).changes[0]
    assert (change.earlier.date, change.family, change.chain) == (date(2025, 1, 10), "phone", None)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda e: e.pop("old_value"), "missing"),
    (lambda e: e.update(mood="happy"), "unknown"),
    (lambda e: e.update(slot="gadget:router"), "slot"),
    (lambda e: e.update(slot="Device Router"), "slot"),
    (lambda e: e.update(kind="soft"), "kind"),
    (lambda e: e.update(voice="they"), "voice"),
    (lambda e: e.update(new_value="Moto G"), "same"),
    (lambda e: e.update(kind="harsh"), "correction"),
    (lambda e: e.update(kind="fulfilled"), "only a plan"),
    (lambda e: e.update(question_now="What phone"), "question"),
    (lambda e: e.update(question_before="Where in {em}?"), "question"),
    (lambda e: e["later"].update(date="2025-02-28"), "two calendar months"),
    (lambda e: e["earlier"].update(date="10/01/2025"), "YYYY-MM-DD"),
    (lambda e: e["later"].update(text=" "), "non-empty"),
    (lambda e: e.update(chain="x"), "chain and step"),
])
def test_a_malformed_entry_is_refused_with_its_id(mutate, message):
    entry = _entry()
    mutate(entry)
    with pytest.raises(ChangeSetError, match=message) as refused:
        parse_changes(_set(entry))
    assert str(refused.value).startswith("c1")


def test_a_chain_must_start_where_its_last_step_ended():
    first = {**_entry(), "chain": "p", "step": 1}
    second = {**copy.deepcopy(_entry()), "id": "c2", "chain": "p", "step": 2,
              "earlier": dict(first["later"]), "later": {"date": "2025-07-01", "text": "Now it's an iPhone."},
              "old_value": "Pixel", "new_value": "iPhone"}
    assert len(parse_changes(_set(first, second)).chains()["p"]) == 2
    with pytest.raises(ChangeSetError, match="does not start where"):
        parse_changes(_set(first, {**second, "old_value": "Nokia"}))
    with pytest.raises(ChangeSetError, match="appears twice"):
        parse_changes(_set(first, {**second, "id": "c1"}))


@given(st.dates(min_value=date(2020, 1, 1), max_value=date(2030, 12, 31)),
       st.dates(min_value=date(2020, 1, 1), max_value=date(2030, 12, 31)))
def test_statements_are_accepted_exactly_when_two_calendar_months_apart(earlier, later):
    entry = _entry()
    entry["earlier"]["date"], entry["later"]["date"] = earlier.isoformat(), later.isoformat()
    apart = (later.year - earlier.year) * 12 + later.month - earlier.month
    if apart >= 2:
        assert parse_changes(_set(entry)).changes[0].later.date == later
    else:
        with pytest.raises(ChangeSetError, match="two calendar months"):
            parse_changes(_set(entry))


def test_the_dev_set_has_changes_in_each_conversation(dev):
    assert dev.conversations == ("26", "30", "47", "49")
    per_conversation = Counter(c.conversation for c in dev.changes)
    assert len(dev.changes) >= 20 and min(per_conversation[c] for c in dev.conversations) >= 2  # conversation 30 has two (its temp job is an addition)
    assert {c.family for c in dev.changes} <= set(DEV_SLOT_FAMILIES)
    assert len({c.chain for c in dev.changes if c.chain}) >= 2
    assert all(e.why for e in dev.excluded) and len(dev.excluded) >= 10
    assert all(n.why for n in dev.non_changes) and {n.conversation for n in dev.non_changes} == set(dev.conversations)


def test_a_dev_label_with_its_turns_out_of_order_is_refused():
    data = json.loads(LOCOMO_CHANGES.read_text())
    data["changes"][0]["earlier_turn"], data["changes"][0]["later_turn"] = "D9:1", "D2:3"
    with pytest.raises(ChangeSetError, match="before the later one"):
        parse_locomo_changes(data)
    data = json.loads(LOCOMO_CHANGES.read_text())
    data["changes"][0]["later_turn"] = "13:1"
    with pytest.raises(ChangeSetError, match="dia_id"):
        parse_locomo_changes(data)


@needs_conversations
def test_dev_labels_point_at_turns_of_their_speaker(dev):
    assert locomo_label_problems(dev, _dev_directory()) == []


@needs_conversations
def test_a_label_on_the_other_speaker_s_turn_is_reported():
    data = json.loads(LOCOMO_CHANGES.read_text())
    data["changes"][0]["speaker"] = "Melanie"  # d26-01's turns are Caroline's
    data["changes"][1]["later_turn"] = "D99:1"
    problems = locomo_label_problems(parse_locomo_changes(data), _dev_directory())
    assert any("not Melanie" in p for p in problems) and any("D99:1 is not a turn" in p for p in problems)


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def _runs(text: str, n: int = 6) -> set[str]:
    words = _WORD.findall(text.lower())
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def _doc_section() -> str:
    doc = DOC.read_text(encoding="utf-8")
    start = doc.index(DOC_SECTION)
    end = doc.find("\n## ", start + len(DOC_SECTION))
    return doc[start:end if end != -1 else None]


@needs_conversations
def test_no_locomo_turn_text_is_copied_into_these_files():
    turns = {}
    for conversation in ("26", "30", "47", "49"):
        for dia_id, (_, text) in locomo_turns(_dev_directory() / f"{conversation}.json").items():
            for run in _runs(text):
                turns.setdefault(run, f"{conversation}/{dia_id}")
    ours = {path.name: path.read_text(encoding="utf-8") for path in
            (CHANGES, LOCOMO_CHANGES, REPO / "engram_eval" / "changes.py", Path(__file__))}
    ours["docs section"] = _doc_section()
    copied = {name: sorted((run, turns[run]) for run in _runs(text) if run in turns) for name, text in ours.items()}
    assert copied == {name: [] for name in ours}
