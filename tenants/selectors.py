"""Reads about tenants, end-users and staff roles. Plain functions, keyword-only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import Count, Max, Q, QuerySet, Sum
from django.utils import timezone
from elasticsearch import ApiError, AuthorizationException, NotFoundError, TransportError, helpers

from engram_core.errors import NotFound
from engram_core.es.client import monitor_client
from engram_core.es.schema import audit_checkpoints_index, shared_prefix

from . import audit_chain, audit_triggers
from .crypto import audit_keyring, audit_public_keys, audit_signing_keys
from .models import AgentToken, AuditEvent, Membership, Subject, Tenant, TokenRead


class SubjectGone(NotFound):
    """The end-user is being erased, or was: the same answer as an unknown one (``subject_get``),
    raised to whoever still held them (a request, a consolidation run) and would write or mint."""

    @classmethod
    def of(cls, subject: Subject) -> SubjectGone:
        return cls("unknown end-user", details={"external_id": subject.external_id})


def subject_get(*, tenant: Tenant, external_id: str) -> Subject:
    """The end-user ``external_id`` of ``tenant``.

    Raises NotFound, with the same code and message whether the end-user does not exist or
    belongs to another tenant, so a caller cannot probe other tenants' end-users.
    """
    subject = subject_find(tenant=tenant, external_id=external_id)
    if subject is None:
        raise subject_unknown(external_id)
    return subject


def subject_unknown(external_id: str) -> NotFound:
    """The one answer for an end-user who does not exist (or is another tenant's)."""
    return NotFound("unknown end-user", details={"external_id": external_id})


def subject_find(*, tenant: Tenant, external_id: str) -> Subject | None:
    """The end-user ``external_id`` of ``tenant``, or None. Read without a join: the subject's
    ``tenant`` is the one given (every caller's is read just before: a request's with its token,
    an outbox entry's with the entry)."""
    subject = next(iter(Subject.objects.filter(tenant=tenant, external_id=external_id)[:1]), None)
    if subject is not None:
        subject.tenant = tenant
    return subject


def subject_page(*, tenant: Tenant, prefix: str = "", limit: int = 100, offset: int = 0) -> list[Subject]:
    """The tenant's end-users (erased ones left out), by ``external_id``, ``limit`` from ``offset``;
    ``prefix``: only those whose external id starts with it."""
    subjects = Subject.objects.filter(tenant=tenant, erased_at__isnull=True)
    if prefix:
        subjects = subjects.filter(external_id__startswith=prefix)
    page = list(subjects.order_by("external_id")[offset:offset + limit])
    for subject in page:
        subject.tenant = tenant
    return page


def index_prefix_for(*, tenant: Tenant, isolation: str | None = None) -> str:
    """The index prefix holding ``tenant``'s memories: the shared one, or for a dedicated tenant
    its own, derived from the shared prefix and the tenant id (``<prefix>-t-<slug>``).
    ``isolation`` overrides the tenant's current mode (a move computes both ends)."""
    mode = isolation or tenant.isolation
    if mode == Tenant.Isolation.DEDICATED:
        return f"{shared_prefix()}-t-{tenant.slug.lower()}"
    return shared_prefix()


def memory_scope(*, subject: Subject) -> dict[str, str]:
    """The ``tenant_id``/``user_id`` every memory of ``subject`` carries.

    Derived from the subject alone: write paths stamp these over whatever a request body
    says, so a body cannot place a memory in another tenant or under another end-user.
    """
    return {"tenant_id": subject.tenant.slug, "user_id": str(subject.user_id)}


def memory_scope_filter(*, subject: Subject, include_shared: bool = True) -> dict:
    """An Elasticsearch query admitting exactly what ``subject`` may read.

    ``tenant_id == T AND (user_id == U OR user_id missing)``; with ``include_shared=False``
    only the subject's own documents (no tenant-wide catalog). This is the DLS query of the
    subject's API key and the code-level second guard of every read.
    """
    scope = memory_scope(subject=subject)
    own = {"term": {"user_id": scope["user_id"]}}
    if not include_shared:
        return {"bool": {"filter": [{"term": {"tenant_id": scope["tenant_id"]}}, own]}}
    return {
        "bool": {
            "filter": [{"term": {"tenant_id": scope["tenant_id"]}}],
            "should": [own, {"bool": {"must_not": {"exists": {"field": "user_id"}}}}],
            "minimum_should_match": 1,
        }
    }


def staff_tenant_ids(*, user: AbstractBaseUser | AnonymousUser,
                     roles: Iterable[str] | None = None) -> set[int]:
    """Ids of the tenants where ``user`` holds one of ``roles`` (any role when None).

    Superusers are not special-cased here: callers decide what "all tenants" means for them.
    """
    if not user.is_authenticated or not user.is_active or not user.is_staff:
        return set()
    memberships = Membership.objects.filter(user=user)
    if roles is not None:
        memberships = memberships.filter(role__in=list(roles))
    return set(memberships.values_list("tenant_id", flat=True))


# ---------------------------------------------------------------- audit log

def audit_events(*, tenant_slugs: Iterable[str], actor: str = "", action: str = "", subject_ref: str = "",
                 since: datetime | None = None, until: datetime | None = None,
                 staff_access: bool = False) -> QuerySet[AuditEvent]:
    """Audit events of the given tenants, newest first, filtered (actor and action: prefix
    match, ``subject_ref`` exact, date range inclusive). ``staff_access``: the staff access log,
    staff reads and the reads through tokens a staff user minted (``actor`` then matches that
    staff user too)."""
    events = AuditEvent.objects.filter(tenant_slug__in=list(tenant_slugs))
    if staff_access:
        events = events.filter(Q(action="staff.viewed") | Q(action="token.read", details__has_key="staff"))
    if actor and staff_access:
        events = events.filter(Q(actor__startswith=actor) | Q(details__staff__startswith=actor))
    elif actor:
        events = events.filter(actor__startswith=actor)
    if action:
        events = events.filter(action__startswith=action)
    if subject_ref:
        events = events.filter(subject_ref=subject_ref)
    if since:
        events = events.filter(created_at__gte=since)
    if until:
        events = events.filter(created_at__lte=until)
    return events.order_by("-created_at", "-id")


def audit_export_record(event: AuditEvent) -> dict:
    """One event as exported: the hashed fields plus the links, enough to verify it offline."""
    return {"id": event.pk, **event.chain_fields(), "prev_hash": event.prev_hash, "hash": event.hash}


def _chain_records(chain: str, *, since_seq: int = 1) -> Iterator[dict]:
    events = AuditEvent.objects.filter(chain=chain, seq__gte=since_seq).order_by("seq")
    return (audit_export_record(e) for e in events.iterator(chunk_size=2000))


# ---------------------------------------------------------------- token access log


def token_access_summary(*, tenant: Tenant) -> list[dict]:
    """Each agent token of ``tenant`` that read memory, with who minted it: reads and memories
    shown per kind, end-users read, the last read; most recently reading first."""
    rows = (TokenRead.objects.filter(token__tenant=tenant).values("token_id", "kind")
            .annotate(reads=Sum("reads"), memories=Sum("memories"), last=Max("last_at")))
    subjects = dict(TokenRead.objects.filter(token__tenant=tenant).values("token_id")
                    .annotate(n=Count("subject", distinct=True)).values_list("token_id", "n"))
    tokens = AgentToken.objects.in_bulk({row["token_id"] for row in rows})
    summary: dict[int, dict] = {}
    for row in rows:
        entry = summary.setdefault(row["token_id"], {"token": tokens[row["token_id"]], "kinds": {}, "reads": 0,
                                                     "subjects": subjects.get(row["token_id"], 0), "last": None})
        entry["kinds"][row["kind"]] = row["reads"]
        entry["reads"] += row["reads"]
        entry["last"] = max(filter(None, [entry["last"], row["last"]]))
    return sorted(summary.values(), key=lambda e: e["last"], reverse=True)


def token_access_rows(*, tenant: Tenant, prefix: str = "") -> QuerySet[TokenRead]:
    """The access log's rows (token, end-user, kind, hour), newest hour first."""
    rows = TokenRead.objects.filter(token__tenant=tenant).select_related("token", "subject")
    if prefix:
        rows = rows.filter(token__prefix__startswith=prefix)
    return rows.order_by("-hour", "-last_at")


# ---------------------------------------------------------------- audit checkpoints

# How many of a chain's newest checkpoints a verification reads: the latest whose signature holds
# is what the chain is checked against; the ones below it show a forged newest one.
CHECKPOINTS_READ = 3


class CheckpointStoreError(Exception):
    """The checkpoint index cannot be read: missing, refused or unreachable (the message says which)."""


def _store_call(fn):
    index = audit_checkpoints_index()
    try:
        return fn(monitor_client(), index)
    except NotFoundError:
        raise CheckpointStoreError(f"the checkpoint index {index} does not exist (run manage.py es_setup)") from None
    except AuthorizationException:
        raise CheckpointStoreError(f"the monitor credential may not read the checkpoint index {index}") from None
    except (ApiError, TransportError) as exc:
        raise CheckpointStoreError(f"the checkpoint index {index} cannot be read: {type(exc).__name__}") from None


def audit_checkpoints_latest(*, chains: Iterable[str] | None = None) -> dict[str, list[dict]]:
    """Each chain's newest checkpoints (``CHECKPOINTS_READ``, newest first), then its first one
    (which pins its keying event), read through the monitor credential. Raises CheckpointStoreError."""
    query = {"terms": {"chain": list(chains)}} if chains is not None else {"match_all": {}}

    def read(es, index):
        body = es.search(index=index, size=0, query=query, aggs={"chains": {
            "terms": {"field": "chain", "size": 65536},
            "aggs": {"latest": {"top_hits": {"size": CHECKPOINTS_READ,
                                             "sort": [{"seq": "desc"}, {"created_at": "desc"}]}}}}})
        found = {bucket["key"]: [hit["_source"] for hit in bucket["latest"]["hits"]["hits"]]
                 for bucket in body["aggregations"]["chains"]["buckets"]}
        # A checkpoint's id is its chain and its predecessor's seq: the first one's is "<chain>:0".
        firsts = es.mget(index=index, ids=[f"{chain}:0" for chain in found])["docs"] if found else []
        for chain, doc in zip(list(found), firsts):
            if doc.get("found") and all(cp.get("previous_seq") != 0 for cp in found[chain]):
                found[chain].append(doc["_source"])
        return found

    return _store_call(read)


def audit_checkpoints_all(*, chain: str) -> list[dict]:
    """Every checkpoint of ``chain``, oldest first (an export carries them). Raises CheckpointStoreError."""
    def read(es, index):
        hits = helpers.scan(es, index=index, query={"query": {"term": {"chain": chain}}}, size=1000)
        return sorted((hit["_source"] for hit in hits), key=lambda c: (c["seq"], c["created_at"]))

    return _store_call(read)


def audit_export_jsonl(*, tenant_slug: str, events: QuerySet[AuditEvent], filters: dict[str, str],
                       through_seq: int) -> Iterator[str]:
    """A JSON Lines export of ``events`` of the tenant's chain up to ``through_seq`` (the seq its
    latest checkpoint pins, so a complete export is proved by checkpoints throughout): a header
    saying whether it is filtered (and by what), each event with its hash and key id, the chain's
    checkpoints, and an end line signed with Ed25519 over every line before it, stating what the
    audit keys found of the events (``tenants.audit_chain.verify_export``)."""
    created_at = timezone.now().isoformat(timespec="microseconds")
    signer = audit_chain.ExportSigner(audit_signing_keys(), created_at=created_at)
    try:
        checkpoints, unavailable = audit_checkpoints_all(chain=tenant_slug), ""
    except CheckpointStoreError as exc:
        checkpoints, unavailable = [], str(exc)
    checkpoints = [cp for cp in checkpoints if cp.get("seq", 0) <= through_seq]
    check = audit_chain.ChainCheck(checkpoints, chain=tenant_slug, keyring=audit_keyring(), public=audit_public_keys(),
                                   complete=not filters, every_checkpoint=True)
    yield signer.line({"type": "export", "version": audit_chain.EXPORT_VERSION, "tenant": tenant_slug,
                       "filtered": bool(filters), "filters": filters, "created_at": created_at,
                       "through_seq": through_seq, "algorithm": audit_chain.ALGORITHM,
                       "checkpoint_store": audit_checkpoints_index(),
                       **({"checkpoints_unavailable": unavailable} if unavailable else {})})
    for event in events.filter(seq__lte=through_seq).order_by("seq").iterator(chunk_size=2000):
        record = audit_export_record(event)
        check.feed(record)
        yield signer.line({"type": "event", **record})
    for checkpoint in checkpoints:
        yield signer.line({"type": "checkpoint", **checkpoint})
    report = check.report()
    yield signer.end(verified={"ok": report.ok, "reason": report.reason, "events": report.events,
                               "hmac_recomputed": True})


# ---------------------------------------------------------------- verification


@dataclass(frozen=True)
class AuditVerification:
    """Every chain checked against its latest checkpoint, and what the check rests on."""

    reports: list[audit_chain.ChainReport]
    store: str  # the checkpoint index
    store_error: str = ""  # why the checkpoints could not be read ("" when they could)
    triggers: bool = False  # the database refuses UPDATE and DELETE of audit events
    key_ids: list[str] = field(default_factory=list)  # the link keys, the one signing now first
    signing_key_ids: list[str] = field(default_factory=list)  # the Ed25519 keys checkpoints may be signed with
    public: audit_chain.PublicKeys | None = None

    @property
    def ok(self) -> bool:
        return not self.store_error and self.triggers and all(r.ok for r in self.reports)


def audit_chain_verify(*, chain: str) -> audit_chain.ChainReport:
    """Recompute the chain (``chain`` = tenant slug) from its first event and check it against its
    latest checkpoint: the first changed, removed, re-ordered or truncated event, or the chain
    gone. Raises CheckpointStoreError when the checkpoints cannot be read."""
    checkpoints = audit_checkpoints_latest(chains=[chain]).get(chain, [])
    return audit_chain.verify_chain(_chain_records(chain), checkpoints, chain=chain, keyring=audit_keyring(),
                                    public=audit_public_keys())


def audit_verify(*, chains: Iterable[str] | None = None) -> AuditVerification:
    """Verify ``chains`` (every chain the log or the checkpoint store knows of, by default). Without
    the store, each chain is still verified event by event, and ``store_error`` says why no more."""
    keyring, public = audit_keyring(), audit_public_keys()
    wanted = None if chains is None else list(chains)
    error = ""
    try:
        checkpoints = audit_checkpoints_latest(chains=wanted)
    except CheckpointStoreError as exc:
        checkpoints, error = {}, str(exc)
    names = set(wanted) if wanted is not None else (
        set(AuditEvent.objects.values_list("chain", flat=True).distinct()) | set(checkpoints))
    reports = [audit_chain.verify_chain(_chain_records(name), checkpoints.get(name, []), chain=name, keyring=keyring,
                                        public=public) for name in sorted(names)]
    return AuditVerification(reports=reports, store=audit_checkpoints_index(), store_error=error,
                             triggers=audit_triggers.triggers_present(connection),
                             key_ids=[keyring.primary, *(k for k in keyring.order if k != keyring.primary)],
                             signing_key_ids=sorted(public.keys), public=public)
