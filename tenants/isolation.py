"""The isolation probe: seed several tenants and end-users, then try to read across them.

Every probe is made with an end-user's own DLS key (``subject_es_client``) directly against
Elasticsearch, the way a bug or an injected query in Engram would reach it. A *leak* is any
document, id, term or count of another end-user or tenant coming back, any figure that reveals
another tenant's data (a term's document frequency, an index-wide document count, a score that
moves when another tenant writes), or a forbidden request being allowed; a *failure* is a probe
that could not run or an end-user not seeing their own data (which would make the "no leak"
answer meaningless).

The ``stats`` family looks for relevance statistics. Document-level security does not scope
them: in shared indices a plain search's ``_score`` (and its ``explain``, and the background
counts of significant-terms aggregations) is computed over every tenant's documents. That
channel is inherent to searching shared indices with a subject key, so for *shared* tenants
those figures are recorded as ``residual`` (reported, documented in the README, not a leak:
subject keys never leave Engram and its API exposes no such figure); for *dedicated* tenants
the same figures are leaks. Statistics APIs that Engram does not need (term vectors, _explain,
field capabilities, terms enum, _validate, suggesters, profile) must be refused for everyone.

Used by ``tests/tenants/test_isolation.py`` and ``manage.py isolation_probe``. Callers choose the
index prefix (a throwaway one) and own the database transaction; the run removes its documents
and invalidates its keys when it ends. More probes (e.g. through the memory services) plug in
through ``extra_probes``: callables taking ``(world, recorder)``.
"""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    Elasticsearch,
    NotFoundError,
    TransportError,
    helpers,
)

from engram_core.es.client import admin_client
from engram_core.es.schema import MemoryType, alias_name, all_aliases, ensure_indices

from .es_keys import invalidate_keys
from .models import Subject, SubjectKey, Tenant
from .selectors import index_prefix_for, memory_scope
from .services.audit import audit_record
from .services.clients import subject_es_client, writer_es_client
from .services.keys import subject_key_revoke, subject_key_rotate
from .services.subjects import subject_get_or_create

ACTOR = "isolation-probe"
USER_TYPES = (MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL)


@dataclass(frozen=True)
class TenantSpec:
    slug: str
    subjects: tuple[str, ...]
    isolation: str = Tenant.Isolation.SHARED


DEFAULT_TENANTS = (
    TenantSpec("acme", ("alice", "bob", "carol")),
    TenantSpec("globex", ("dana", "erik", "fatima")),
    TenantSpec("initech", ("gus", "hana", "ivan"), isolation=Tenant.Isolation.DEDICATED),
)


@dataclass(frozen=True)
class Finding:
    probe: str
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.probe}] as {self.subject}: {self.detail}"


@dataclass
class ProbeReport:
    leaks: list[Finding] = field(default_factory=list)
    failures: list[Finding] = field(default_factory=list)
    # Shared-mode relevance statistics seen through a subject key: documented, not a leak.
    residual: list[Finding] = field(default_factory=list)
    by_family: Counter[str] = field(default_factory=Counter)  # "search", "get", "service", ...

    @property
    def probes(self) -> int:
        return sum(self.by_family.values())

    @property
    def ok(self) -> bool:
        return self.probes > 0 and not self.leaks and not self.failures

    def summary(self) -> str:
        line = f"probes: {self.probes}, leaks: {len(self.leaks)}, failures: {len(self.failures)}"
        if self.residual:
            line += f" (shared-mode statistics residual: {len(self.residual)}, see README Isolation)"
        return line

    def breakdown(self) -> str:
        return ", ".join(f"{family} {n}" for family, n in sorted(self.by_family.items()))


@dataclass(frozen=True)
class SeededDoc:
    id: str
    memory_type: MemoryType
    alias: str
    tenant_id: str
    user_id: str | None  # None: tenant-wide catalog
    marker: str  # a word only this subject's (or this tenant catalog's) documents contain
    vector: tuple[float, ...]
    superseded: bool = False


@dataclass(frozen=True)
class SeededSubject:
    subject: Subject
    marker: str

    @property
    def tenant_id(self) -> str:
        return self.subject.tenant.slug

    @property
    def user_id(self) -> str:
        return str(self.subject.user_id)

    @property
    def label(self) -> str:
        return f"{self.tenant_id}/{self.subject.external_id}"

    @property
    def prefix(self) -> str:
        return index_prefix_for(tenant=self.subject.tenant)

    @property
    def dedicated(self) -> bool:
        return self.subject.tenant.isolation == Tenant.Isolation.DEDICATED


@dataclass
class World:
    """What was seeded, and what each end-user is entitled to see."""

    prefix: str
    tenants: list[Tenant]
    subjects: list[SeededSubject]
    docs: list[SeededDoc]
    concrete_indices: list[str]  # the versioned indices behind the aliases

    def visible(self, who: SeededSubject, alias: str | None = None) -> list[SeededDoc]:
        return [d for d in self.docs if d.tenant_id == who.tenant_id and d.user_id in (None, who.user_id)
                and (alias is None or d.alias == alias)]

    def foreign(self, who: SeededSubject, alias: str | None = None) -> list[SeededDoc]:
        visible = {d.id for d in self.visible(who)}
        return [d for d in self.docs if d.id not in visible and (alias is None or d.alias == alias)]

    def docs_of(self, other: SeededSubject) -> list[SeededDoc]:
        return [d for d in self.docs if d.user_id == other.user_id]

    def catalog_of(self, tenant_id: str) -> list[SeededDoc]:
        return [d for d in self.docs if d.tenant_id == tenant_id and d.user_id is None]

    def tenant_docs(self, tenant_id: str) -> list[SeededDoc]:
        """The tenant's documents, every type: one index holds them all (each type's alias filters
        searches, not the index's statistics)."""
        return [d for d in self.docs if d.tenant_id == tenant_id]


class ProbeScope:
    """One probe's verdicts: call ``leak``/``fail``, or the helpers that do it for you."""

    def __init__(self, recorder: ProbeRecorder, name: str, who: str):
        self._recorder, self.name, self.who = recorder, name, who

    def leak(self, detail: str) -> None:
        self._recorder.report.leaks.append(Finding(self.name, self.who, detail))

    def fail(self, detail: str) -> None:
        self._recorder.report.failures.append(Finding(self.name, self.who, detail))

    def figure(self, detail: str, *, residual: bool) -> None:
        """A statistic revealing another tenant's data: a leak, or the shared mode's residual."""
        (self._recorder.report.residual if residual else self._recorder.report.leaks).append(
            Finding(self.name, self.who, detail))

    def ids(self, returned: Sequence[str], *, allowed: AbstractSet[str],
            required: AbstractSet[str] = frozenset()) -> None:
        """Returned ids must lie within ``allowed`` (else a leak) and cover ``required`` (else a failure)."""
        extra = set(returned) - allowed
        if extra:
            self.leak(f"{len(extra)} foreign document(s) returned: {sorted(extra)[:5]}")
        missing = set(required) - set(returned)
        if missing:
            self.fail(f"{len(missing)} of the subject's own document(s) not returned: {sorted(missing)[:5]}")

    def refused(self, call: Callable[[], object]) -> None:
        """``call`` must be refused by Elasticsearch's security layer; being served is a leak."""
        try:
            call()
        except (AuthenticationException, AuthorizationException):
            return
        except ApiError as exc:
            if exc.error == "security_exception":  # e.g. suggesters under DLS answer 400 security_exception
                return
            raise
        self.leak("request was allowed")


class ProbeRecorder:
    def __init__(self) -> None:
        self.report = ProbeReport()

    @contextmanager
    def probe(self, name: str, who: SeededSubject | str, *, refusal_ok: bool = False) -> Iterator[ProbeScope]:
        """Count one probe. An Elasticsearch error inside it is recorded as a failure (the run
        fails), except, with ``refusal_ok``, the security layer refusing the request: for a
        probe aimed at someone else's data or at a statistics API, a refusal reveals nothing."""
        label = who.label if isinstance(who, SeededSubject) else who
        self.report.by_family[re.split(r"[:.(]", name, maxsplit=1)[0]] += 1
        scope = ProbeScope(self, name, label)
        try:
            yield scope
        except (AuthenticationException, AuthorizationException) as exc:
            if not refusal_ok:
                scope.fail(f"{type(exc).__name__}: {exc}")
        except (ApiError, TransportError) as exc:
            if not (refusal_ok and isinstance(exc, ApiError) and exc.error == "security_exception"):
                scope.fail(f"{type(exc).__name__}: {exc}")


ExtraProbe = Callable[[World, ProbeRecorder], None]


def run_isolation_probes(*, tenants_spec: Sequence[TenantSpec] = DEFAULT_TENANTS,
                         extra_probes: Sequence[ExtraProbe] = (), docs_per_type: int = 2,
                         lifecycle: bool = True) -> ProbeReport:
    """Seed ``tenants_spec`` under the current index prefix, probe every cross-subject path, clean up.

    Needs the memory indices of the current ``ES_INDEX_PREFIX`` to exist. Creates tenants and
    subjects (slugs get a run suffix, so existing tenants are never touched) in the caller's
    transaction. Raises ServiceUnavailable when DLS is unavailable.
    """
    recorder = ProbeRecorder()
    world = _seed(tenants_spec=tenants_spec, docs_per_type=docs_per_type)
    try:
        for who in world.subjects:
            _probe_subject(world, recorder, who)
        _probe_statistics(world, recorder)
        for extra in extra_probes:
            extra(world, recorder)
        if lifecycle:
            _probe_lifecycle(world, recorder)
    finally:
        _teardown(world)
    return recorder.report


# ---------------------------------------------------------------- seeding

def _marker(n: int) -> str:
    # Letters only and a fixed shape, so the English analyzer keeps it as one unchanged term.
    letters = "".join(chr(ord("a") + (n // 26 ** i) % 26) for i in range(3))
    return f"zq{letters}vok"


def _vector(rng: random.Random, dims: int) -> tuple[float, ...]:
    return tuple(rng.uniform(-1, 1) for _ in range(dims))


def _seed(*, tenants_spec: Sequence[TenantSpec], docs_per_type: int) -> World:
    run = uuid.uuid4().hex[:6]
    prefix = settings.ES_INDEX_PREFIX
    mapping = admin_client().indices.get_mapping(index=alias_name(MemoryType.EPISODIC))
    dims = next(iter(mapping.values()))["mappings"]["properties"]["embedding"]["dims"]
    rng = random.Random(run)
    tenants, subjects, docs = [], [], []
    markers = iter(range(10_000))
    now = timezone.now().isoformat()
    for spec in tenants_spec:
        tenant = Tenant.objects.create(slug=f"{spec.slug}-{run}", name=f"{spec.slug} (isolation probe {run})",
                                       isolation=spec.isolation)
        tenants.append(tenant)
        tprefix = index_prefix_for(tenant=tenant)
        if tprefix != prefix:
            ensure_indices(es=admin_client(), prefix=tprefix, dims=dims)
        catalog_marker = _marker(next(markers))
        for i in range(docs_per_type):
            docs.append(SeededDoc(id=uuid.uuid4().hex, memory_type=MemoryType.CATALOG,
                                  alias=alias_name(MemoryType.CATALOG, prefix=tprefix), tenant_id=tenant.slug,
                                  user_id=None,
                                  marker=catalog_marker, vector=_vector(rng, dims)))
        for external_id in spec.subjects:
            subject = subject_get_or_create(tenant=tenant, external_id=external_id, actor=ACTOR)
            who = SeededSubject(subject=subject, marker=_marker(next(markers)))
            subjects.append(who)
            for memory_type in USER_TYPES:
                for i in range(docs_per_type):
                    docs.append(SeededDoc(id=uuid.uuid4().hex, memory_type=memory_type,
                                          alias=alias_name(memory_type, prefix=tprefix),
                                          tenant_id=who.tenant_id, user_id=who.user_id, marker=who.marker,
                                          vector=_vector(rng, dims)))
            # A superseded fact: only its owner may see it, even when asking for superseded ones.
            docs.append(SeededDoc(id=uuid.uuid4().hex, memory_type=MemoryType.SEMANTIC,
                                  alias=alias_name(MemoryType.SEMANTIC, prefix=tprefix), tenant_id=who.tenant_id,
                                  user_id=who.user_id, marker=who.marker, vector=_vector(rng, dims), superseded=True))
    _bulk_by_prefix(docs, lambda d: _action(d, now), refresh=True)
    aliases = [a for t in tenants for a in all_aliases(prefix=index_prefix_for(tenant=t))]
    concrete = sorted(admin_client().indices.get_alias(name=",".join(dict.fromkeys(aliases))))
    return World(prefix=prefix, tenants=tenants, subjects=subjects, docs=docs, concrete_indices=concrete)


def _prefix_of(alias: str) -> str:
    return alias.rsplit("-", 1)[0]


def _bulk_by_prefix(docs: Sequence[SeededDoc], action: Callable[[SeededDoc], dict], **kwargs) -> None:
    """Bulk ``action`` over ``docs`` with the writer key of each document's index prefix."""
    for prefix in sorted({_prefix_of(d.alias) for d in docs}):
        helpers.bulk(writer_es_client(prefix=prefix), (action(d) for d in docs if _prefix_of(d.alias) == prefix),
                     **kwargs)


def _action(doc: SeededDoc, now: str) -> dict:
    source = {"tenant_id": doc.tenant_id, "memory_type": doc.memory_type.value, "created_at": now,
              "text": f"{doc.marker} {doc.memory_type.value} memory seeded by the isolation probe",
              "embedding": list(doc.vector), "source": "isolation-probe", "session_id": f"s-{doc.marker}"}
    if doc.user_id is not None:
        source["user_id"] = doc.user_id
    if doc.superseded:
        source.update(superseded_by=f"newer-{doc.id}", superseded_at=now, contradiction="natural")
    if doc.memory_type is MemoryType.PROCEDURAL:
        source.update(trigger=f"{doc.marker} trigger", steps=f"{doc.marker} step one")
    if doc.memory_type is MemoryType.CATALOG:
        source["title"] = f"{doc.marker} article"
    if doc.memory_type is MemoryType.EPISODIC:  # two passages, as a two-sentence episode has
        source["passages"] = [{"embedding": list(doc.vector)}, {"embedding": list(doc.vector)}]
    return {"_op_type": "index", "_index": doc.alias, "_id": doc.id, "_source": source}


def _teardown(world: World) -> None:
    # One invalidation for the whole run (each costs the cluster a refresh), recorded once.
    keys = SubjectKey.objects.live().filter(subject__in=[w.subject for w in world.subjects])
    key_ids = list(keys.values_list("es_key_id", flat=True))
    invalidate_keys(key_ids=key_ids)
    keys.update(revoked_at=timezone.now())
    audit_record(actor=ACTOR, action="subject_keys.revoked_all",
                 details={"key_ids": key_ids, "reason": "probe run over"})
    # Errors are not raised: a document a (failed) probe managed to delete is already gone,
    # and the caller drops the throwaway indices anyway.
    _bulk_by_prefix(world.docs, lambda d: {"_op_type": "delete", "_index": d.alias, "_id": d.id},
                    refresh=True, raise_on_error=False)


# ---------------------------------------------------------------- probes

def _hit_ids(response) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


def _probe_subject(world: World, rec: ProbeRecorder, who: SeededSubject) -> None:
    es = subject_es_client(subject=who.subject)
    visible_all = {d.id for d in world.visible(who)}
    own_aliases = all_aliases(prefix=who.prefix)
    for alias in own_aliases:
        _probe_alias(world, rec, who, es, alias)
    with rec.probe("msearch:match_all", who) as p:
        searches = []
        for alias in own_aliases:
            searches += [{"index": alias}, {"query": {"match_all": {}}, "size": 1000}]
        for response in es.msearch(searches=searches)["responses"]:
            if "error" in response:
                p.fail(f"msearch item failed: {response['error']}")
            else:
                p.ids(_hit_ids(response), allowed=visible_all)
    with rec.probe("query_string:own_marker", who) as p:
        response = es.search(index=",".join(own_aliases), size=1000,
                             query={"query_string": {"query": f"text:{who.marker}"}})
        own = {d.id for d in world.docs_of(who)}
        p.ids(_hit_ids(response), allowed=visible_all, required=own)
    for pattern in ("*", "_all", f"{world.prefix}-*", f"{who.prefix}-*"):
        with rec.probe(f"search:index={pattern}", who) as p:
            p.ids(_hit_ids(es.search(index=pattern, size=1000, query={"match_all": {}})), allowed=visible_all)
    for index in world.concrete_indices:
        with rec.probe("search:concrete_index", who) as p:
            p.refused(lambda: es.search(index=index, query={"match_all": {}}))
    with rec.probe("cluster:health", who) as p:
        p.refused(lambda: es.cluster.health())
    with rec.probe("indices:refresh", who) as p:
        p.refused(lambda: es.indices.refresh(index=own_aliases[0]))
    with rec.probe("indices:get_mapping", who) as p:
        p.refused(lambda: es.indices.get_mapping(index=own_aliases[0]))
    for other in world.subjects:
        if other is not who:
            _probe_other_subject(world, rec, who, es, other)
    for tenant in world.tenants:
        if tenant.slug != who.tenant_id:
            _probe_other_tenant(world, rec, who, es, tenant.slug)


def _probe_alias(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch, alias: str) -> None:
    kind = alias.rsplit("-", 1)[1]
    visible = {d.id for d in world.visible(who, alias)}
    foreign = world.foreign(who, alias)
    foreign_markers = {d.marker for d in world.foreign(who)} - {d.marker for d in world.visible(who)}

    with rec.probe(f"search:match_all:{kind}", who) as p:
        p.ids(_hit_ids(es.search(index=alias, size=1000, query={"match_all": {}})), allowed=visible, required=visible)
    with rec.probe(f"count:{kind}", who) as p:
        count = es.count(index=alias)["count"]
        if count > len(visible):
            p.leak(f"count {count} exceeds the {len(visible)} visible documents")
        elif count < len(visible):
            p.fail(f"count {count} below the {len(visible)} visible documents")
    with rec.probe(f"ids:{kind}", who) as p:
        ids = [d.id for d in foreign]
        p.ids(_hit_ids(es.search(index=alias, size=1000, query={"ids": {"values": ids}})), allowed=set())
    with rec.probe(f"aggs:terms:{kind}", who) as p:
        terms = {"size": 1000, "min_doc_count": 0}
        aggs = es.search(index=alias, size=0, aggs={
            "users": {"terms": {"field": "user_id", **terms}},
            "tenants": {"terms": {"field": "tenant_id", **terms}},
            "sessions": {"terms": {"field": "session_id", **terms}},
            "everything": {"global": {}, "aggs": {"users": {"terms": {"field": "user_id", **terms}},
                                                  "tenants": {"terms": {"field": "tenant_id", **terms}}}},
            "distinct_users": {"cardinality": {"field": "user_id"}},
        })["aggregations"]
        users = {b["key"] for b in aggs["users"]["buckets"] + aggs["everything"]["users"]["buckets"]}
        tenants = {b["key"] for b in aggs["tenants"]["buckets"] + aggs["everything"]["tenants"]["buckets"]}
        sessions = {b["key"] for b in aggs["sessions"]["buckets"]}
        if users - {who.user_id}:
            p.leak(f"user_id buckets of others: {sorted(users - {who.user_id})[:5]}")
        if tenants - {who.tenant_id}:
            p.leak(f"tenant_id buckets of other tenants: {sorted(tenants - {who.tenant_id})}")
        # A zero-count bucket (min_doc_count 0) comes from the index's terms that the key's
        # document-level security lets through: the prober's own memories of every type, since
        # the alias's type filter narrows the search, not the terms enumerated.
        allowed_sessions = {f"s-{d.marker}" for d in world.visible(who)}
        if sessions - allowed_sessions:
            p.leak(f"session_id buckets of others: {sorted(sessions - allowed_sessions)[:5]}")
        if aggs["everything"]["doc_count"] > len(visible):
            p.leak(f"global aggregation counted {aggs['everything']['doc_count']} > {len(visible)} documents")
        if aggs["distinct_users"]["value"] > 1:
            p.leak(f"cardinality of user_id is {aggs['distinct_users']['value']}")
    with rec.probe(f"aggs:significant_text:{kind}", who) as p:
        buckets = es.search(index=alias, size=0, query={"match_all": {}}, aggs={
            "words": {"significant_text": {"field": "text", "min_doc_count": 1, "size": 1000}}})
        words = {b["key"] for b in buckets["aggregations"]["words"]["buckets"]}
        if words & foreign_markers:
            p.leak(f"significant_text surfaced others' words: {sorted(words & foreign_markers)}")
    with rec.probe(f"scroll:{kind}", who) as p:
        seen: list[str] = []
        response = es.search(index=alias, size=2, scroll="1m", query={"match_all": {}})
        scroll_id = response["_scroll_id"]
        try:
            while response["hits"]["hits"]:
                seen += _hit_ids(response)
                response = es.scroll(scroll_id=scroll_id, scroll="1m")
                scroll_id = response["_scroll_id"]
        finally:
            es.clear_scroll(scroll_id=scroll_id)
        p.ids(seen, allowed=visible, required=visible)
    with rec.probe(f"point_in_time:{kind}", who, refusal_ok=True) as p:
        pit = es.open_point_in_time(index=alias, keep_alive="1m")["id"]
        try:
            try:
                response = es.search(pit={"id": pit, "keep_alive": "1m"}, size=1000, query={"match_all": {}})
            except AuthorizationException:
                # Searching a PIT is authorised against the concrete index, which subject keys
                # are not granted (they name the aliases only): refused, nothing returned.
                response = None
            if response is not None:
                p.ids(_hit_ids(response), allowed=visible)
        finally:
            es.close_point_in_time(id=pit)
    with rec.probe(f"include_superseded:{kind}", who) as p:
        response = es.search(index=alias, size=1000, query={"exists": {"field": "superseded_by"}})
        own_superseded = {d.id for d in world.visible(who, alias) if d.superseded}
        p.ids(_hit_ids(response), allowed=own_superseded, required=own_superseded)
    if foreign:
        with rec.probe(f"knn:{kind}", who) as p:
            response = es.search(index=alias, size=100, knn={
                "field": "embedding", "query_vector": list(foreign[0].vector), "k": 100, "num_candidates": 200})
            p.ids(_hit_ids(response), allowed=visible, required=visible)
    if foreign and kind == MemoryType.EPISODIC.value:  # episodes' sentence vectors: nested documents
        with rec.probe(f"knn:passages:{kind}", who) as p:
            response = es.search(index=alias, size=100, knn={
                "field": "passages.embedding", "query_vector": list(foreign[0].vector), "k": 100,
                "num_candidates": 200})
            p.ids(_hit_ids(response), allowed=visible, required=visible)
        with rec.probe(f"nested:inner_hits:{kind}", who) as p:
            response = es.search(index=alias, size=1000, query={
                "nested": {"path": "passages", "query": {"match_all": {}}, "inner_hits": {}}})
            p.ids(_hit_ids(response), allowed=visible, required=visible)
    with rec.probe(f"suggest:term:{kind}", who, refusal_ok=True) as p:
        target = sorted(foreign_markers)[0]

        def suggest():
            response = es.search(index=alias, size=0, suggest={
                "s": {"text": target[:-1] + "x", "term": {"field": "text", "suggest_mode": "always"}}})
            offered = {o["text"] for entry in response.get("suggest", {}).get("s", []) for o in entry["options"]}
            if offered & foreign_markers:
                p.leak(f"term suggester offered others' words: {sorted(offered & foreign_markers)}")

        try:
            suggest()
        except ApiError as exc:
            if exc.error != "security_exception":  # suggesters are refused under DLS: not a leak
                raise
    with rec.probe(f"terms_enum:{kind}", who, refusal_ok=True) as p:
        own_markers = {d.marker for d in world.visible(who)}
        for field_name, string, allowed in (("user_id", None, {who.user_id}), ("tenant_id", None, {who.tenant_id}),
                                            ("text", "zq", own_markers)):
            terms = set(es.terms_enum(index=alias, field=field_name, string=string, size=1000)["terms"])
            if terms - allowed:
                p.leak(f"terms_enum on {field_name} returned {sorted(terms - allowed)[:5]}")
    with rec.probe(f"write:tampered_scope:{kind}", who) as p:
        other = next(s for s in world.subjects if s.tenant_id != who.tenant_id)
        p.refused(lambda: es.index(index=alias, document={**memory_scope(subject=other.subject), "text": "x"}))


def _probe_other_subject(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch,
                         other: SeededSubject) -> None:
    theirs = world.docs_of(other)
    # The other subject's indices when they are not the prober's own: a refusal reveals nothing.
    elsewhere = other.prefix != who.prefix
    every_alias = ",".join(dict.fromkeys(all_aliases(prefix=who.prefix) + all_aliases(prefix=other.prefix)))
    with rec.probe("query_string:other_user", who, refusal_ok=elsewhere) as p:
        query = f'user_id:"{other.user_id}" OR text:{other.marker} OR session_id:"s-{other.marker}"'
        response = es.search(index=every_alias, size=1000, query={"query_string": {"query": query}})
        p.ids(_hit_ids(response), allowed=set())
    with rec.probe("ids:other_user", who, refusal_ok=elsewhere) as p:
        response = es.search(index=every_alias, size=1000, query={"ids": {"values": [d.id for d in theirs]}})
        p.ids(_hit_ids(response), allowed=set())
    with rec.probe("mget:other_user", who, refusal_ok=elsewhere) as p:
        found = [d["_id"] for d in es.mget(docs=[{"_index": d.alias, "_id": d.id} for d in theirs])["docs"]
                 if d.get("found")]
        p.ids(found, allowed=set())
    for doc in theirs:
        with rec.probe(f"get:{doc.memory_type.value}", who, refusal_ok=elsewhere) as p:
            _expect_absent(p, lambda: es.get(index=doc.alias, id=doc.id))
    doc = theirs[0]
    with rec.probe("get_source", who, refusal_ok=elsewhere) as p:
        _expect_absent(p, lambda: es.get_source(index=doc.alias, id=doc.id))
    with rec.probe("exists", who, refusal_ok=elsewhere) as p:
        if es.exists(index=doc.alias, id=doc.id):
            p.leak(f"exists() confirmed {doc.id}")
    with rec.probe("explain", who, refusal_ok=True) as p:
        try:
            if es.explain(index=doc.alias, id=doc.id, query={"match_all": {}}).get("matched"):
                p.leak(f"explain matched {doc.id}")
        except NotFoundError:
            pass
    with rec.probe("termvectors", who, refusal_ok=True) as p:
        response = es.termvectors(index=doc.alias, id=doc.id, fields=["text"])
        if response.get("found") or response.get("term_vectors"):
            p.leak(f"termvectors of {doc.id}")
    with rec.probe("update:other_user", who) as p:
        p.refused(lambda: es.update(index=doc.alias, id=doc.id, doc={"superseded_by": "tampered"}))
    with rec.probe("delete:other_user", who) as p:
        p.refused(lambda: es.delete(index=doc.alias, id=doc.id))


def _probe_other_tenant(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch,
                        tenant_id: str) -> None:
    with rec.probe("query_string:other_tenant", who) as p:
        response = es.search(index=",".join(all_aliases(prefix=who.prefix)), size=1000,
                             query={"query_string": {"query": f'tenant_id:"{tenant_id}"'}})
        p.ids(_hit_ids(response), allowed=set())
    with rec.probe("catalog:other_tenant", who) as p:
        response = es.search(index=alias_name(MemoryType.CATALOG, prefix=who.prefix), size=1000,
                             query={"bool": {"should": [{"term": {"tenant_id": tenant_id}},
                                                        {"match": {"text": world.catalog_of(tenant_id)[0].marker}}]}})
        p.ids(_hit_ids(response), allowed=set())
    for doc in world.catalog_of(tenant_id):
        with rec.probe("get:catalog:other_tenant", who, refusal_ok=True) as p:
            _expect_absent(p, lambda: es.get(index=doc.alias, id=doc.id))


def _expect_absent(p: ProbeScope, call: Callable[[], object]) -> None:
    try:
        response = call()
    except NotFoundError:
        return
    if not isinstance(response.body, dict) or response.body.get("found", True):
        p.leak(f"document returned: {str(response.body)[:120]}")


def _probe_lifecycle(world: World, rec: ProbeRecorder) -> None:
    """Rotated-out (grace over) and revoked keys are refused; the replacements work."""
    by_tenant: dict[str, list[SeededSubject]] = {}
    for who in world.subjects:
        by_tenant.setdefault(who.tenant_id, []).append(who)
    for members in by_tenant.values():
        for who, change in zip(members, ("rotate", "revoke")):
            old = subject_es_client(subject=who.subject)
            if change == "rotate":
                subject_key_rotate(subject=who.subject, actor=ACTOR, grace=timedelta(0))
            else:
                subject_key_revoke(subject=who.subject, actor=ACTOR)
            alias = alias_name(MemoryType.SEMANTIC, prefix=who.prefix)
            with rec.probe(f"lifecycle:{change}d_key_refused", who) as p:
                p.refused(lambda: old.search(index=alias, query={"match_all": {}}))
            with rec.probe(f"lifecycle:{change}:new_key_works", who) as p:
                visible = {d.id for d in world.visible(who, alias)}
                fresh = subject_es_client(subject=who.subject)
                p.ids(_hit_ids(fresh.search(index=alias, size=1000, query={"match_all": {}})),
                      allowed=visible, required=visible)


# ---------------------------------------------------------------- relevance statistics

_COUNT_FIGURES = ("n, number of documents containing term", "N, total number of documents with field")


def _explanation_counts(node: dict) -> list[int]:
    """The document counts a Lucene BM25 explanation carries (n and N of every idf)."""
    found = [int(node["value"])] if str(node.get("description", "")).startswith(_COUNT_FIGURES) else []
    for child in node.get("details", []):
        found += _explanation_counts(child)
    return found


def _probe_statistics(world: World, rec: ProbeRecorder) -> None:
    """Relevance statistics that could reveal another tenant's documents (see the module docstring).

    A figure bigger than what the prober's whole tenant holds in that index can only come from
    another tenant. Statistics APIs must be refused; figures inside plain searches are leaks for
    dedicated tenants and the documented residual for shared ones.
    """
    first_of_tenant: dict[str, SeededSubject] = {}
    for who in world.subjects:
        first_of_tenant.setdefault(who.tenant_id, who)
    for who in world.subjects:
        es = subject_es_client(subject=who.subject)
        alias = alias_name(MemoryType.EPISODIC, prefix=who.prefix)
        tenant_count = len(world.tenant_docs(who.tenant_id))
        foreign = sorted({d.marker for d in world.docs if d.tenant_id != who.tenant_id})
        residual = not who.dedicated
        with rec.probe("stats:termvectors(artificial doc)", who, refusal_ok=True) as p:
            response = es.termvectors(index=alias, doc={"text": " ".join(foreign)}, fields=["text"],
                                      term_statistics=True, field_statistics=True)
            text = response.get("term_vectors", {}).get("text", {})
            freqs = {t: v["doc_freq"] for t, v in text.get("terms", {}).items() if t in foreign and v.get("doc_freq")}
            if any(freqs.values()):
                p.leak(f"doc_freq of other tenants' words: {dict(sorted(freqs.items())[:3])}")
            if text.get("field_statistics", {}).get("doc_count", 0) > tenant_count:
                p.leak(f"field doc_count {text['field_statistics']['doc_count']} > {tenant_count} of this tenant")
        with rec.probe("stats:mtermvectors", who, refusal_ok=True) as p:
            response = es.mtermvectors(index=alias, docs=[{"doc": {"text": foreign[0]}, "fields": ["text"],
                                                           "term_statistics": True}])
            for item in response.get("docs", []):
                terms = item.get("term_vectors", {}).get("text", {}).get("terms", {})
                if terms.get(foreign[0], {}).get("doc_freq", 0):
                    p.leak(f"mtermvectors doc_freq of {foreign[0]}: {terms[foreign[0]]['doc_freq']}")
        own = world.visible(who, alias)[0]
        with rec.probe("stats:explain_api", who, refusal_ok=True) as p:
            response = es.explain(index=alias, id=own.id, query={"match": {"text": f"{own.marker} memory"}})
            counts = _explanation_counts(response.get("explanation", {}))
            if any(c > tenant_count for c in counts):
                p.leak(f"_explain shows document counts {sorted(set(counts))} > {tenant_count} of this tenant")
        with rec.probe("stats:field_caps", who, refusal_ok=True) as p:
            p.refused(lambda: es.field_caps(index=alias, fields="*"))
        with rec.probe("stats:terms_enum", who, refusal_ok=True) as p:
            p.refused(lambda: es.terms_enum(index=alias, field="tenant_id"))
        with rec.probe("stats:validate_query", who, refusal_ok=True) as p:
            p.refused(lambda: es.indices.validate_query(index=alias, explain=True, rewrite=True,
                                                        query={"match": {"text": foreign[0]}}))
        with rec.probe("stats:search_shards", who, refusal_ok=True) as p:
            p.refused(lambda: es.search_shards(index=alias))
        for kind, suggester in (("term", {"term": {"field": "text", "suggest_mode": "always"}}),
                                ("phrase", {"phrase": {"field": "text"}})):
            with rec.probe(f"stats:suggest_{kind}", who, refusal_ok=True) as p:
                p.refused(lambda s=suggester: es.search(index=alias, size=0, suggest={
                    "s": {"text": foreign[0][:-1] + "x", **s}}))
        with rec.probe("stats:profile", who, refusal_ok=True) as p:
            p.refused(lambda: es.search(index=alias, profile=True, query={"match": {"text": foreign[0]}}))
        # Figures inside plain searches: inherent to shared indices (residual), leaks when dedicated.
        with rec.probe("stats:search_explain", who) as p:
            response = es.search(index=alias, explain=True, size=100, query={"match": {"text": f"{who.marker} memory"}})
            counts = [c for h in response["hits"]["hits"] for c in _explanation_counts(h.get("_explanation", {}))]
            if any(c > tenant_count for c in counts):
                p.figure(f"search explain shows document counts up to {max(counts)} > {tenant_count} of this tenant",
                         residual=residual)
        with rec.probe("stats:significant_text_bg_count", who) as p:
            response = es.search(index=alias, size=0, query={"match": {"text": who.marker}}, aggs={
                "words": {"significant_text": {"field": "text", "min_doc_count": 1}},
                "types": {"significant_terms": {"field": "memory_type", "min_doc_count": 1}}})
            aggs = response["aggregations"]
            bg = [aggs[a].get("bg_count", 0) for a in ("words", "types")]
            bg += [b.get("bg_count", 0) for a in ("words", "types") for b in aggs[a]["buckets"]]
            if max(bg, default=0) > tenant_count:
                p.figure(f"bg_count {max(bg)} > {tenant_count} documents of this tenant", residual=residual)
        if first_of_tenant[who.tenant_id] is who:
            _probe_score_drift(world, rec, who, es, alias)


def _probe_score_drift(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch, alias: str) -> None:
    """Another tenant writes documents holding the prober's own words: the prober's scores, and
    every figure of Engram's recall with ``explain``, must not move."""
    others = [s for s in world.subjects if s.tenant_id != who.tenant_id]
    # Worst case for a shared tenant: a writer in the same (shared) indices.
    writer_side = next((s for s in others if not s.dedicated), others[0])
    query = {"match": {"text": f"{who.marker} memory"}}

    def scores() -> list[tuple[str, float]]:
        return [(h["_id"], h["_score"]) for h in es.search(index=alias, size=100, query=query)["hits"]["hits"]]

    with rec.probe("stats:score_drift", who) as p:
        before = scores()
        planted = [uuid.uuid4().hex for _ in range(20)]
        target = alias_name(MemoryType.EPISODIC, prefix=writer_side.prefix)
        writer = writer_es_client(prefix=writer_side.prefix)
        helpers.bulk(writer, ({"_op_type": "index", "_index": target, "_id": i, "_source": {
            **memory_scope(subject=writer_side.subject), "memory_type": "episodic", "source": "isolation-probe",
            "text": f"{who.marker} {who.marker} memory planted by another tenant"}} for i in planted),
            refresh=True)
        try:
            after = scores()
        finally:
            helpers.bulk(writer, ({"_op_type": "delete", "_index": target, "_id": i} for i in planted),
                         refresh=True, raise_on_error=False)
        if before != after:
            moved = sum(1 for b, a in zip(before, after, strict=False) if b != a)
            p.figure(f"{moved} _score(s) of own documents moved when another tenant wrote (e.g. "
                     f"{before[0][1]:.4f} -> {after[0][1]:.4f})", residual=not who.dedicated)
