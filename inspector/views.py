"""The memory inspector: server-rendered pages, htmx partials of the same templates.

Views are thin: declared through ``inspector.guards`` (login, the tenant or end-user resolved for
the view's permission, the staff access log, no-store), they call selectors (reads, through the
end-user's own DLS key) or the write path shared with the API (``memory_app.outbox.write_submit``)
and the tenants services, and render. Expected failures (EngramError: cluster down, not found,
invalid input) become messages on the page.
"""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from collections.abc import Callable
from datetime import datetime, time, timedelta

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ImproperlyConfigured
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from django_htmx.middleware import HtmxDetails
from elasticsearch import ApiError, TransportError
from engram_core.errors import EngramError
from engram_core.es.schema import MemoryType
from engram_core.validation import clean_date, clean_datetime
from memory_app import outbox, selectors
from memory_app.commands import write_command
from memory_app.services.context import ContextOptions
from memory_app.validation import Limits
from memory_app.consolidation import selectors as consolidation_selectors
from memory_app.consolidation import services as consolidation
from language.intent import Intent
from memory_app.metering import FIELDS as USAGE_FIELDS
from memory_app.metering import USAGE_MAX_DAYS, tenant_usage
from memory_app.models import ConsolidationRun, ForgetNote
from memory_app.recall import memory_recall_with_reading
from memory_app.recall.options import ranking_config
from memory_app.recall.read import ANSWERED_BY
from tenants import crypto
from tenants.models import AgentToken, AuditEvent, Membership, Subject, SubjectKey, Tenant
from tenants.selectors import (
    CheckpointStoreError,
    audit_events,
    audit_export_jsonl,
    audit_export_record,
    token_access_rows,
    token_access_summary,
)
from tenants.selectors import audit_verify as audit_verify_chains
from tenants.services.audit import audit_export_start, audit_record
from tenants.services.audit_checkpoints import audit_checkpoint_write
from tenants.services.keys import KeyLifetimes, subject_key_revoke, subject_key_rotate
from tenants.services.tokens import agent_token_create, agent_token_revoke

from . import access
from .guards import shown, shown_nothing, staff_view, subject_view, tenant_view

PAGE_SIZE = 50
EPISODE_PAGE = 50
CONSOLIDATION_RUNS = 10


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _problem(exc: Exception) -> str:
    if isinstance(exc, EngramError):
        return exc.message
    return f"Elasticsearch refused the request ({type(exc).__name__}); try again shortly"


def _reads(request, label: str, fn: Callable, default=None):
    """Run one read; on an expected failure show a message and carry on with ``default``."""
    try:
        return fn()
    except (EngramError, ApiError, TransportError) as exc:
        messages.error(request, f"{label}: {_problem(exc)}")
        return default


def _ctx(request, tenant: Tenant | None = None, **extra) -> dict:
    nav = {"keys": access.tenants_for(request.user, "keys.view"),
           "usage": access.tenants_for(request.user, "usage.view"),
           "audit": access.tenants_for(request.user, "audit.view")}
    return {"nav": nav, "tenant": tenant,
            "perms": access.permissions_in(request.user, tenant) if tenant else set(), **extra}


# ---------------------------------------------------------------- home


@require_GET
@staff_view()
def home(request: HtmxHttpRequest) -> HttpResponse:
    tenants = access.tenants_for(request.user, "home")
    tenant = next((t for t in tenants if t.slug == request.GET.get("tenant")), tenants[0] if tenants else None)
    q = request.GET.get("q", "").strip()[:200]
    page = rows = None
    if tenant:
        subjects = Subject.objects.filter(tenant=tenant).order_by("external_id")
        if q:
            subjects = subjects.filter(external_id__icontains=q) | subjects.filter(display_name__icontains=q)
        page = Paginator(subjects.order_by("external_id"), PAGE_SIZE).get_page(request.GET.get("page"))
        page_subjects = list(page.object_list)
        stats = _reads(request, "Memory counts unavailable",
                       lambda: selectors.subjects_memory_stats(tenant=tenant, subjects=page_subjects), {})
        rows = [{"subject": s, "stats": stats.get(str(s.user_id))} for s in page_subjects]
    context = _ctx(request, tenant, tenants=tenants, q=q, page=page, rows=rows)
    # A search or page change from the page itself swaps the table only (partial "page__part.html").
    partial = request.htmx and request.htmx.target == "subjects"
    response = render(request, "inspector/home__subjects.html" if partial else "inspector/home.html", context)
    response["Vary"] = "HX-Request"
    return response


# ---------------------------------------------------------------- end-user page


@require_GET
@subject_view("subject.view", reads="memories")
def subject_page(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    include_superseded = request.GET.get("superseded") == "1"
    counts = _reads(request, "Counts unavailable", lambda: selectors.subject_memory_counts(subject=subject), {})
    episodes = _reads(request, "Episodes unavailable", lambda: selectors.episode_list(subject=subject,
                                                                                      size=EPISODE_PAGE))
    facts = _reads(request, "Facts unavailable",
                   lambda: selectors.fact_list(subject=subject, include_superseded=include_superseded), [])
    playbooks = _reads(request, "Playbooks unavailable",
                       lambda: selectors.playbook_list(subject=subject, include_superseded=include_superseded,
                                                       outcome_weight=ranking_config().outcome_weight), [])
    catalog = _reads(request, "Catalog unavailable", lambda: selectors.catalog_list(subject=subject), [])
    # The live feed starts after the newest write (not the newest event shown: imports back-date).
    live_since = _reads(request, "Live updates unavailable",
                        lambda: selectors.episode_latest_write(subject=subject)) or timezone.now().isoformat()
    context = _ctx(request, subject.tenant, subject=subject, counts=counts, episodes=episodes, facts=facts,
                   playbooks=playbooks, catalog=catalog, include_superseded=include_superseded,
                   live_since=live_since,
                   **_consolidation_ctx(subject), forgets=_forgets(subject),
                   writes=outbox.subject_outbox(tenant=subject.tenant, external_id=subject.external_id))
    return render(request, "inspector/subject.html", context)


def _forgets(subject: Subject) -> list[dict]:
    """The end-user's last forgets from the audit log, each with its note (kept outside the log)."""
    events = list(AuditEvent.objects.filter(action="memory.forget", subject=subject)[:20])
    notes = dict(ForgetNote.objects.filter(audit_event__in=events).values_list("audit_event_id", "note"))
    return [{"event": e, "note": notes.get(e.pk, "")} for e in events]


@require_GET
@subject_view("subject.view", reads="episodes_live")
def episodes_live(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    """Polled every 2 s by an open end-user page: episodes written since the cursor."""
    since = request.GET.get("since") or timezone.now().isoformat()
    clean_datetime(since, field="since")  # a cursor the page never gave: 400, before any read
    try:
        new = selectors.episode_list_written_since(subject=subject, since=since)
        error = ""
    except (EngramError, ApiError, TransportError) as exc:
        new, error = [], _problem(exc)
    if not new:
        shown_nothing(request)
    shown(request, episodes=len(new), ids=[e["id"] for e in new])  # each batch, logged by its ids
    live_since = max([since, *(e["created_at"] for e in new)])
    return render(request, "inspector/subject__live.html",
                  {"subject": subject, "new": new, "live_since": live_since,
                   "live_error": error, "perms": access.permissions_in(request.user, subject.tenant)})


@require_GET
@subject_view("subject.view", reads="episodes_more")
def episodes_more(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    """Older episodes (``search_after`` cursor)."""
    try:
        episodes = selectors.episode_list(subject=subject, size=EPISODE_PAGE, cursor=request.GET.get("cursor"))
    except (EngramError, ApiError, TransportError) as exc:
        shown_nothing(request)
        return render(request, "inspector/_error_item.html", {"message": _problem(exc)})
    shown(request, episodes=len(episodes.items))
    return render(request, "inspector/subject__episodes.html",
                  {"subject": subject, "episodes": episodes,
                   "perms": access.permissions_in(request.user, subject.tenant)})


@require_GET
@subject_view("subject.view", reads="chain")
def chain_page(request: HtmxHttpRequest, subject: Subject, memory_id: str) -> HttpResponse:
    """A fact's or playbook's supersession chain, both ways, as a timeline (oldest first)."""
    history = _reads(request, "Chain unavailable",
                     lambda: selectors.memory_history(subject=subject, memory_id=memory_id[:64]))
    timeline = []
    if history:
        timeline = [*reversed(history["older"]), {**history["memory"], "current_view": True}, *history["newer"]]
    outcomes = []
    if history and history["memory"]["memory_type"] == "procedural":
        outcomes = selectors.playbook_outcomes(subject=subject, playbook_id=history["memory"]["id"])
    return render(request, "inspector/chain.html",
                  _ctx(request, subject.tenant, subject=subject, memory_id=memory_id, timeline=timeline,
                       outcomes=outcomes),
                  status=200 if history else 404)


@require_GET
@subject_view("subject.recall", reads="recall")
def recall_sandbox(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    """What the agent would recall, with explain and the reading of the question the hits were
    ranked by, without bumping use counts."""
    q = request.GET.get("q", "").strip()
    include_superseded = request.GET.get("superseded") == "1"
    as_of = request.GET.get("as_of", "").strip()
    hits, error, reading, names = [], "", None, ()
    ranking = ranking_config()
    if q:
        try:
            # A day of the calendar: what was true at its end (UTC).
            moment = f"{as_of}T23:59:59+00:00" if re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of) else (as_of or None)
            recall = memory_recall_with_reading(subject=subject, query=q, k=10, explain=True,
                                                include_superseded=include_superseded, as_of=moment,
                                                ranking=ranking)
            hits, reading, names = recall.hits, recall.reading, recall.entities
            shown(request, hits=len(hits))
        except (EngramError, ApiError, TransportError) as exc:
            error = _problem(exc)
    if not hits:
        shown_nothing(request)
    ranks = {hit["id"]: n for n, hit in enumerate(hits, start=1)}
    rows = [_explain_row(n, hit, ranks) for n, hit in enumerate(hits, start=1)]
    topic_vector = ranking.entity_topic_vector and ranking.entity_dense and ranking.dense
    context = _ctx(request, subject.tenant, subject=subject, q=q, rows=rows, error=error, reading=reading,
                   names=names, topic_vector=topic_vector, include_superseded=include_superseded, as_of=as_of,
                   mentions_minimum=ranking.entity_min_mentions,
                   temporal_boost=1 + ranking.temporal_boost, grace_days=ranking.temporal_grace_days,
                   synonym_weight=ranking.synonym_weight, own_name_weight=ranking.own_name_weight,
                   window_last=reading.time_window.end - timedelta(days=1) if reading and reading.time_window else None,
                   **_intent_context(reading.intent if reading else None, boost=ranking.intent_boost))
    if request.htmx:
        return render(request, "inspector/subject__recall.html", context)
    return render(request, "inspector/recall.html", context)


_INTENT_LABELS = {Intent.EVENT: "an event", Intent.STATE: "how things stand", Intent.PROCEDURE: "a way to do something"}


def _intent_context(intent: Intent | None, *, boost: float) -> dict:
    """How the recall sandbox names the kind of memory the question asks for (language.intent)."""
    if intent is None:
        return {}
    return {"intent_label": _INTENT_LABELS[intent], "intent_boost": 1 + boost,
            "intent_types": [t.value for t in MemoryType if t in ANSWERED_BY[intent]]}


def _explain_row(rank: int, hit: dict, ranks: dict[str, int]) -> dict:
    """Lay the explain dict out generically: scalar entries as name/value pairs, the multipliers as
    factors and the ranks in extra legs as ``<leg>_rank`` pairs. Five exceptions are shown under the hit as
    text, not as cells: ``dense_sentence`` (the sentence of an episode its dense rank came from),
    ``replies_to`` (the question a reply took credit from: its rank here, or ``None`` when it
    ranked below the list), ``neighbour`` (the session neighbour a turn took credit from, the
    same way), ``credited_by`` (the fact distilled from it that gave it credit: its
    rank here, or ``None``) and ``copies`` (memories of the same text left out of the list)."""
    explain = dict(hit.get("explain") or {})
    sentence = explain.pop("dense_sentence", None)
    replies_to = explain.pop("replies_to", None)
    reply = {"rank": ranks.get(replies_to)} if replies_to else None
    neighbour_id = explain.pop("neighbour", None)
    neighbour = {"rank": ranks.get(neighbour_id)} if neighbour_id else None
    credited_by = explain.pop("credited_by", None)
    fact = {"id": credited_by, "rank": ranks.get(credited_by)} if credited_by else None
    copies = explain.pop("copies", [])
    stale = explain.pop("superseded_fact", None)
    if stale:
        side = "below" if "below" in stale else "above" if "above" in stale else None
        # Which of the two factors this question applied, and where the fact that replaced it ranks here.
        multipliers = explain.get("multipliers") or {}
        factor = next(((name, multipliers[name]) for name in ("superseded", "was_true") if name in multipliers), None)
        successor = next((ranks[i] for i in stale.get("superseded_by") or [] if i in ranks), None)
        stale = {**stale, "placed": {"side": side, "rank": ranks.get(stale[side])} if side else None,
                 "factor": factor, "successor_rank": successor}
    scalars, factors = [], []
    for key, value in explain.items():
        if key == "multipliers":
            factors += list(value.items())
        elif isinstance(value, dict):
            # Not factors: ``extra_ranks`` holds a hit's ranks in the extra legs, shown beside bm25_rank.
            suffix = "_rank" if key == "extra_ranks" else ""
            scalars += [(f"{k}{suffix}", v) for k, v in value.items()]
        elif isinstance(value, list):
            scalars.append((key, ", ".join(map(str, value))))
        else:
            scalars.append((key, value))
    return {"rank": rank, "hit": hit, "scalars": scalars, "factors": factors, "sentence": sentence,
            "reply": reply, "neighbour": neighbour, "fact": fact, "copies": copies, "stale": stale}


# ---------------------------------------------------------------- consolidation


def _consolidation_ctx(subject: Subject) -> dict:
    runs = consolidation_selectors.consolidation_runs_list(subject=subject, limit=CONSOLIDATION_RUNS)
    active = any(r.status in (ConsolidationRun.Status.QUEUED, ConsolidationRun.Status.RUNNING) for r in runs)
    return {"runs": runs, "runs_active": active}


def _consolidation_panel(request, subject: Subject, **extra) -> HttpResponse:
    """The panel partial (htmx), or the end-user page for a plain form post."""
    if not request.htmx:
        return redirect(reverse("inspector:subject", args=[subject.user_id]) + "#consolidation-section")
    context = _ctx(request, subject.tenant, subject=subject, **_consolidation_ctx(subject), **extra)
    return render(request, "inspector/subject__consolidation.html", context)


@require_GET
@subject_view("subject.view", reads=None)
def consolidation_panel(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    """The recent runs (polled while one is queued or running): counts, no memory."""
    return _consolidation_panel(request, subject)


@require_POST
@subject_view("consolidation.dry_run", reads="consolidation_dry_run")
def consolidation_dry_run(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    """What a run would write now, shown inline; nothing is written to Elasticsearch (the run is
    recorded as ``dry_run``, ids and counts only; the proposals go to this response alone)."""
    proposals = None
    try:
        result = consolidation.consolidation_run(subject=subject, dry_run=True,
                                                 trigger=ConsolidationRun.Trigger.INSPECTOR)
        proposals = result.changes or []
        shown(request, run_id=result.run.pk, proposals=len(proposals))
    except (EngramError, ApiError, TransportError) as exc:
        shown_nothing(request)
        messages.error(request, f"Dry run failed: {_problem(exc)}")
    if not request.htmx and proposals is not None:
        messages.info(request, f"Dry run: {len(proposals)} proposed changes, nothing written.")
    return _consolidation_panel(request, subject, proposals=proposals)


@require_POST
@subject_view("consolidation.run", reads=None)
def consolidation_now(request: HtmxHttpRequest, subject: Subject) -> HttpResponse:
    """Queue a run through the same service as POST /api/v1/subjects/<id>/consolidate."""
    try:
        run = consolidation.consolidation_request(subject=subject, trigger=ConsolidationRun.Trigger.INSPECTOR)
    except (EngramError, ApiError, TransportError) as exc:
        messages.error(request, f"Could not queue a consolidation: {_problem(exc)}")
    else:
        audit_record(actor=request.user, action="consolidation.requested", subject=subject,
                     target_id=str(run.pk), details={"extractor": run.extractor})
        messages.success(request, f"Consolidation run #{run.pk} queued; this panel refreshes until it ends.")
    return _consolidation_panel(request, subject)


# ---------------------------------------------------------------- actions


@require_http_methods(["GET", "POST"])
@subject_view("memory.forget", reads="forget_preview")
def forget(request: HtmxHttpRequest, subject: Subject, memory_id: str) -> HttpResponse:
    """GET: the forget dialog, listing what would go with the memory (the facts and playbooks
    derived from an episode) before it is confirmed; the dialog's partial for htmx. POST: forget,
    through the API's write path, and say what went with it."""
    memory_id = memory_id[:64]
    back = reverse("inspector:subject", args=[subject.user_id])
    if request.method == "GET":
        preview = _reads(request, f"Could not read {memory_id}",
                         lambda: selectors.forget_preview(subject=subject, memory_id=memory_id))
        if preview:
            shown(request, memory_id=memory_id, derived=len(preview["derived"]))
        else:
            shown_nothing(request)
        context = _ctx(request, subject.tenant, subject=subject, memory_id=memory_id, preview=preview)
        template = "inspector/_forget_derived.html" if request.htmx else "inspector/forget.html"
        return render(request, template, context, status=200 if preview else 404)
    shown_nothing(request)  # a forget answers with what went, never with memory
    payload = {"reason": request.POST.get("reason", "").strip(), "note": request.POST.get("note", "").strip(),
               "cascade": request.POST.get("keep_derived") != "1"}
    try:
        write = write_command(tenant=subject.tenant, external_id=subject.external_id, operation="forget",
                              payload=payload, limits=Limits.from_settings(), actor=request.user,
                              context_options=ContextOptions.from_settings(),
                              lifetimes=KeyLifetimes.from_settings(), memory_id=memory_id)
        submitted = outbox.write_submit(tenant=subject.tenant, write=write, actor=request.user)
    except (EngramError, ApiError, TransportError) as exc:
        messages.error(request, f"Could not forget {memory_id}: {_problem(exc)}")
        if request.htmx:
            response = render(request, "inspector/_messages.html")
            response["HX-Reswap"] = "none"  # keep the memory on the page; the message arrives out of band
            return response
        return redirect(back)
    messages.success(request, f"Memory {memory_id} forgotten{_cascade_said((submitted.result or {}).get('cascade'))}"
                              + (" (queued: Elasticsearch is unavailable, it will be applied in order)"
                                 if submitted.queued else "") + ". Reason recorded in the audit log.")
    if request.htmx:
        # The memory's element is swapped for nothing; the message arrives out of band.
        return render(request, "inspector/_forgotten.html", {"memory_id": memory_id})
    return redirect(back)


def _cascade_said(cascade: dict | None) -> str:
    """What went with a forget, as the message says it."""
    if not cascade:
        return ""
    parts = [f"{len(cascade[k])} derived {'memory' if len(cascade[k]) == 1 else 'memories'} {verb}"
             for k, verb in (("forgotten", "forgotten with it"), ("flagged", "kept and flagged for review"),
                             ("kept", "kept as they are")) if cascade.get(k)]
    return f" ({'; '.join(parts)})" if parts else ""


@require_GET
@subject_view("subject.export", reads="export")
def export(request: HttpRequest, subject: Subject) -> HttpResponse:
    try:
        data = selectors.subject_export(subject=subject)
    except (EngramError, ApiError, TransportError) as exc:
        messages.error(request, f"Export failed: {_problem(exc)}")
        return redirect("inspector:subject", user_id=subject.user_id)
    shown(request, counts={k: len(v) for k, v in data["memories"].items()})
    body = json.dumps({**data, "external_id": subject.external_id}, indent=2, ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="engram-export-{subject.user_id}.json"'
    return response


@require_http_methods(["GET", "POST"])
@subject_view("subject.erase", reads=None)
def erase(request: HttpRequest, subject: Subject) -> HttpResponse:
    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != subject.external_id:
            messages.error(request, "The confirmation did not match the end-user's external id; nothing was erased.")
        else:
            try:
                write = write_command(tenant=subject.tenant, external_id=subject.external_id, operation="erase",
                                      payload={}, limits=Limits.from_settings(), actor=request.user,
                                      context_options=ContextOptions.from_settings(),
                                      lifetimes=KeyLifetimes.from_settings())
                submitted = outbox.write_submit(tenant=subject.tenant, write=write, actor=request.user)
            except (EngramError, ApiError, TransportError) as exc:
                messages.error(request, f"Erase failed: {_problem(exc)}")
            else:
                deleted = (submitted.result or {}).get("documents_deleted")
                messages.success(request, f"{subject.external_id} erased: {deleted} memories and every key removed."
                                 if not submitted.queued else
                                 f"Erase of {subject.external_id} queued; it is applied once Elasticsearch is back.")
                return redirect(f"{reverse('inspector:home')}?tenant={subject.tenant.slug}")
    return render(request, "inspector/erase.html", _ctx(request, subject.tenant, subject=subject))


# ---------------------------------------------------------------- keys and tokens


@require_GET
@tenant_view("keys.view")
def keys_page(request: HtmxHttpRequest, tenant: Tenant) -> HttpResponse:
    return _keys_page(request, tenant)


def _keys_page(request, tenant: Tenant, *, new_token: dict | None = None) -> HttpResponse:
    q = request.GET.get("q", "").strip()[:200]
    subjects = Subject.objects.filter(tenant=tenant).order_by("external_id")
    if q:
        subjects = subjects.filter(external_id__icontains=q)
    page = Paginator(subjects, PAGE_SIZE).get_page(request.GET.get("page"))
    keys: dict[int, list[SubjectKey]] = {}
    for key in SubjectKey.objects.filter(subject__in=list(page.object_list)).order_by("-created_at"):
        keys.setdefault(key.subject_id, []).append(key)
    rows = [{"subject": s, "keys": keys.get(s.pk, [])[:3]} for s in page.object_list]
    context = _ctx(request, tenant, q=q, page=page, rows=rows, now=timezone.now(),
                   tokens=AgentToken.objects.filter(tenant=tenant).order_by("-created_at"),
                   memberships=Membership.objects.filter(tenant=tenant).select_related("user").order_by("role"),
                   scopes=AgentToken.Scope.values, new_token=new_token)
    return render(request, "inspector/keys.html", context)


def _keys_action(request, tenant: Tenant, action: Callable[[Tenant], str]) -> HttpResponse:
    try:
        messages.success(request, action(tenant))
    except (EngramError, ApiError, TransportError) as exc:
        messages.error(request, _problem(exc))
    return redirect("inspector:keys", slug=tenant.slug)


def _tenant_subject(tenant: Tenant, user_id: uuid.UUID) -> Subject:
    subject = Subject.objects.select_related("tenant").filter(tenant=tenant, user_id=user_id).first()
    if subject is None:
        raise Http404("no such end-user")
    return subject


@require_POST
@tenant_view("keys.manage")
def key_rotate(request, tenant: Tenant, user_id: uuid.UUID) -> HttpResponse:
    def act(tenant):
        subject = _tenant_subject(tenant, user_id)
        key = subject_key_rotate(subject=subject, actor=request.user, lifetimes=KeyLifetimes.from_settings())
        return f"Key of {subject.external_id} rotated; new key {key.es_key_id}, the old one works during its grace."
    return _keys_action(request, tenant, act)


@require_POST
@tenant_view("keys.manage")
def key_revoke(request, tenant: Tenant, user_id: uuid.UUID) -> HttpResponse:
    def act(tenant):
        subject = _tenant_subject(tenant, user_id)
        key = subject_key_revoke(subject=subject, actor=request.user)
        return (f"Key {key.es_key_id} of {subject.external_id} revoked now; a fresh one is minted on next use."
                if key else f"{subject.external_id} had no live key to revoke.")
    return _keys_action(request, tenant, act)


@require_POST
@tenant_view("keys.manage")
def token_create(request, tenant: Tenant) -> HttpResponse:
    try:
        token, raw = agent_token_create(tenant=tenant, name=request.POST.get("name", ""),
                                        scopes=request.POST.getlist("scopes"), actor=request.user)
    except (EngramError, ApiError, TransportError) as exc:
        messages.error(request, _problem(exc))
        return redirect("inspector:keys", slug=tenant.slug)
    # The raw token is in this response (no-store) and nowhere else: not in the session, not in a
    # message, both of which the server keeps.
    return _keys_page(request, tenant, new_token={"name": token.name, "raw": raw})


@require_POST
@tenant_view("keys.manage")
def token_revoke(request, tenant: Tenant, token_id: int) -> HttpResponse:
    def act(tenant):
        token = AgentToken.objects.select_related("tenant").filter(tenant=tenant, pk=token_id).first()
        if token is None:
            raise Http404("no such token")
        agent_token_revoke(token=token, actor=request.user)
        return f"Token {token.name} ({token.prefix}) revoked."
    return _keys_action(request, tenant, act)


# ---------------------------------------------------------------- compliance


@require_GET
@tenant_view("usage.view")
def usage_page(request: HtmxHttpRequest, tenant: Tenant) -> HttpResponse:
    try:
        days = int(request.GET.get("days", 30))
    except ValueError:
        days = 30
    days = min(max(days, 1), USAGE_MAX_DAYS)
    rows = tenant_usage(tenant=tenant, days=days)
    totals = {f: sum(r[f] for r in rows) for f in USAGE_FIELDS}
    peak = max((r["requests"] for r in rows), default=0) or 1
    for row in rows:
        row["bar"] = round(100 * row["requests"] / peak)
    return render(request, "inspector/usage.html", _ctx(request, tenant, rows=rows, totals=totals, days=days,
                                                        choices=(7, 30, 90)))


def _audit_filters(request, tenant: Tenant) -> dict:
    def day(name: str, end: bool = False):
        value = clean_date(request.GET.get(name), field=name)  # "2024-02-30": 400, never read as no filter
        if not value:
            return None
        return timezone.make_aware(datetime.combine(value, time.max if end else time.min))
    subject_ref = request.GET.get("subject", "").strip()
    if subject_ref and subject_ref.count("-") != 4:  # an external id: resolve to the user_id
        found = (Subject.objects.filter(tenant=tenant, external_id=subject_ref)
                 .values_list("user_id", flat=True).first())
        subject_ref = str(found) if found else subject_ref
    return {"actor": request.GET.get("actor", "").strip(), "action": request.GET.get("action", "").strip(),
            "subject_ref": subject_ref, "since": day("since"), "until": day("until", end=True)}


@require_GET
@tenant_view("audit.view")
def audit_page(request: HtmxHttpRequest, tenant: Tenant) -> HttpResponse:
    filters = _audit_filters(request, tenant)
    events = audit_events(tenant_slugs=[tenant.slug], staff_access=request.GET.get("access") == "staff", **filters)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    refs = {e.subject_ref for e in page.object_list if e.subject_ref}
    names = dict(Subject.objects.filter(user_id__in=refs).values_list("user_id", "external_id"))
    rows = [{"event": e, "external_id": names.get(uuid.UUID(e.subject_ref)) if e.subject_ref else ""}
            for e in page.object_list]
    query = request.GET.copy()
    query.pop("page", None)
    context = _ctx(request, tenant, page=page, rows=rows, query=query.urlencode(), f=request.GET,
                   actions=sorted(set(AuditEvent.objects.filter(tenant_slug=tenant.slug)
                                      .values_list("action", flat=True).distinct())))
    return render(request, "inspector/audit.html", context)


# The audit page's filters an export names in its header, as the request gave them.
EXPORT_FILTERS = ("actor", "action", "subject", "since", "until", "access")


@require_GET
@tenant_view("audit.export")
def audit_export(request: HttpRequest, tenant: Tenant, fmt: str) -> HttpResponse:
    filters = {**_audit_filters(request, tenant), "staff_access": request.GET.get("access") == "staff"}
    through = audit_export_start(tenant=tenant, actor=request.user, fmt=fmt, filters=filters)
    events = audit_events(tenant_slugs=[tenant.slug], **filters).filter(seq__lte=through).order_by("seq")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    if fmt == "jsonl":
        given = {k: request.GET[k].strip() for k in EXPORT_FILTERS if request.GET.get(k, "").strip()}
        lines = audit_export_jsonl(tenant_slug=tenant.slug, events=events, filters=given, through_seq=through)
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    else:
        fields = ["id", "chain", "seq", "created_at", "actor_type", "actor", "action", "tenant_slug", "subject_ref",
                  "target_id", "details", "key_id", "prev_hash", "hash"]

        def rows():
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=fields)
            writer.writeheader()
            for event in events.iterator():
                record = audit_export_record(event)
                record["details"] = json.dumps(record["details"], sort_keys=True, ensure_ascii=False)
                writer.writerow(record)
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            yield buffer.getvalue()
        response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="engram-audit-{tenant.slug}-{stamp}.{fmt}"'
    return response


@require_GET
@tenant_view("audit.view")
def token_access(request: HtmxHttpRequest, tenant: Tenant) -> HttpResponse:
    """The agent tokens' access log: per token, who minted it and what it read; then each
    token, end-user, kind of read and hour (the counts; the first read of each is an audit event)."""
    prefix = request.GET.get("token", "").strip()[:16]
    page = Paginator(token_access_rows(tenant=tenant, prefix=prefix), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "inspector/token_access.html",
                  _ctx(request, tenant, summary=token_access_summary(tenant=tenant), page=page, prefix=prefix))


@require_GET
@tenant_view("audit.view")
def audit_verify(request: HtmxHttpRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's chain checked from its first event and against its latest signed checkpoint,
    and what that check rests on (the store, the keys, the database's triggers)."""
    result = audit_verify_chains(chains=[tenant.slug])
    [report] = result.reports
    broken = AuditEvent.objects.filter(pk=report.broken_id).first() if report.broken_id else None
    return render(request, "inspector/verify.html",
                  _ctx(request, tenant, result=result, report=report, broken=broken,
                       checkpoint_seconds=settings.ENGRAM_AUDIT_CHECKPOINT_SECONDS))


@require_GET
@tenant_view("audit.view")
def audit_public_keys(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The public keys checkpoints and exports are signed with, with their windows: all an auditor
    needs to verify an export (``python -m tenants.audit_chain --public-key``)."""
    response = HttpResponse(json.dumps(crypto.audit_public_keys().as_json(), indent=2),
                            content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="engram-audit-public-keys.json"'
    return response


@require_POST
@tenant_view("audit.checkpoint")
def audit_checkpoint(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Checkpoint the tenant's chain now (the periodic task does it every few minutes)."""
    try:
        [result] = audit_checkpoint_write(chains=[tenant.slug])
    except (CheckpointStoreError, ImproperlyConfigured, ApiError, TransportError) as exc:
        messages.error(request, f"No checkpoint written: {exc}")
    else:
        if result.state == "refused":
            messages.error(request, f"No checkpoint written: the chain is broken ({result.reason}).")
        elif result.state == "written":
            messages.success(request, f"Checkpoint written at event #{result.checkpoint['seq']}.")
        else:
            messages.info(request, "The chain has not moved since its latest checkpoint.")
    return redirect("inspector:audit_verify", slug=tenant.slug)
