"""A model of one end-user's memory, driven by Hypothesis against the real stack (Elasticsearch,
the database, the outbox, consolidation, the inspector): turns, facts, supersedes, forgets with and
without their cascade, erase, consolidation, small and background imports, in any order.

After every step: recall, export and the inspector never return the text of a forgotten or erased
memory; once the outbox has drained, every acknowledged write is there exactly once and the export
equals the model. Each memory's text carries a marker word of its own, so "its text is there" is a
search for that word (a fact consolidation derived from it may carry it too, and is in the model).

The run's step count and time are printed and written to ``.engram/state-machine.json`` (the
README's figure comes from there).
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.test import Client
from hypothesis import HealthCheck, settings as hsettings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from engram_client import EngramAPIError
from engram_core.errors import Conflict
from memory_app.consolidation.services import consolidation_run
from language.phrases import phrases_redacted
from memory_app.models import OutboxEntry
from memory_app.outbox import outbox_replay
from memory_app.services.context import phrases_of
from tenants.models import Membership, Subject

# Runs x steps: a few minutes of scripts/test (each step writes through the API and checks export,
# recall and the inspector page). A longer hunt: ENGRAM_STATE_MACHINE_RUNS=50 scripts/test <this file>.
RUNS = int(os.environ.get("ENGRAM_STATE_MACHINE_RUNS", "15"))
STEPS = int(os.environ.get("ENGRAM_STATE_MACHINE_STEPS", "30"))
SYNC_IMPORT_MAX = 3  # an import of more episodes is applied in the background (the outbox)

_TEMPLATES = [
    "My favourite colour is {m}.", "I moved to {M}.", "My dog is called {M}.", "I work as a {m} engineer.",
    "The {m} router keeps dropping the connection.", "I tried restarting the {m} box and that worked.",
    "ok {m}", "Remember that {m} matters to me, ok?", "I booked the {m} table for Friday.",
]
_FILLER = st.lists(st.sampled_from(["really", "today", "again", "the", "kitchen", "alarm", "smoke", "ok", "booked"]),
                   max_size=3).map(" ".join)


@dataclass
class Memory:
    id: str
    kind: str  # episodic | semantic | procedural
    text: str
    markers: set[str]
    context: str | None = None
    support: list[str] = field(default_factory=list)
    derived: bool = False  # written by consolidation


class Stack:
    """What the machine drives; set by the test that runs it."""

    engram = None
    tenant = None
    staff = None
    report: dict = {}


class EngramModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.who = f"sm-{uuid.uuid4().hex[:10]}"  # one end-user per run: runs share the database
        # Markers are unique within the run's end-user, and the same in every run (Hypothesis replays
        # a run to shrink it: what it draws from must not depend on random ids).
        self.salt = "k"
        self.counter = itertools.count()
        self.alive: dict[str, Memory] = {}
        self.gone_markers: set[str] = set()  # of forgotten or erased memories
        # What the end-user's writes accepted into the outbox will do, in order, applied to the model
        # when the outbox drains (a forget passing a stuck write, an erase cancelling what is queued
        # before it: the same end state as in order).
        self.deferred: list[tuple] = []
        Stack.report["runs"] = Stack.report.get("runs", 0) + 1

    # ------------------------------------------------------------ helpers

    def _marker(self) -> str:
        n = next(self.counter)
        letters = "".join("abcdefghijklmnopqrstuvwxyz"[int(d)] for d in f"{n:03d}")
        return f"zq{self.salt}{letters}"

    def _text(self, template: str, filler: str) -> tuple[str, str]:
        m = self._marker()
        return (template.format(m=m, M=m.capitalize()) + (f" {filler}" if filler else "")), m

    def _step(self) -> None:
        Stack.report["steps"] = Stack.report.get("steps", 0) + 1
        rules = Stack.report.setdefault("rules", {})
        rule_name = next(f.function for f in inspect.stack()[1:] if not f.function.startswith("_"))
        rules[rule_name] = rules.get(rule_name, 0) + 1

    def _queued(self) -> bool:
        return OutboxEntry.objects.filter(tenant=Stack.tenant, external_id=self.who, status="pending").exists()

    def _ids(self, kind: str | None = None, *, derived: bool | None = None) -> list[str]:
        return [i for i, m in self.alive.items()  # in the order they were written
                if (kind is None or m.kind == kind) and (derived is None or m.derived == derived)]

    def _apply(self, result: dict, action: tuple) -> None:
        if result["status"] == "queued" or self.deferred:
            assert result["status"] == "queued", "applied while earlier writes wait"
            self.deferred.append(action)
            return
        self._do(action)

    def _do(self, action: tuple, queued: list[Memory] = ()) -> bool:
        """Apply one write to the model; False for a forget or a supersession of a memory gone by then
        (an erase or a cascade queued before it took it: the write fails not found, as it would have
        at once).
        ``queued``: the memories of writes still waiting behind it (a forget redacts their context)."""
        if action[0] == "add":
            self.alive[action[1].id] = action[1]
        elif action[0] == "supersede":  # its old fact erased or forgotten by then: not found, nothing written
            if action[1] not in self.alive:
                return False
            self.alive[action[2].id] = action[2]
        elif action[0] == "forget":
            return self._forget_in_model(action[1], action[2], queued=queued)
        else:
            self._erase_in_model()
        return True

    def _forget_in_model(self, memory_id: str, cascade: bool, queued: list[Memory] = (),
                         cascaded: bool = False) -> bool:
        memory = self.alive.pop(memory_id, None)
        if memory is None:
            return False
        self.gone_markers |= memory.markers
        phrases = phrases_of({memory.text}, passages_max=settings.ENGRAM_PASSAGES_MAX)
        # Explicit contexts quoting its text lose the quote: stored episodes' (an episode's forget,
        # and its cascade), queued writes' (every forget: the outbox is one more copy).
        stored = list(self.alive.values()) if memory.kind == "episodic" or cascaded else []
        for other in [*stored, *queued]:
            if other.context:
                other.context = phrases_redacted(other.context, phrases)
        if memory.kind != "episodic":
            return True
        for d in [m for m in self.alive.values() if memory_id in m.support]:
            left = [i for i in d.support if i != memory_id]
            if cascade and not [i for i in left if i in self.alive]:
                self._forget_in_model(d.id, cascade, queued=queued, cascaded=True)
            else:
                d.support = left if not cascade else [i for i in left if i in self.alive]
        return True

    def _erase_in_model(self) -> None:
        for memory in self.alive.values():
            self.gone_markers |= memory.markers
        self.alive.clear()

    # ------------------------------------------------------------ rules

    @initialize()
    def a_consolidated_session(self):
        """Every run starts with facts and a playbook derived from episodes, so that forgets meet a
        cascade (Hypothesis picks consolidation itself rarely)."""
        self._step()
        for template in ("My favourite colour is {m}.", "The {m} router keeps dropping the connection.",
                         "I tried restarting the {m} box and that worked.", "I moved to {M}."):
            text, m = self._text(template, "")
            result = Stack.engram.turn(self.who, text, session_id="s0")
            self._apply(result, ("add", Memory(result["id"], "episodic", text, {m})))
        consolidation_run(subject=Subject.objects.get(tenant=Stack.tenant, external_id=self.who))
        self._sync_derived()

    @rule(template=st.sampled_from(_TEMPLATES), filler=_FILLER, session=st.sampled_from([None, "s1", "s2"]),
          quote=st.booleans())
    def turn(self, template, filler, session, quote):
        self._step()
        text, m = self._text(template, filler)
        quoted = [x for x in self._ids("episodic") if self.alive[x].kind == "episodic"]
        context = f"USER: {self.alive[quoted[-1]].text}" if quote and quoted else None
        result = Stack.engram.turn(self.who, text, session_id=session, context=context)
        self._apply(result, ("add", Memory(result["id"], "episodic", text, {m}, context=context)))

    @rule(template=st.sampled_from(_TEMPLATES), filler=_FILLER)
    def fact(self, template, filler):
        self._step()
        text, m = self._text(template, filler)
        result = Stack.engram.write_fact(self.who, text)
        self._apply(result, ("add", Memory(result["id"], "semantic", text, {m})))

    @precondition(lambda self: self._ids("semantic", derived=False))
    @rule(data=st.data(), template=st.sampled_from(_TEMPLATES))
    def supersede(self, data, template):
        self._step()
        old = data.draw(st.sampled_from(self._ids("semantic", derived=False)))
        text, m = self._text(template, "")
        try:
            result = Stack.engram.write_fact(self.who, text, supersedes=[old], contradiction="natural")
        except EngramAPIError as exc:  # superseded already by a newer fact: refused, nothing written
            assert exc.status == 409, exc
            return
        self._apply(result, ("supersede", old, Memory(result["id"], "semantic", text, {m})))

    @precondition(lambda self: self._ids("episodic"))
    @rule(data=st.data(), cascade=st.booleans())
    def forget_episode(self, data, cascade):
        self._forget(data.draw(st.sampled_from(self._ids("episodic"))), cascade)

    @precondition(lambda self: self._ids("episodic", derived=False) and self._ids("semantic"))
    @rule(data=st.data(), cascade=st.booleans())
    def forget_supporting_episode(self, data, cascade):
        """An episode a fact or playbook was derived from (after a consolidation), when there is one."""
        support = [i for m in self.alive.values() for i in m.support if i in self.alive]
        self._forget(data.draw(st.sampled_from(support or self._ids("episodic"))), cascade)

    @precondition(lambda self: self.alive)
    @rule(data=st.data())
    def forget_any(self, data):
        self._forget(data.draw(st.sampled_from(list(self.alive))), True)

    def _forget(self, memory_id: str, cascade: bool) -> None:
        self._step()
        result = Stack.engram.forget(self.who, memory_id, "user_request", cascade=cascade)
        if result["status"] == "queued" or self.deferred:
            self._apply(result, ("forget", memory_id, cascade))
            return
        before = set(self.alive)
        self._forget_in_model(memory_id, cascade)
        forgotten = {m["id"] for m in result["cascade"]["forgotten"]}
        assert forgotten == before - set(self.alive) - {memory_id}, (result["cascade"], memory_id)

    @precondition(lambda self: len(self.alive) >= 6 or len(self.deferred) >= 4)  # else it erases too often
    @rule()
    def erase(self):
        self._step()
        result = Stack.engram.erase_subject(self.who)
        self._apply(result, ("erase",))

    @rule(size=st.integers(1, SYNC_IMPORT_MAX + 2), template=st.sampled_from(_TEMPLATES))
    def import_episodes(self, size, template):
        """Up to SYNC_IMPORT_MAX episodes are applied at once; more go to the outbox (background)."""
        self._step()
        items = [self._text(template, "") for _ in range(size)]
        result = Stack.engram.import_episodes(self.who, [{"text": t, "occurred_at": f"2024-05-0{n + 1}T10:00:00Z"}
                                                         for n, (t, _m) in enumerate(items)])
        assert result["status"] == ("queued" if size > SYNC_IMPORT_MAX or self.deferred else "applied")
        for memory_id, (text, m) in zip(result["ids"], items, strict=True):
            self._apply(result, ("add", Memory(memory_id, "episodic", text, {m})))

    @precondition(lambda self: len(self._ids("episodic")) >= 3)
    @rule()
    def consolidate(self):
        self._step()
        subject = Subject.objects.filter(tenant=Stack.tenant, external_id=self.who).first()
        if subject is None:
            return
        try:
            consolidation_run(subject=subject)
        except Conflict as exc:  # writes queued: the run waits for them, as its task does
            assert exc.code == "writes_queued", exc
            return
        self._sync_derived()

    @precondition(lambda self: self.deferred)
    @rule()
    def replay(self):
        """The periodic replay: drains the outbox (bar failures, which must not happen here)."""
        self._step()
        # By primary key: an erase renames its end-user's settled entries.
        queued = list(OutboxEntry.objects.filter(tenant=Stack.tenant, external_id=self.who, status="pending")
                      .values_list("pk", flat=True))
        report = outbox_replay()
        assert not self._queued() and not report.stopped_by_outage, report
        # The writes queued before the first erase are cancelled by it (whatever they wrote, it
        # deletes); the rest are applied in order.
        first_erase = next((n for n, a in enumerate(self.deferred) if a[0] == "erase"), 0)
        rest = self.deferred[first_erase:]
        not_found = sum(not self._do(action, queued=[a[-1] for a in rest[n + 1:] if a[0] in ("add", "supersede")])
                        for n, action in enumerate(rest))
        self.deferred.clear()
        failed = OutboxEntry.objects.filter(pk__in=queued, status="failed")
        assert failed.count() == not_found, list(failed.values("operation", "last_error"))  # nothing else fails
        assert all(e["code"] == "not_found" for e in failed.values_list("last_error", flat=True))

    def teardown(self):
        outbox_replay()  # the next run starts from an empty outbox

    def _sync_derived(self) -> None:
        """Consolidation's facts and playbooks join the model as they are (what it derives is its
        own tests' business); the model keeps them from then on."""
        exported = self._export()
        for kind in ("semantic", "procedural"):
            for item in sorted(exported[kind], key=lambda i: json.dumps(
                    {k: v for k, v in i.items() if k in ("text", "trigger", "steps")}, sort_keys=True)):
                text = item.get("text") or f"{item.get('trigger', '')} {item.get('steps', '')}"
                known = self.alive.get(item["id"])
                if known is None:
                    _count("derived_memories")
                    markers = {w for w in _words(text) if w.startswith(f"zq{self.salt}")}
                    self.alive[item["id"]] = Memory(item["id"], kind, text, markers,
                                                    support=list(item.get("supporting_episode_ids") or []),
                                                    derived=True)
                else:
                    known.support = list(item.get("supporting_episode_ids") or [])

    # ------------------------------------------------------------ invariants

    def _export(self) -> dict[str, list[dict]]:
        if not Subject.objects.filter(tenant=Stack.tenant, external_id=self.who).exists():
            return {"episodic": [], "semantic": [], "procedural": []}
        try:
            return Stack.engram.export(self.who)["memories"]
        except EngramAPIError as exc:
            assert exc.status == 404, exc
            return {"episodic": [], "semantic": [], "procedural": []}

    def _checked_markers(self) -> set[str]:
        """Markers that must be nowhere: gone, and in no memory that is still there."""
        alive = {w for m in self.alive.values() for w in m.markers | set(_words(f"{m.text} {m.context or ''}"))}
        return {m for m in self.gone_markers if m not in alive}

    @invariant()
    def nothing_forgotten_is_returned(self):
        gone = self._checked_markers()
        if not gone:
            return
        _count("checks_of_forgotten_text")
        exported = json.dumps(self._export()).lower()
        assert not [m for m in gone if m in exported], "export returns forgotten text"
        subject = Subject.objects.filter(tenant=Stack.tenant, external_id=self.who).first()
        if subject is None:
            return
        probe = sorted(gone)[-1]
        hits = json.dumps(Stack.engram.recall(self.who, f"{probe} ok colour router", k=20)).lower()
        assert not [m for m in gone if m in hits], "recall returns forgotten text"
        page = Stack.staff.get(f"/u/{subject.user_id}/").content.decode().lower()
        assert not [m for m in gone if m in page], "the inspector shows forgotten text"

    @invariant()
    def drained_outbox_means_the_export_is_the_model(self):
        if self._queued():
            return
        exported = self._export()
        _count("exports_compared")
        stored = [(item["id"], item["memory_type"]) for items in exported.values() for item in items]
        assert len(stored) == len(set(stored)), "a memory stored twice"
        assert {i for i, _ in stored} == set(self.alive), (sorted({i for i, _ in stored} ^ set(self.alive)))
        by_id = {item["id"]: item for items in exported.values() for item in items}
        for memory in self.alive.values():
            item = by_id[memory.id]
            assert item["memory_type"] == memory.kind
            if not memory.derived:
                assert item["text"] == memory.text
            if memory.kind == "episodic":
                assert item.get("context") == memory.context
            else:
                assert sorted(item.get("supporting_episode_ids") or []) == sorted(memory.support)


def _count(what: str) -> None:
    Stack.report[what] = Stack.report.get(what, 0) + 1


def _words(text: str) -> list[str]:
    return [w.strip(".,?!:;'\"()").lower() for w in text.split()]


def test_the_model_and_the_stack_agree(make_client, tenant, settings, make_staff_user):
    settings.ENGRAM_API_IMPORT_SYNC_MAX = SYNC_IMPORT_MAX
    # One token sends every run's requests within minutes: far more than an agent's rate allows.
    settings.ENGRAM_API_RATES = {**settings.ENGRAM_API_RATES, "agent": "100000/minute", "import": "100000/minute"}
    staff = make_staff_user("sm-support")
    Membership.objects.create(user=staff, tenant=tenant, role=Membership.Role.SUPPORT)
    browser = Client()
    browser.force_login(staff)
    Stack.engram, Stack.tenant, Stack.staff, Stack.report = make_client(), tenant, browser, {}
    started = time.monotonic()
    run_state_machine_as_test(EngramModel, settings=hsettings(
        max_examples=RUNS, stateful_step_count=STEPS, deadline=None, derandomize=False,
        suppress_health_check=list(HealthCheck)))
    report = {**Stack.report, "seconds": round(time.monotonic() - started, 1), "runs_planned": RUNS,
              "steps_per_run_max": STEPS}
    out = Path(settings.BASE_DIR) / ".engram" / "state-machine.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report))
    print(f"\nstate machine: {report['steps']} steps in {report['runs']} runs, {report['seconds']} s; {report}")
    assert report["steps"] > 0
