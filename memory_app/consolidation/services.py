"""Consolidation runs: read an end-user's waiting episodes, extract, ground, resolve, write,
stamp each episode read (``consolidated_at``, written last, so a run killed anywhere leaves its
episodes waiting and the rerun's deterministic ids write once), record the run. A run waits for its
end-user's queued writes, and stops, writing nothing more, once its end-user is being erased."""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from engram_core.errors import Conflict, EngramError
from engram_core.es.schema import MemoryType
from engram_core.observability import metrics
from engram_core.observability.tracing import annotate, detached, span_linked, traceparent, tracing_enabled
from memory_app.consolidation import apply, changes, selectors
from memory_app.consolidation.extractors import Extraction, ExtractorOptions, Known, get_extractor
from memory_app.consolidation.grounding import episode_evidence, is_grounded
from memory_app.consolidation.resolve import (
    Duplicates,
    FactAction,
    PlaybookAction,
    StoredFact,
    StoredPlaybook,
    fact_id,
    playbook_id,
    resolve_fact,
    resolve_playbook,
)
from memory_app.providers import get_embedder
from memory_app.freshness import refresh_force
from memory_app.metering import usage_add
from memory_app.models import ConsolidationLease, ConsolidationRun, OutboxEntry
from engram_core.es.outage import is_outage, outage_error
from memory_app.services.context import ContextOptions
from memory_app.validation import Limits
from tenants.models import Subject
from tenants.selectors import SubjectGone, memory_scope
from tenants.services.guard import require_dls

log = logging.getLogger(__name__)
CONSOLIDATE_TASK = "memory_app.tasks.consolidate_subject"
Status = ConsolidationRun.Status


@dataclass
class Plan:
    facts: list[FactAction] = field(default_factory=list)
    playbooks: list[PlaybookAction] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def as_list(self) -> list[dict[str, Any]]:
        return [*(a.as_dict() for a in self.facts), *({"kind": "playbook", **a.as_dict()} for a in self.playbooks)]


@dataclass
class ConsolidationResult:
    run: ConsolidationRun
    changes: list[dict[str, Any]] | None = None  # dry run: the proposed changes


@dataclass(frozen=True)
class RunOptions:
    """The operator's settings a run reads, once at its entry (``consolidation_run``)."""

    lease_seconds: int  # ENGRAM_CONSOLIDATION_LEASE_SECONDS
    known_memories: int  # ENGRAM_CONSOLIDATION_KNOWN_MEMORIES: what an extractor shown the stored ones sees
    retry_after: int  # ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS: a run held back by queued writes tries again then
    linking: ChangeLinking  # ENGRAM_CHANGE_MIN_TOPIC_COSINE, ENGRAM_CHANGE_MIN_COSINE
    episodes: int  # ENGRAM_CONSOLIDATION_MAX_EPISODES: the most one run reads
    context_episodes: int  # ENGRAM_CONSOLIDATION_CONTEXT_EPISODES: earlier turns of a session read with them
    neighbours: int  # ENGRAM_CONSOLIDATION_NEIGHBOURS: stored memories a candidate is held against
    duplicates: Duplicates  # when a candidate is a stored fact said again
    extractors: ExtractorOptions  # the default extractor, the LLM's endpoint
    limits: Limits  # what the memories a run writes are checked within
    context: ContextOptions  # how a cascade the run meets embeds changed contexts

    @classmethod
    def from_settings(cls) -> RunOptions:
        return cls(lease_seconds=settings.ENGRAM_CONSOLIDATION_LEASE_SECONDS,
                   known_memories=settings.ENGRAM_CONSOLIDATION_KNOWN_MEMORIES,
                   retry_after=settings.ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS, linking=ChangeLinking.from_settings(),
                   episodes=settings.ENGRAM_CONSOLIDATION_MAX_EPISODES,
                   context_episodes=settings.ENGRAM_CONSOLIDATION_CONTEXT_EPISODES,
                   neighbours=settings.ENGRAM_CONSOLIDATION_NEIGHBOURS, duplicates=Duplicates.from_settings(),
                   extractors=ExtractorOptions.from_settings(), limits=Limits.from_settings(),
                   context=ContextOptions.from_settings())


# ---------------------------------------------------------------- requesting and scheduling


def consolidation_request(*, subject: Subject, trigger: str = ConsolidationRun.Trigger.API,
                          extractor: str | None = None, extractors: ExtractorOptions | None = None
                          ) -> ConsolidationRun:
    """Queue a run of ``subject`` on Celery; returns the queued run (its id is what to poll).
    ``extractors``: the settings, read here when not given."""
    # ValidationFailed now rather than in the worker
    extractor_obj = get_extractor(extractor, options=extractors or ExtractorOptions.from_settings())
    run = ConsolidationRun.objects.create(subject=subject, trigger=trigger, extractor=extractor_obj.name,
                                          extractor_version=extractor_obj.version, traceparent=traceparent())
    transaction.on_commit(lambda: _send(subject_id=subject.pk, run_id=run.pk))
    return run


def _send(*, subject_id: int, run_id: int) -> None:
    # By name: memory_app.tasks imports this module. Outside the caller's trace: the run's own
    # trace links back to it (run.traceparent).
    with detached():
        current_app.send_task(CONSOLIDATE_TASK, kwargs={"subject_id": subject_id, "run_id": run_id})


@dataclass(frozen=True)
class DueOptions:
    """When an end-user is due a scheduled run, as read at the beat task's entry."""

    after_episodes: int  # ENGRAM_CONSOLIDATION_AFTER_EPISODES: this many waiting
    quiet_minutes: int  # ENGRAM_CONSOLIDATION_QUIET_MINUTES: or some waiting and none newer than this
    lease_seconds: int  # ENGRAM_CONSOLIDATION_LEASE_SECONDS: a run queued longer ago is presumed lost

    @classmethod
    def from_settings(cls) -> DueOptions:
        return cls(after_episodes=settings.ENGRAM_CONSOLIDATION_AFTER_EPISODES,
                   quiet_minutes=settings.ENGRAM_CONSOLIDATION_QUIET_MINUTES,
                   lease_seconds=settings.ENGRAM_CONSOLIDATION_LEASE_SECONDS)


def consolidation_due(*, options: DueOptions, now=None) -> list[Subject]:
    """End-users to consolidate now: N episodes waiting, or some waiting and none newer than T
    minutes (``options``); not those with a run queued or holding the lease."""
    now = now or timezone.now()
    quiet_before = (now - timedelta(minutes=options.quiet_minutes)).isoformat()
    due: dict[tuple[str, str], int] = {}
    for row in selectors.episodes_pending_by_subject(now=now):
        newest = row["newest"]
        newest_iso = newest if isinstance(newest, str) else None
        if row["pending"] >= options.after_episodes or (newest_iso and newest_iso <= quiet_before):
            due[(row["tenant_id"], row["user_id"])] = row["pending"]
    if not due:
        return []
    subjects = [s for s in Subject.objects.select_related("tenant").filter(user_id__in=[u for _, u in due],
                                                                         erased_at__isnull=True)
                if (s.tenant.slug, str(s.user_id)) in due]
    busy = set(ConsolidationLease.objects.filter(subject__in=subjects, expires_at__gt=now)
               .values_list("subject_id", flat=True))
    # A run queued recently is still coming (one queued longer than a lease ago is presumed lost).
    recent = timezone.now() - timedelta(seconds=options.lease_seconds)
    busy |= set(ConsolidationRun.objects.filter(subject__in=subjects, status=Status.QUEUED, created_at__gt=recent)
                .values_list("subject_id", flat=True))
    return [s for s in subjects if s.pk not in busy]


def consolidation_dispatch(*, now=None) -> int:
    """Queue a run for every end-user that is due (beat calls this: the settings are read here,
    once). Returns how many."""
    subjects = consolidation_due(options=DueOptions.from_settings(), now=now)
    extractors = ExtractorOptions.from_settings()
    for subject in subjects:
        consolidation_request(subject=subject, trigger=ConsolidationRun.Trigger.SCHEDULE, extractors=extractors)
    return len(subjects)


def consolidation_cancel(*, run_id: int | None, code: str, message: str = "the end-user was erased") -> None:
    """Mark a queued run that will not run as failed, with why (``code``)."""
    if run_id is not None:
        ConsolidationRun.objects.filter(pk=run_id, status=Status.QUEUED).update(
            status=Status.FAILED, finished_at=timezone.now(), error={"code": code, "message": message, "details": {}})


# ---------------------------------------------------------------- the run


def consolidation_run(*, subject: Subject, extractor: str | None = None, dry_run: bool = False,
                      trigger: str = ConsolidationRun.Trigger.MANUAL, run_id: int | None = None,
                      holder: str | None = None) -> ConsolidationResult:
    """Consolidate the end-user's waiting episodes (at most ENGRAM_CONSOLIDATION_MAX_EPISODES).

    Recorded as a ConsolidationRun (``run_id``: the queued one to use). ``dry_run`` returns the
    proposed changes and writes nothing to Elasticsearch. Guarantees: the watermark moves only
    after every write derived from the episodes succeeded; any failure (the extractor's
    ExtractorFailed included) marks the run failed, leaves the watermark where it was and is
    raised. Only one run per end-user writes at a time (Conflict ``consolidation_running``), and
    none while the end-user has writes waiting in the outbox (Conflict ``writes_queued``: a queued
    forget must not be overtaken; the queued run stays queued and its task tries again).
    """
    origin = (ConsolidationRun.objects.filter(pk=run_id).values_list("traceparent", flat=True).first() or ""
              if run_id is not None and tracing_enabled() else "")
    with span_linked("engram.consolidation", origin, attributes={
            "engram.tenant_id": subject.tenant_id, "engram.consolidation_run": run_id or 0,
            "engram.dry_run": dry_run}):
        return _consolidation_run(subject=subject, extractor=extractor, dry_run=dry_run, trigger=trigger,
                                  run_id=run_id, holder=holder, options=RunOptions.from_settings())


def _consolidation_run(*, subject: Subject, extractor: str | None, dry_run: bool, trigger: str,
                       run_id: int | None, holder: str | None, options: RunOptions) -> ConsolidationResult:
    require_dls()
    if OutboxEntry.objects.pending_for(tenant=subject.tenant, external_id=subject.external_id):
        raise Conflict("the end-user has writes waiting to be applied; consolidation follows them",
                       code="writes_queued", details={"retry_after": options.retry_after})
    if run_id is not None:
        run = ConsolidationRun.objects.get(pk=run_id, subject=subject)
        if run.status in (Status.SUCCEEDED, Status.DRY_RUN):
            return ConsolidationResult(run=run)  # a redelivered task whose run had finished
    else:
        run = ConsolidationRun(subject=subject, trigger=trigger)
    extractor_obj = get_extractor(extractor or (run.extractor or None), options=options.extractors)
    run.extractor, run.extractor_version = extractor_obj.name, extractor_obj.version
    run.status, run.started_at, run.error = Status.RUNNING, timezone.now(), None
    run.save()
    holder = holder or f"run-{run.pk}-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    leased = False
    lease = _LeaseKeeper(subject=subject, holder=holder, seconds=options.lease_seconds)
    try:
        if not dry_run:
            _lease_acquire(subject=subject, holder=holder, run=run, seconds=options.lease_seconds)
            leased = True
            lease.start()
        changes = _consolidate(subject=subject, run=run, extractor_obj=extractor_obj, dry_run=dry_run, lease=lease,
                               options=options)
    except SubjectGone:
        # Erased while the run read or wrote: it stops here and writes nothing more.
        run.status = Status.FAILED
        run.error = {"code": "subject_erased", "message": "the end-user was erased during the run", "details": {}}
        raise
    except Exception as exc:
        run.status = Status.FAILED
        # A node lost mid-run is an outage, named as one (the task tries again), not an internal error.
        failure = outage_error(exc) if not isinstance(exc, EngramError) and is_outage(exc) else exc
        # An agent reads the run: the kind of failure only; the cause (an internal address in it,
        # say) is in the worker's log, where the raise below puts it.
        run.error = failure.as_dict() if isinstance(failure, EngramError) else {
            "code": "internal_error", "message": f"the run failed ({type(exc).__name__}); the worker's log has the cause",
            "details": {}}
        if failure is not exc:
            raise failure from exc
        raise
    else:
        run.status = Status.DRY_RUN if dry_run else Status.SUCCEEDED
        return ConsolidationResult(run=run, changes=changes if dry_run else None)
    finally:
        lease.stop()
        run.duration_ms = int((time.monotonic() - started) * 1000)
        run.finished_at = timezone.now()
        run.save()
        _measured(run, subject=subject)
        if leased:
            _lease_release(subject=subject, holder=holder, succeeded=run.status == Status.SUCCEEDED)


def _measured(run: ConsolidationRun, *, subject: Subject) -> None:
    """A finished run, for /metrics, its span and the tenant's usage."""
    metrics.CONSOLIDATION_RUNS.labels(run.trigger, run.status).inc()
    metrics.CONSOLIDATION_SECONDS.labels(run.extractor).observe((run.duration_ms or 0) / 1000)
    for change in ("created", "merged", "superseded", "flagged"):
        if n := getattr(run, f"facts_{change}"):
            metrics.CONSOLIDATION_FACTS.labels(change).inc(n)
    if run.prompt_tokens:
        metrics.LLM_TOKENS.labels("in").inc(run.prompt_tokens)
    if run.completion_tokens:
        metrics.LLM_TOKENS.labels("out").inc(run.completion_tokens)
    annotate(consolidation_run=run.pk, status=run.status, episodes_read=run.episodes_read,
             facts_created=run.facts_created)
    stored = run.facts_created + run.playbooks_created if run.status == Status.SUCCEEDED else 0
    usage_add(tenant_id=subject.tenant_id, consolidation_runs=1, llm_tokens_in=run.prompt_tokens,
              llm_tokens_out=run.completion_tokens, memories_stored=stored)


def _consolidate(*, subject: Subject, run: ConsolidationRun, extractor_obj, dry_run: bool,
                 lease: _LeaseKeeper, options: RunOptions) -> list[dict[str, Any]] | None:
    # Every turn acknowledged before the run was asked for is read, stored without a refresh or not.
    refresh_force(subject=subject, types=(MemoryType.EPISODIC,))
    pending = selectors.episodes_pending(subject=subject, limit=options.episodes)
    episodes = [p.episode for p in pending]
    run.episodes_read = len(episodes)
    if not dry_run:
        run.facts_flagged = _review_sweep(subject=subject, context=options.context)
    if not episodes:
        return []
    context = selectors.episodes_context(subject=subject, episodes=episodes, turns=options.context_episodes)
    name = user_name(subject=subject)
    if getattr(extractor_obj, "uses_known", False):
        known = selectors.known_memories(subject=subject, limit=options.known_memories)
        extraction = extractor_obj.extract(episodes=episodes, context=context, known=known, user_name=name)
    else:
        known = Known()
        extraction = extractor_obj.extract(episodes=episodes, context=context, user_name=name)
    run.prompt_tokens, run.completion_tokens = extraction.prompt_tokens, extraction.completion_tokens
    run.candidates = len(extraction.facts) + len(extraction.playbooks)
    plan = _plan(subject=subject, extraction=extraction, episodes={e.id: e for e in [*episodes, *context]},
                 known=known, user_name=name, linking=options.linking, duplicates=options.duplicates,
                 neighbours=options.neighbours,
                 new_episodes=[] if getattr(extractor_obj, "uses_known", False) else episodes)
    run.candidates_dropped = len(plan.dropped)
    if dry_run:
        _count(run, plan, applied=None)
        return [*plan.as_list(), *({"action": "drop", **d} for d in plan.dropped)]
    lease.check()  # the extraction may have taken long: still this run's end-user to write for
    outcomes = {"facts": [], "playbooks": []}
    for action in plan.facts:
        outcomes["facts"].append(apply.fact_apply(subject=subject, action=action, run_id=run.pk,
                                                  extractor=extractor_obj.name, limits=options.limits,
                                                  context=options.context))
    for action in plan.playbooks:
        outcomes["playbooks"].append(apply.playbook_apply(subject=subject, action=action, run_id=run.pk,
                                                          extractor=extractor_obj.name, limits=options.limits,
                                                          context=options.context))
    _count(run, plan, applied=outcomes)
    lease.check()
    apply.episodes_mark_consolidated(subject=subject, episodes=pending)
    return None


def user_name(*, subject: Subject) -> str:
    """How facts name the end-user for their unlabelled turns: the display name, else "the user"."""
    return " ".join((subject.display_name or "").split()) or "the user"


def _plan(*, subject: Subject, extraction: Extraction, episodes: dict[str, Any], linking: ChangeLinking,
          duplicates: Duplicates, neighbours: int,
          known: Known | None = None, user_name: str = "the user", new_episodes: list | None = None) -> Plan:
    """``new_episodes``: the episodes read for changes in natural phrasing (``changes``); an
    extractor that is shown the stored facts decides supersessions itself and reads none."""
    plan = Plan()
    scope = memory_scope(subject=subject)
    known = known or Known()
    # An extractor may name stored memories itself; only the ones it was shown count.
    known_facts = {f.id for f in known.facts}
    known_playbooks = {p.id: p for p in known.playbooks}
    facts = []
    for candidate in extraction.facts:
        if candidate.supersedes:
            candidate = replace(candidate, supersedes=tuple(i for i in candidate.supersedes if i in known_facts))
        texts = [episode_evidence(episodes[i].text, episodes[i].occurred_at) for i in candidate.episode_ids
                 if i in episodes]
        # The end-user's name is not in their own turns; a fact may still name them by it.
        if texts and is_grounded(candidate.text, [*texts, user_name]):
            facts.append(candidate)
        else:
            plan.dropped.append({"kind": "fact", "reason": "ungrounded", "text": candidate.text,
                                 "supporting_episode_ids": list(candidate.episode_ids)})
    procedure = {i for playbook in extraction.playbooks for i in playbook.episode_ids}
    facts, probes, dropped = changes_read(facts=facts, new_episodes=new_episodes or [], episodes=episodes,
                                          display_name=subject.display_name, procedure=procedure)
    plan.dropped += dropped
    playbooks = []
    for candidate in extraction.playbooks:
        texts = [episodes[i].text for i in candidate.episode_ids if i in episodes]
        # The numbering is ours, not the user's. An outcome of a stored playbook claims only the
        # outcome and any refined steps.
        steps = re.sub(r"(?m)^\s*\d+[.)]\s*", "", candidate.steps)
        refined = re.sub(r"(?m)^\s*\d+[.)]\s*", "", candidate.refined_steps or "")
        claim = refined if candidate.playbook_id in known_playbooks else f"{candidate.trigger} {steps}"
        if texts and (not claim.strip() and candidate.playbook_id in known_playbooks or is_grounded(claim, texts)):
            playbooks.append(candidate)
        else:
            plan.dropped.append({"kind": "playbook", "reason": "ungrounded", "text": candidate.trigger,
                                 "supporting_episode_ids": list(candidate.episode_ids)})

    embedder = get_embedder()
    fact_vectors = embedder.embed_documents([c.text for c in facts]) if facts else []
    searches = [changes.neighbour_searches(c.text, probes.get(_probe_key(c))) for c in facts]
    near_facts = selectors.fact_neighbours(subject=subject, vectors=fact_vectors, k=neighbours,
                                           texts=[text for text, _ in searches], words=[words for _, words in searches])
    new_ids = [fact_id(scope, c) for c in facts]
    existing = selectors.memories_existing(subject=subject, ids=new_ids, memory_type=MemoryType.SEMANTIC)
    plan.facts = facts_plan(facts=facts, new_ids=new_ids, neighbours=near_facts, vectors=fact_vectors,
                            existing=existing, probes=probes, episodes=episodes, display_name=subject.display_name,
                            linking=linking, duplicates=duplicates)

    triggers = [c.trigger for c in playbooks]
    pb_vectors = embedder.embed_documents(triggers) if playbooks else []
    pb_neighbours = selectors.playbook_neighbours(subject=subject, texts=triggers, vectors=pb_vectors, k=neighbours)
    created = []
    for candidate, near in zip(playbooks, pb_neighbours, strict=True):
        if (target := known_playbooks.get(candidate.playbook_id or "")) is not None:
            if candidate.outcome is not None:
                plan.playbooks.append(PlaybookAction(kind="outcome", candidate=candidate, playbook_id=target.id,
                                                     target_trigger=target.trigger))
            continue
        action = resolve_playbook(candidate, new_id=playbook_id(scope, candidate), neighbours=[*near, *created])
        if action is None:
            continue
        plan.playbooks.append(action)
        if action.kind == "create":
            created.append(StoredPlaybook(id=action.playbook_id, trigger=candidate.trigger, steps=candidate.steps,
                                          cosine=1.0, supporting_episode_ids=list(candidate.episode_ids)))
    return plan


@dataclass(frozen=True)
class ChangeLinking:
    """How near a change in natural phrasing must be to a stored fact to replace it
    (``changes.change_target``): sharing only a topic, or nothing but the vector."""

    min_topic_cosine: float = 0.6
    min_cosine: float = 1.01
    # A cue that names a replacement ("switched", "moved to", "instead of") links by a shared topic
    # from this cosine; None: at ``min_topic_cosine`` like every cue. Set on our labelled set: the
    # dev conversations do not tell (docs/consolidation.md).
    min_strong_topic_cosine: float | None = 0.25

    @classmethod
    def from_settings(cls) -> ChangeLinking:
        return cls(min_topic_cosine=settings.ENGRAM_CHANGE_MIN_TOPIC_COSINE,
                   min_cosine=settings.ENGRAM_CHANGE_MIN_COSINE)


def facts_plan(*, facts: list, new_ids: list[str], neighbours: list[list[StoredFact]], vectors: list,
               existing: set[str], probes: dict, episodes: dict[str, Any], display_name: str,
               linking: ChangeLinking, duplicates: Duplicates) -> list[FactAction]:
    """What each grounded candidate (in episode order) does to the stored facts: no Elasticsearch,
    the neighbours (``selectors.fact_neighbours``) and the ids already stored are given. A
    candidate that carries a change (``probes``) supersedes the fact ``changes.change_target``
    links it to; every other goes through ``resolve_fact``. Facts created or replaced earlier in
    the run are neighbours of the later candidates."""
    actions: list[FactAction] = []
    in_run: list[StoredFact] = []
    retired: set[str] = set()
    vectors_by_id: dict[str, Any] = {}
    for candidate, new_id, near, vector in zip(facts, new_ids, neighbours, vectors, strict=True):
        pool = [f for f in [*near, *in_run] if f.id not in retired]
        if candidate.supersedes:  # a fact already replaced in this run is replaced once
            candidate = replace(candidate, supersedes=tuple(i for i in candidate.supersedes if i not in retired))
        change = None
        if (probe := probes.get(_probe_key(candidate))) is not None and not candidate.supersedes:
            candidate, change = _change_link(candidate, probe=probe, pool=pool, vector=vector,
                                             vectors_by_id=vectors_by_id, display_name=display_name,
                                             linking=linking, episodes=episodes)
        vectors_by_id[new_id] = vector
        action = resolve_fact(candidate, new_id=new_id, neighbours=pool, exists=new_id in existing,
                              duplicates=duplicates)
        if change is not None and action.kind == "supersede":
            action.change = change
        told = [episodes[i].occurred_at for i in candidate.episode_ids if i in episodes]
        # A fact became true when first told; a replacement when the change was told (its last turn:
        # "switched from Virgin Media to BT" may cite the turn that named Virgin Media too).
        action.valid_from = (max(told) if action.kind == "supersede" else min(told)) if told else None
        actions.append(action)
        if action.kind in ("create", "supersede", "exists"):
            in_run.append(StoredFact(id=new_id, text=candidate.text, slot=action.slot, value=candidate.value,
                                     supporting_episode_ids=list(candidate.episode_ids), in_run=True,
                                     topics=tuple(change["topics"]) if change else (), valid_from=action.valid_from))
            retired.update(action.supersedes)
        elif action.kind == "merge":
            for f in in_run:
                if f.id == action.memory_id:
                    f.supporting_episode_ids += list(candidate.episode_ids)
    return actions


def _probe_key(candidate) -> tuple[str, tuple[str, ...]]:
    return candidate.text, tuple(candidate.episode_ids)


def changes_read(*, facts: list, new_episodes: list, episodes: dict[str, Any], display_name: str,
                 procedure: set[str] | frozenset[str] = frozenset()) -> tuple[list, dict, list[dict[str, Any]]]:
    """The new episodes read for changes (``changes.episode_probes``): the candidates with the
    ones it adds (grounded like any other) in episode order, the probe of each change sentence by
    its candidate, and what did not come in (ungrounded, a remark the reader set aside, or a
    sentence of a turn a playbook cites: ``procedure``, the problem, its steps and outcomes)."""
    probes: dict[tuple[str, tuple[str, ...]], changes.Probe] = {}
    added: list = []
    dropped: list[dict[str, Any]] = []
    names = [display_name] if display_name else []
    for episode in new_episodes:
        if episode.role != "user":
            continue
        found = changes.episode_probes(episode=episode, candidates=facts, display_names=names)
        dropped += [{"kind": "fact", "reason": "remark", "text": text, "supporting_episode_ids": [episode.id]}
                    for text in found.remarks]
        for candidate in found.added:
            if episode.id in procedure:
                # A device's trouble and the steps tried are the playbook's, not facts ("I replaced the bulb").
                dropped.append({"kind": "fact", "reason": "procedure", "text": candidate.text,
                                "supporting_episode_ids": list(candidate.episode_ids)})
            # The reader words the end-user's turn with their display name, which their turn never says.
            elif is_grounded(candidate.text, [episode_evidence(episode.text, episode.occurred_at), *names]):
                added.append(candidate)
            else:
                dropped.append({"kind": "fact", "reason": "ungrounded", "text": candidate.text,
                                "supporting_episode_ids": list(candidate.episode_ids)})
        for probe in found.probes:
            key = _probe_key(probe.candidate)
            # a change told in the same fact's words stands before something done or given up (a probe
            # that is only a plan's end)
            if key not in probes or probe.reading is not probe.fulfilment:
                probes[key] = probe
    if not added:
        return facts, probes, dropped
    when = {i: e.occurred_at for i, e in episodes.items()}
    ordered = sorted([*facts, *added], key=lambda c: max((when.get(i, "") for i in c.episode_ids), default=""))
    return ordered, probes, dropped


def _change_link(candidate, *, probe, pool: list[StoredFact], vector, vectors_by_id: dict[str, Any],
                 display_name: str, linking: ChangeLinking, episodes: dict[str, Any]
                 ) -> tuple[Any, dict[str, Any] | None]:
    """The candidate of a change sentence, superseding the speaker's fact it replaces (if any)."""
    holder = probe.holder
    own = {holder.lower()} | ({w.lower() for w in display_name.split()} if holder == "User" and display_name else set())
    stored = []
    kept = [fact for fact in pool
            # A labelled speaker's change replaces only that speaker's facts; an end-user's own turn any of theirs.
            if holder == "User" or own & {w.lower().removesuffix("'s").rstrip("'")
                                        for w in re.findall(r"[A-Za-z']+", fact.text)}]
    neutral = _name_neutral_cosines(candidate.text, [f.text for f in kept], display_name) if holder == "User" else None
    for n, fact in enumerate(kept):
        cosine = fact.cosine
        if neutral is not None:
            cosine = neutral[n]
        elif fact.in_run and fact.id in vectors_by_id:
            cosine = float(sum(a * b for a, b in zip(vector, vectors_by_id[fact.id], strict=True)))
        stored.append(changes.StoredFact(id=fact.id, text=fact.text, cosine=cosine, topics=fact.topics, slot=fact.slot,
                                         valid_from=fact.valid_from))
    told = [episodes[i].occurred_at for i in candidate.episode_ids if i in episodes]
    reading, link = probe.reading, None
    if reading is not probe.fulfilment:  # a probe that is only a plan's end replaces no value
        link = changes.change_target(reading, stored, self_names=own, min_cosine=linking.min_cosine,
                                     min_topic_cosine=linking.min_topic_cosine,
                                     min_strong_topic_cosine=linking.min_strong_topic_cosine,
                                     told_at=max(told) if told else None)
    if link is None and probe.fulfilment is not None:
        # no value replaced: maybe a plan of the speaker's that came true or was given up
        reading = probe.fulfilment
        link = changes.plan_target(reading, stored, self_names=own, told_at=max(told) if told else None) \
            if reading.cue not in changes.NEWS_CUES else None
        if link is None and (step := changes.step_read(reading.sentence, self_names=own)) is not None:
            # or a later step of a pursuit of theirs ("interviewed for the scheme", "got accepted")
            reading = step
            link = changes.step_target(reading, stored, self_names=own, told_at=max(told) if told else None)
    if link is None and probe.reading.kind != changes.HARSH:
        # or a habit of theirs paused or cut down, a count of their animals grown by one taken in, a
        # bond grown (engaged, married) or a new home
        for read, target in changes.NEWS_READERS:
            if (other := read(probe.reading.sentence, self_names=own)) is not None and (found := target(
                    other, stored, self_names=own, told_at=max(told) if told else None)) is not None:
                reading, link = other, found
                break
    if link is None:
        return candidate, None
    topics = sorted(changes.topics_of(link.fact.text) | set(link.fact.topics) | changes.topics_of(reading.clause))
    change = {"cue": reading.cue, "by": link.by, "shared": list(link.shared), "kind": reading.kind,
              "topics": topics, "replaced": link.fact.id, "cosine": round(link.fact.cosine, 3)}
    return replace(candidate, supersedes=(link.fact.id,), change=reading.kind), change


def _name_neutral_cosines(text: str, others: list[str], display_name: str) -> list[float] | None:
    """The cosines of ``text`` to ``others`` with the end-user's display name written "User" in all of
    them: a name in both texts moves their cosine, and whether a change links must not hang on what
    the end-user is called (without a display name their facts say "the user")."""
    if not others:
        return None
    words = [w for w in display_name.split() if w]
    spelled = [r"\s+".join(re.escape(w) for w in words)] if words else []
    name = re.compile(r"\b(?:" + "|".join([*spelled, "the user"]) + r")\b", re.I)
    vectors = get_embedder().embed_documents([name.sub("User", t) for t in [text, *others]])
    return [float(sum(a * b for a, b in zip(vectors[0], v, strict=True))) for v in vectors[1:]]


def _count(run: ConsolidationRun, plan: Plan, *, applied: dict[str, list[str]] | None) -> None:
    if applied is None:  # dry run: what would happen
        kinds = [a.kind for a in plan.facts]
        run.facts_created = kinds.count("create")
        run.facts_superseded = kinds.count("supersede")
        run.facts_merged = kinds.count("merge")
        run.facts_unchanged = kinds.count("exists")
        run.playbooks_created = sum(a.kind == "create" for a in plan.playbooks)
        run.outcomes_recorded = sum(a.candidate.outcome is not None for a in plan.playbooks)
        return
    facts, playbooks = applied["facts"], applied["playbooks"]
    run.facts_created = facts.count("created")
    run.facts_superseded = facts.count("superseded")
    run.facts_merged = facts.count("merged")
    run.facts_unchanged = facts.count("unchanged")
    run.playbooks_created = playbooks.count("created")
    run.outcomes_recorded = playbooks.count("outcome") + sum(
        1 for a, r in zip(plan.playbooks, playbooks, strict=True) if r == "created" and a.candidate.outcome is not None)
    run.details = {
        "facts": [{"action": r, "id": a.memory_id, "supersedes": a.supersedes}
                  for a, r in zip(plan.facts, facts, strict=True) if r != "unchanged"],
        "playbooks": [{"action": r, "id": a.playbook_id} for a, r in zip(plan.playbooks, playbooks, strict=True)
                      if r != "unchanged"],
        "dropped": {reason: sum(d["reason"] == reason for d in plan.dropped) for reason in ("ungrounded", "remark")},
    }


def _review_sweep(*, subject: Subject, context: ContextOptions) -> int:
    """Current facts this consolidation wrote whose supporting episodes were forgotten without them
    follow them now (``apply.derived_repair``). Returns how many were forgotten or flagged."""
    facts = selectors.facts_with_support(subject=subject)
    ids = list({i for _, src in facts for i in src.get("supporting_episode_ids") or []})
    present = set(selectors.memories_existing(subject=subject, ids=ids, memory_type=MemoryType.EPISODIC)) if ids \
        else set()
    return apply.derived_repair(subject=subject, facts=facts, present=present, context=context)


def consolidate_all(*, subject: Subject, extractor: str | None = None) -> dict[str, int]:
    """Consolidate until no episode waits (evaluation, back-fills); returns the summed run counters."""
    totals = {"runs": 0, "episodes_read": 0, "facts_created": 0, "facts_merged": 0, "facts_superseded": 0,
              "candidates_dropped": 0, "playbooks_created": 0, "outcomes_recorded": 0, "prompt_tokens": 0,
              "completion_tokens": 0, "duration_ms": 0}
    while selectors.episodes_pending(subject=subject, limit=1):
        run = consolidation_run(subject=subject, extractor=extractor, trigger=ConsolidationRun.Trigger.EVAL).run
        totals["runs"] += 1
        for key in totals:
            if key != "runs":
                totals[key] += getattr(run, key) or 0
    return totals


# ---------------------------------------------------------------- lease


def _lease_acquire(*, subject: Subject, holder: str, run: ConsolidationRun, seconds: int) -> None:
    now = timezone.now()
    try:
        ConsolidationLease.objects.get_or_create(subject=subject)
    except IntegrityError:
        pass  # created concurrently
    free = Q(expires_at__isnull=True) | Q(expires_at__lt=now) | Q(holder=holder)
    taken = ConsolidationLease.objects.filter(free, subject=subject).update(
        holder=holder, expires_at=now + timedelta(seconds=seconds))
    if not taken:
        raise Conflict("a consolidation of this end-user is already running", code="consolidation_running",
                       details={"run_id": run.pk})
    # Runs left "running" by a worker that died are over: say so.
    ConsolidationRun.objects.filter(subject=subject, status=Status.RUNNING).exclude(pk=run.pk).update(
        status=Status.FAILED, finished_at=now,
        error={"code": "worker_lost", "message": "the worker stopped during the run; a later run took over",
               "details": {}})


class _LeaseKeeper:
    """Renews a run's lease while the run is alive (a thread, every third of the lease), so a run
    slower than the lease (an LLM taking its time) is never taken for dead: no twin marks it
    worker_lost and writes beside it. Should a renewal find the lease taken all the same, the run
    writes nothing more (``check``)."""

    def __init__(self, *, subject: Subject, holder: str, seconds: int) -> None:
        self.subject_id, self.holder = subject.pk, holder
        self.seconds = seconds
        self.lost = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._renew, name="consolidation-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        try:
            while not self._stopped.wait(self.seconds / 3):
                until = timezone.now() + timedelta(seconds=self.seconds)
                if not ConsolidationLease.objects.filter(subject_id=self.subject_id, holder=self.holder).update(
                        expires_at=until):
                    self.lost = True
                    return
        finally:
            connection.close()  # this thread's own connection

    def check(self) -> None:
        if self.lost:
            raise Conflict("the run's lease was taken over; it writes nothing more", code="consolidation_lease_lost")

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()


def _lease_release(*, subject: Subject, holder: str, succeeded: bool) -> None:
    update: dict[str, Any] = {"holder": "", "expires_at": None}
    if succeeded:
        update["last_success_at"] = timezone.now()
    ConsolidationLease.objects.filter(subject=subject, holder=holder).update(**update)

