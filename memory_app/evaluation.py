"""Retrieval-quality evaluation, run through the real services against the real cluster.

Two datasets:
- the fixture corpus (tests/fixtures/eval_corpus.json): tenants, personas with every memory
  type, supersession and near-duplicate facts, ≥2 paraphrased questions per evaluated document;
  reports R@1/5/10 and MRR overall and per memory type, plus a cross-subject leak sweep made
  through each subject's own DLS key;
- LoCoMo-format conversations: one conversation = one subject, each turn an episode dated by
  its session; R@k = mean share of a question's evidence turns in the top k (categories 1-4).

Everything is written under a throwaway index prefix; the database rows a run creates are
written in short transactions (never one long transaction on the live database, which would
lock every API request out of a SQLite file for minutes) and deleted again at the end, and the
API keys minted meanwhile are invalidated. Tenants get run-unique slugs, so a run never
collides with (or touches) a real tenant of the same name.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from statistics import mean
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models.signals import post_save
from django.test.utils import override_settings

from engram_core.es.client import admin_client
from engram_core.es.schema import drop_indices, ensure_indices
from memory_app import services
from memory_app.consolidation.services import consolidate_all
from memory_app.recall import memory_recall
from memory_app.usage import usage_flush
from memory_app.validation import clean_datetime
from tenants import services as tenant_services
from tenants.es_keys import invalidate_keys
from tenants.isolation_move import tenant_indices_ensure
from tenants.models import AuditEvent, Subject, SubjectKey, Tenant, WriterKey

KS = (1, 5, 10)


def scratch_slug(slug: str) -> str:
    """A run-unique tenant slug for sandboxed data (``eval-<run>-<slug>``)."""
    return f"eval-{uuid.uuid4().hex[:6]}-{slug}"[:64]


def scratch_tenant(*, slug: str, name: str, dedicated: bool = False) -> Tenant:
    """A sandboxed tenant, in the shared indices or in dedicated ones of its own (created here,
    under the sandbox's prefix, so ``sandbox`` drops them too)."""
    isolation = Tenant.Isolation.DEDICATED if dedicated else Tenant.Isolation.SHARED
    tenant = Tenant.objects.create(slug=scratch_slug(slug), name=name, isolation=isolation)
    tenant_indices_ensure(tenant=tenant)
    return tenant


@contextmanager
def scratch_rows() -> Iterator[None]:
    """Delete, on exit, the tenants, writer keys and audit events this thread creates inside
    (tenants cascade to their end-users, keys and tokens). No transaction spans the block:
    every write commits at once, so other processes using the same database never wait on it.
    Only rows created by this thread are tracked; another process's rows are never touched."""
    thread = threading.get_ident()
    created: dict[type, list[int]] = {Tenant: [], WriterKey: [], AuditEvent: []}

    def track(sender, instance, **kwargs):
        if kwargs.get("created") and threading.get_ident() == thread:
            created[sender].append(instance.pk)

    receivers = [(model, f"engram-scratch-{id(created)}-{model.__name__}") for model in created]
    for model, uid in receivers:
        post_save.connect(track, sender=model, dispatch_uid=uid, weak=False)
    try:
        yield
    finally:
        for model, uid in receivers:
            post_save.disconnect(sender=model, dispatch_uid=uid)
        with transaction.atomic():
            # Audit events are append-only for everyone else; a sandbox's own are scratch data.
            models.QuerySet.delete(AuditEvent.objects.filter(
                models.Q(pk__in=created[AuditEvent]) | models.Q(tenant_id__in=created[Tenant])))
            WriterKey.objects.filter(pk__in=created[WriterKey]).delete()
            Subject.objects.filter(tenant_id__in=created[Tenant]).delete()  # tenants protect their end-users
            Tenant.objects.filter(pk__in=created[Tenant]).delete()


@contextmanager
def sandbox(*, clean_db: bool = True) -> Iterator[str]:
    """A throwaway index prefix, dropped afterwards; API keys minted inside are invalidated.

    With ``clean_db`` the database rows created inside are deleted afterwards (``scratch_rows``;
    no long transaction). Errors inside propagate unchanged.
    """
    prefix = f"{settings.ES_INDEX_PREFIX}-eval-{uuid.uuid4().hex[:8]}"
    es = admin_client()
    with override_settings(ES_INDEX_PREFIX=prefix):
        tenant_services.clear_caches()
        ensure_indices(es=es)
        try:
            with scratch_rows() if clean_db else nullcontext():
                try:
                    yield prefix
                finally:
                    usage_flush()
                    keys = list(SubjectKey.objects.filter(index_prefix__startswith=prefix)
                                .values_list("es_key_id", flat=True))
                    keys += list(WriterKey.objects.filter(index_prefix__startswith=prefix)
                                 .values_list("es_key_id", flat=True))
                    invalidate_keys(key_ids=keys)
        finally:
            tenant_services.clear_caches()
            drop_indices(es=es, prefix=prefix)


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


def _question_scores(ranked: list[str], expected: list[str]) -> dict[str, float]:
    out = {f"R@{k}": len(set(ranked[:k]) & set(expected)) / len(expected) for k in KS}
    first = next((n for n, i in enumerate(ranked, start=1) if i in expected), None)
    out["MRR"] = 1.0 / first if first else 0.0
    return out


# ---------------------------------------------------------------- fixture corpus


@dataclass
class FixtureReport:
    scores: dict[str, dict[str, float]]
    questions: int
    leak_probes: int
    leaks: int
    leak_examples: list[str]


def evaluate_fixture(*, path: Path, k: int = 10, log: Callable[[str], None] = print,
                     dedicated: bool = False) -> FixtureReport:
    """``dedicated``: every tenant in dedicated indices (its own index statistics) instead of the
    shared ones."""
    corpus = json.loads(path.read_text())
    now = clean_datetime(corpus["now"], field="now")
    with sandbox():
        key_to_id, key_type, subjects = _load_fixture(corpus, log=log, dedicated=dedicated)
        scores = Scores()
        leak_probes = leaks = 0
        leak_examples: list[str] = []
        for q in corpus["questions"]:
            subject = subjects[(q["tenant"], q["subject"])]
            results = memory_recall(subject=subject, query=q["question"], k=k, now=now)
            ranked = [r["id"] for r in results]
            expected = [key_to_id[e] for e in q["expected"]]
            scores.add(key_type[q["expected"][0]], _question_scores(ranked, expected))
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
                                            include_superseded=True, now=now)
                    for r in results:
                        leak_probes += 1
                        if r["tenant_id"] != tenant_slug or r.get("user_id") not in (None, str(subject.user_id)):
                            leaks += 1
                            leak_examples.append(f"{external_id}: {r['id']}")
        return FixtureReport(scores=scores.summary(), questions=len(corpus["questions"]), leak_probes=leak_probes,
                             leaks=leaks, leak_examples=leak_examples[:10])


def _load_fixture(corpus: dict, *, log: Callable[[str], None], dedicated: bool = False):
    key_to_id: dict[str, str] = {}
    key_type: dict[str, str] = {}
    tenants = {}
    for t in corpus["tenants"]:
        tenants[t["slug"]] = scratch_tenant(slug=t["slug"], name=t["name"], dedicated=dedicated)
        for entry in t["catalog"]:
            written = services.catalog_entry_write(tenant=tenants[t["slug"]], title=entry["title"], text=entry["text"])
            key_to_id[entry["key"]], key_type[entry["key"]] = written["id"], "catalog"
    subjects: dict[tuple[str, str], Subject] = {}
    for s in corpus["subjects"]:
        subject = tenant_services.subject_get_or_create(tenant=tenants[s["tenant"]], external_id=s["external_id"],
                                                        actor="eval")
        subjects[(s["tenant"], s["external_id"])] = subject
        ids = services.episodes_import(subject=subject, episodes=[
            {"text": e["text"], "occurred_at": e["occurred_at"]} for e in s["episodic"]])
        for e, memory_id in zip(s["episodic"], ids, strict=True):
            key_to_id[e["key"]], key_type[e["key"]] = memory_id, "episodic"
        for f in s["semantic"]:  # in file order, so superseded facts exist before their successors
            written = services.fact_write(subject=subject, text=f["text"], confidence=f.get("confidence", 1.0),
                                          supersedes=[key_to_id[x] for x in f.get("supersedes") or []],
                                          contradiction=f.get("contradiction") or "natural")
            key_to_id[f["key"]], key_type[f["key"]] = written["id"], "semantic"
        for p in s["procedural"]:
            written = services.playbook_write(subject=subject, trigger=p["trigger"], steps=p["steps"])
            key_to_id[p["key"]], key_type[p["key"]] = written["id"], "procedural"
            for outcome, times in ((True, p.get("success", 0)), (False, p.get("failure", 0))):
                for _ in range(times):
                    services.playbook_outcome_record(subject=subject, playbook_id=written["id"], success=outcome)
        log(f"  loaded {s['tenant']}/{s['external_id']}")
    return key_to_id, key_type, subjects


# ---------------------------------------------------------------- LoCoMo


LOCOMO_DATE = re.compile(r"^(?P<time>\d{1,2}:\d{2}\s*[ap]m)\s+on\s+(?P<date>\d{1,2}\s+\w+,?\s+\d{4})$", re.I)


def locomo_session_date(raw: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → an aware UTC datetime."""
    m = LOCOMO_DATE.match(raw.strip())
    if not m:
        raise ValueError(f"unrecognised LoCoMo date {raw!r}")
    from datetime import UTC

    return datetime.strptime(f"{m['time'].replace(' ', '').upper()} {m['date'].replace(',', '')}",
                             "%I:%M%p %d %B %Y").replace(tzinfo=UTC)


_DIA_ID = re.compile(r"D\s*(\d+)\s*:\s*(\d+)", re.I)


def locomo_turn_id(conversation: str, dia_id: str) -> str:
    """A turn's episode id from its ``dia_id`` ("D3:12"), numbers read as numbers ("D3:012" is
    the same turn), so evidence written either way finds it."""
    if m := _DIA_ID.fullmatch(dia_id.strip()):
        return f"locomo-{conversation}-d{int(m[1])}-{int(m[2])}"
    return f"locomo-{conversation}-{dia_id.replace(':', '-')}".lower()


def locomo_episodes(conversation: str, data: dict, *, context_turns: int = 0) -> list[dict[str, Any]]:
    """Every turn as an episode: 'Speaker: text' (plus the shared photo's caption), dated by its
    session, with its session id. By default no context is sent (Engram derives it, as for any
    agent); ``context_turns`` > 0 is the older client-context mode: the caller sends the turns
    before it in the session as its explicit context."""
    conv = data.get("conversation", data)  # the dev set is flat; the original nests it
    episodes = []
    n = 1
    while f"session_{n}" in conv:
        when = locomo_session_date(conv[f"session_{n}_date_time"])
        turns = conv[f"session_{n}"]
        texts = []
        for turn in turns:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo of {turn['blip_caption']}]"
            texts.append(text)
        for i, turn in enumerate(turns):
            window = texts[max(0, i - context_turns):i] if context_turns else []
            episodes.append({"id": locomo_turn_id(conversation, turn["dia_id"]), "text": texts[i], "occurred_at": when,
                             "session_id": f"session_{n}", "metadata": {"dia_id": turn["dia_id"]},
                             **({"context": "\n".join(window) or None} if context_turns else {})})
        n += 1
    return episodes


def import_by_client_id(*, subject: Subject, episodes: list[dict[str, Any]]) -> dict[str, str]:
    """Import ``episodes`` (each with its dataset's ``id``) in one call; {stored id: dataset id}.
    An imported episode is stored under its id namespaced to the end-user, while a dataset's gold
    names its own ids: scores compare through this map."""
    stored = services.episodes_import(subject=subject, episodes=episodes)
    return {memory_id: e["id"] for e, memory_id in zip(episodes, stored, strict=True)}


def locomo_evidence(conversation: str, evidence: list[str]) -> list[str]:
    ids = [locomo_turn_id(conversation, m[0]) for item in evidence for m in _DIA_ID.finditer(item)]
    return list(dict.fromkeys(ids))


def evaluate_locomo(*, paths: list[Path], k: int = 10, context_turns: int = 0,
                    log: Callable[[str], None] = print, consolidate: bool = False,
                    extractor: str | None = None, dedicated: bool = False) -> dict[str, Any]:
    """Each conversation goes through the import service in one call, as an agent's import
    would (the default: no client-side context, so Engram derives it); questions are recalled
    through the subject's own key. ``consolidate``: consolidate each conversation first and
    recall over turns and facts together; R@k still counts evidence turns only (facts must not
    push them out). ``dedicated``: the conversations' tenant in dedicated indices (as
    ``evaluate_fixture``)."""
    scores = Scores()
    types = ["episodic", "semantic"] if consolidate else ["episodic"]
    with sandbox():
        tenant = scratch_tenant(slug="locomo", name="LoCoMo", dedicated=dedicated)
        for path in paths:
            data = json.loads(path.read_text())
            conversation = path.stem
            subject = tenant_services.subject_get_or_create(tenant=tenant, external_id=f"conv-{conversation}",
                                                            actor="eval")
            episodes = locomo_episodes(conversation, data, context_turns=context_turns)
            turn_of = import_by_client_id(
                subject=subject, episodes=[{**e, "occurred_at": e["occurred_at"].isoformat()} for e in episodes])
            now = max(e["occurred_at"] for e in episodes)
            if consolidate:
                log(f"  {path.name}: consolidated {consolidate_all(subject=subject, extractor=extractor)}")
            asked = 0
            for q in data["qa"]:
                if q.get("category") not in (1, 2, 3, 4):
                    continue
                expected = locomo_evidence(conversation, q.get("evidence") or [])
                if not expected:
                    continue
                results = memory_recall(subject=subject, query=q["question"], k=k, types=types, now=now)
                scores.add(f"category {q['category']}",
                           _question_scores([turn_of.get(r["id"], r["id"]) for r in results], expected))
                asked += 1
            log(f"  {path.name}: {len(episodes)} turns, {asked} questions")
    return scores.summary()


def format_table(summary: dict[str, dict[str, float]], *, metrics: tuple[str, ...]) -> str:
    lines = [f"{'':<14}{'n':>5}" + "".join(f"{m:>8}" for m in metrics)]
    for group, values in summary.items():
        lines.append(f"{group:<14}{values['n']:>5}" + "".join(f"{values[m]:>8.3f}" for m in metrics))
    return "\n".join(lines)
