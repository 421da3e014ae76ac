"""The isolation probe's world: tenants and end-users seeded with marked documents in every memory
type, what each end-user is entitled to see, and the teardown that leaves nothing readable."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils import timezone
from elasticsearch import helpers

from engram_core.es.client import admin_client
from engram_core.es.schema import USER_TYPES, MemoryType, alias_name, all_aliases, ensure_indices, shared_prefix
from tenants.es_keys import invalidate_keys
from tenants.models import Subject, SubjectKey, Tenant
from tenants.selectors import index_prefix_for

from ..sandbox import scratch_tenants_retire
from tenants.services.audit import audit_record
from tenants.services.clients import writer_es_client
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes

ACTOR = "isolation-probe"


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


def _marker(n: int) -> str:
    # Letters only and a fixed shape, so the English analyzer keeps it as one unchanged term.
    letters = "".join(chr(ord("a") + (n // 26 ** i) % 26) for i in range(3))
    return f"zq{letters}vok"


def _vector(rng: random.Random, dims: int) -> tuple[float, ...]:
    return tuple(rng.uniform(-1, 1) for _ in range(dims))


def world_seed(*, tenants_spec: Sequence[TenantSpec], docs_per_type: int) -> World:
    """Seed ``tenants_spec`` (slugs get a run suffix, so existing tenants are never touched) in the
    shared indices, or a dedicated tenant's own, which this creates."""
    run = uuid.uuid4().hex[:6]
    prefix = shared_prefix()
    mapping = admin_client().indices.get_mapping(index=alias_name(MemoryType.EPISODIC))
    dims = next(iter(mapping.values()))["mappings"]["properties"]["embedding"]["dims"]
    rng = random.Random(run)
    tenants, subjects, docs = [], [], []
    markers = iter(range(10_000))
    now = timezone.now().isoformat()
    try:
        for spec in tenants_spec:
            tenant = Tenant.objects.create(slug=f"{spec.slug}-{run}", name=f"{spec.slug} (isolation probe {run})",
                                           isolation=spec.isolation)
            tenants.append(tenant)
            tprefix = index_prefix_for(tenant=tenant)
            if tprefix != prefix:
                ensure_indices(es=admin_client(), prefix=tprefix, dims=dims)
            catalog_marker = _marker(next(markers))
            for _ in range(docs_per_type):
                docs.append(SeededDoc(id=uuid.uuid4().hex, memory_type=MemoryType.CATALOG,
                                      alias=alias_name(MemoryType.CATALOG, prefix=tprefix), tenant_id=tenant.slug,
                                      user_id=None, marker=catalog_marker, vector=_vector(rng, dims)))
            for external_id in spec.subjects:
                subject = subject_get_or_create(tenant=tenant, external_id=external_id, actor=ACTOR,
                                                lifetimes=KeyLifetimes.from_settings())
                who = SeededSubject(subject=subject, marker=_marker(next(markers)))
                subjects.append(who)
                for memory_type in USER_TYPES:
                    for _ in range(docs_per_type):
                        docs.append(SeededDoc(id=uuid.uuid4().hex, memory_type=memory_type,
                                              alias=alias_name(memory_type, prefix=tprefix),
                                              tenant_id=who.tenant_id, user_id=who.user_id, marker=who.marker,
                                              vector=_vector(rng, dims)))
                # A superseded fact: only its owner may see it, even when asking for superseded ones.
                docs.append(SeededDoc(id=uuid.uuid4().hex, memory_type=MemoryType.SEMANTIC,
                                      alias=alias_name(MemoryType.SEMANTIC, prefix=tprefix),
                                      tenant_id=who.tenant_id, user_id=who.user_id, marker=who.marker,
                                      vector=_vector(rng, dims), superseded=True))
        bulk_by_prefix(docs, lambda d: _action(d, now), refresh=True)
    except BaseException:  # what was seeded before the failure goes as after a run
        world_teardown(World(prefix=prefix, tenants=tenants, subjects=subjects, docs=docs, concrete_indices=[]))
        raise
    aliases = [a for t in tenants for a in all_aliases(prefix=index_prefix_for(tenant=t))]
    concrete = sorted(admin_client().indices.get_alias(name=",".join(dict.fromkeys(aliases))))
    return World(prefix=prefix, tenants=tenants, subjects=subjects, docs=docs, concrete_indices=concrete)


def _prefix_of(alias: str) -> str:
    return alias.rsplit("-", 1)[0]


def bulk_by_prefix(docs: Sequence[SeededDoc], action: Callable[[SeededDoc], dict], **kwargs) -> None:
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


def world_teardown(world: World) -> None:
    """Revoke the world's keys, delete its documents and set its dedicated tenants back to shared."""
    # One invalidation for the whole run (each costs the cluster a refresh), recorded once.
    keys = SubjectKey.objects.live().filter(subject__in=[w.subject for w in world.subjects])
    key_ids = list(keys.values_list("es_key_id", flat=True))
    invalidate_keys(key_ids=key_ids)
    keys.update(revoked_at=timezone.now())
    audit_record(actor=ACTOR, action="subject_keys.revoked_all",
                 details={"key_ids": key_ids, "reason": "probe run over"})
    # Errors are not raised: a document a (failed) probe managed to delete is already gone,
    # and the caller drops the throwaway indices anyway.
    bulk_by_prefix(world.docs, lambda d: {"_op_type": "delete", "_index": d.alias, "_id": d.id},
                   refresh=True, raise_on_error=False)
    scratch_tenants_retire(tenants=world.tenants, actor=ACTOR)
