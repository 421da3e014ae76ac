"""Schema as code: index names, settings and mappings, and the idempotent setup that applies them.

Every memory type lives in one versioned index per prefix (``<prefix>-memories-v<N>``) behind one
filtered alias per type. ``ensure_indices`` creates what is missing, leaves what is current, and
when the definition or the embedder changed copies the documents into the next version (scroll +
bulk) and moves the aliases atomically."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from elasticsearch import ApiError, Elasticsearch, helpers

from engram_core.es.prefixes import shared_prefix
from engram_core.es.vectors import UNRECORDED_SPACE, Revector, embedder_source

# The memory types are the domain's (engram_core.memory_types); the schema names an index alias
# per type. Also importable from here by the modules that always did (explicit re-exports).
from engram_core.memory_types import USER_TYPES as USER_TYPES
from engram_core.memory_types import MemoryType as MemoryType

log = logging.getLogger(__name__)

# Elasticsearch 9 leaves dense vectors out of a returned ``_source`` (the index setting
# ``index.mapping.exclude_source_vectors`` is on by default). A copy that rebuilds documents from
# their ``_source`` (a migration, a tenant's move between indices) must ask for them back, or the
# copies lose their vectors and drop out of every kNN search without an error.
SOURCE_WITH_VECTORS = {"exclude_vectors": False}
# The vector fields, kept out of every response (they are excluded from a returned _source anyway,
# but a nested field such as ``passages`` would still show as a list of empty objects).
VECTOR_FIELDS = ["embedding", "passages"]
# Fields derived from a memory's text when it is stored (its session's context, its WordNet
# concepts, the dates an episode's words name): searched, and kept out of every response like the vectors.
HIDDEN_FIELDS = ("derived_context", "concepts", "event_dates", "states_time")


# The one index of a prefix is ``<prefix>-memories-v<N>``; each type reaches it through its alias.
INDEX_STEM = "memories"

def alias_name(memory_type: MemoryType | str, *, prefix: str | None = None) -> str:
    return f"{prefix or shared_prefix()}-{MemoryType(memory_type).value}"


def all_aliases(*, prefix: str | None = None) -> list[str]:
    return [alias_name(t, prefix=prefix) for t in MemoryType]


# English analysis: possessives, lower case, ASCII folding, stop words, Porter stemming.
# The filters come from analysis-common on a full distribution and from Engram's small
# analysis plugin on the integ-test-zip node (see elasticsearch/engram-analysis).
ANALYSIS = {
    "filter": {
        "engram_possessive": {"type": "stemmer", "language": "possessive_english"},
        "engram_stop": {"type": "stop", "stopwords": "_english_"},
        "engram_stemmer": {"type": "stemmer", "language": "english"},
    },
    "analyzer": {
        "engram_text": {
            "type": "custom",
            "tokenizer": "standard",
            "filter": ["engram_possessive", "lowercase", "asciifolding", "engram_stop", "engram_stemmer"],
        },
    },
}


def _text(**extra) -> dict:
    return {"type": "text", "analyzer": "engram_text", "fields": {"exact": {"type": "text", "analyzer": "standard"}},
            **extra}


@dataclass(frozen=True)
class IndexOptions:
    """The operator's settings an index is defined with, read once where a setup starts
    (``ensure_indices``, ``from_settings``) and passed down."""

    shards: int  # ES_NUMBER_OF_SHARDS
    replicas: str  # ES_NUMBER_OF_REPLICAS: "auto" or a count (``replica_settings``)
    refresh_interval: str  # ES_REFRESH_INTERVAL
    bm25_k1: float  # ENGRAM_BM25_K1
    bm25_b: float  # ENGRAM_BM25_B
    vector_type: str  # ENGRAM_VECTOR_INDEX_TYPE
    hnsw_m: int  # ENGRAM_HNSW_M (0: Elasticsearch's default)
    hnsw_ef_construction: int  # ENGRAM_HNSW_EF_CONSTRUCTION (0: Elasticsearch's default)

    @classmethod
    def from_settings(cls) -> IndexOptions:
        return cls(shards=settings.ES_NUMBER_OF_SHARDS, replicas=settings.ES_NUMBER_OF_REPLICAS,
                   refresh_interval=settings.ES_REFRESH_INTERVAL, bm25_k1=settings.ENGRAM_BM25_K1,
                   bm25_b=settings.ENGRAM_BM25_B, vector_type=settings.ENGRAM_VECTOR_INDEX_TYPE,
                   hnsw_m=settings.ENGRAM_HNSW_M, hnsw_ef_construction=settings.ENGRAM_HNSW_EF_CONSTRUCTION)


def _vector(dims: int, options: IndexOptions) -> dict:
    # HNSW's m and ef_construction only for a graph type and only when set (0: Elasticsearch's
    # defaults, 16 and 100, not written, so an index made before these settings existed keeps its
    # schema hash); a flat type has no graph and Elasticsearch refuses them there.
    kind = options.vector_type
    graph = {key: value for key, value in (("m", options.hnsw_m), ("ef_construction", options.hnsw_ef_construction))
             if value and kind.endswith("hnsw")}
    return {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine",
            "index_options": {"type": kind, **graph}}


def _common_properties() -> dict:
    return {
        "tenant_id": {"type": "keyword"},
        "user_id": {"type": "keyword"},
        "memory_type": {"type": "keyword"},
        "text": _text(),
        # WordNet categories of the memory's nouns (language.concepts), searched, never returned.
        "concepts": {"type": "text", "analyzer": "engram_text"},
        "created_at": {"type": "date"},
        "occurred_at": {"type": "date"},
        "last_used_at": {"type": "date"},
        "use_count": {"type": "integer"},
        "confidence": {"type": "float"},
        "source": {"type": "keyword"},
        "session_id": {"type": "keyword"},
        "supersedes": {"type": "keyword"},
        "superseded_by": {"type": "keyword"},
        "superseded_at": {"type": "date"},
        "contradiction": {"type": "keyword"},
        "supporting_episode_ids": {"type": "keyword"},
        # Free-form caller metadata: kept, returned, never indexed (no mapping explosions).
        "metadata": {"type": "object", "enabled": False},
    }


_EXTRA_PROPERTIES: dict[MemoryType, dict] = {
    MemoryType.EPISODIC: {
        "role": {"type": "keyword"},
        # The turns just before this one in its session: recall matches on it, weighted low.
        "context": {"type": "text", "analyzer": "engram_text"},
        # Without an explicit context: the preceding episodes of the session (memory_app.services.context),
        # as ids and as their text resolved at index time (searched, never returned).
        "context_ids": {"type": "keyword"},
        "derived_context": {"type": "text", "analyzer": "engram_text"},
        # The days the episode's words say something happened on, resolved against ``occurred_at``
        # ("last Saturday"), and whether its words tell a time at all (language.temporal).
        "event_dates": {"type": "date_range", "format": "strict_date_optional_time"},
        "states_time": {"type": "boolean"},
        "consolidated_at": {"type": "date"},  # consolidation watermark: null until consolidated
        "client_id": {"type": "keyword"},  # an imported episode's own id (its _id is namespaced)
    },
    MemoryType.SEMANTIC: {
        # When the fact became true and when it stopped (the turns' dates, not the write time):
        # ``valid_to`` is set when a later fact supersedes it (memory_app.services.supersession).
        "valid_from": {"type": "date"},
        "valid_to": {"type": "date"},
    },
    MemoryType.PROCEDURAL: {
        "trigger": _text(),
        "steps": _text(),
        "refined_steps": _text(),
        "success_count": {"type": "integer"},
        "failure_count": {"type": "integer"},
        "last_success_at": {"type": "date"},
        # Ids of the last outcomes counted: a retried outcome is recognised, never counted twice.
        "outcome_ids": {"type": "keyword", "index": False, "doc_values": False},
    },
    MemoryType.CATALOG: {
        "title": _text(),
    },
}


def _vector_properties(dims: int, options: IndexOptions) -> dict:
    """The memory's own vector; an episode also has one per sentence (language.passages), which
    the recall's passage leg ranks it by. Episodes stored before ``passages`` existed have none and
    are found through ``embedding``."""
    return {"embedding": _vector(dims, options),
            "passages": {"type": "nested", "properties": {"embedding": _vector(dims, options)}}}


# Index settings that Elasticsearch changes on a live index: they are left out of the schema hash
# (changing one is no reason for a new index and a copy of every document) and ``ensure_indices``
# puts the configured value on the current index in place.
DYNAMIC_SETTINGS = ("refresh_interval", "number_of_replicas", "auto_expand_replicas")


def replica_settings(replicas: str) -> dict[str, str]:
    """The index settings for ``ES_NUMBER_OF_REPLICAS``: "auto" lets Elasticsearch keep one replica
    whenever a second data node can hold it and none on a single node (``auto_expand_replicas``);
    a number fixes the count. Values as Elasticsearch reports them back (strings), so a live index
    compares equal to its definition."""
    if str(replicas).strip().lower() == "auto":
        return {"auto_expand_replicas": "0-1"}
    count = int(replicas)
    if count < 0:
        raise ImproperlyConfigured(f"ES_NUMBER_OF_REPLICAS must be 'auto' or a number >= 0, not {replicas!r}")
    return {"number_of_replicas": str(count), "auto_expand_replicas": "false"}


def _dynamic(index_settings: dict) -> dict:
    """The dynamic settings among an index's ``settings.index`` (defined or live)."""
    return {k: v for k, v in index_settings.items() if k in DYNAMIC_SETTINGS}


def _hash(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class IndexDefinition:
    body: dict

    def _index_settings(self) -> dict:
        return self.body.get("settings", {}).get("index", {})

    def _hash_with(self, dynamic: dict) -> str:
        """The hash of the body whose dynamic settings are ``dynamic`` (the rest as defined)."""
        index = {k: v for k, v in self._index_settings().items() if k not in DYNAMIC_SETTINGS} | dynamic
        return _hash({**self.body, "settings": {**self.body.get("settings", {}), "index": index}})

    @property
    def schema_hash(self) -> str:
        return self._hash_with({})

    def legacy_hash(self, *, replicas: int, refresh_interval: str | None = None) -> str:
        """A hash as earlier releases recorded it, with dynamic settings in it: the number of
        replicas (an integer), and before that the refresh interval too (indices created by those
        releases carry theirs)."""
        return self._hash_with({"number_of_replicas": replicas}
                               | ({} if refresh_interval is None else {"refresh_interval": refresh_interval}))

    def legacy_hashes(self, *, live: dict) -> set[str]:
        """The hashes an index of an earlier release records, given its live dynamic settings."""
        if "number_of_replicas" not in live:
            return set()
        replicas = int(live["number_of_replicas"])
        return {self.legacy_hash(replicas=replicas),
                self.legacy_hash(replicas=replicas, refresh_interval=live.get("refresh_interval"))}

    @property
    def dynamic_settings(self) -> dict:
        return _dynamic(self._index_settings())


def index_definition(*, options: IndexOptions, dims: int | None = None) -> IndexDefinition:
    """The one index of a prefix: every memory type's fields (each type's own fields are absent
    from the others' documents), with the operator's ``options``."""
    dims = dims or embedder_source().dims()
    properties = {**_common_properties(), **_vector_properties(dims, options)}
    for extra in _EXTRA_PROPERTIES.values():
        properties.update(extra)
    body = {
        "settings": {
            "index": {
                # Static: a change creates the next version and copies into it (deployment guide).
                "number_of_shards": options.shards,
                **replica_settings(options.replicas),
                "refresh_interval": options.refresh_interval,
                "analysis": ANALYSIS,
                # BM25 parameters for every text field; memories are short, so length
                # normalisation (b) matters more than in web search.
                "similarity": {"default": {"type": "BM25", "k1": options.bm25_k1, "b": options.bm25_b}},
            }
        },
        "mappings": {
            # Unknown fields are an error, not a silent new mapping.
            "dynamic": "strict",
            "properties": properties,
        },
    }
    return IndexDefinition(body=body)


def index_base(*, prefix: str | None = None) -> str:
    """The name the versioned index of a prefix is built on: ``<prefix>-memories``."""
    return f"{prefix or shared_prefix()}-{INDEX_STEM}"


def type_filter(memory_type: MemoryType | str) -> dict:
    """The filter of a type's alias (searches through it see that type's documents only)."""
    return {"term": {"memory_type": MemoryType(memory_type).value}}


@dataclass(frozen=True)
class SetupResult:
    alias: str
    index: str
    action: str  # created | unchanged | migrated
    copied: int = 0  # this type's documents copied
    revectored: bool = False  # the copies' vectors were computed again (the embedder changed)


def _version_of(index: str) -> int:
    return int(index.rsplit("-v", 1)[1])


Rekey = Callable[[str, dict], tuple[str, dict] | None]


def _bindings(es: Elasticsearch, prefix: str | None) -> dict[str, dict[str, dict]]:
    """For each concrete index behind the prefix's type aliases: {alias: its binding}."""
    # A 404 when some are missing, with the ones found beside "error" and "status".
    found = es.options(ignore_status=404).indices.get_alias(name=",".join(all_aliases(prefix=prefix)))
    return {index: info["aliases"] for index, info in found.body.items()
            if isinstance(info, dict) and info.get("aliases")}


def _alias_bindings(prefix: str | None) -> dict[str, dict]:
    """Each type's alias and its binding to the one index: the type's filter, writes allowed."""
    return {alias_name(t, prefix=prefix): {"filter": type_filter(t), "is_write_index": True} for t in MemoryType}


def _alias_actions(index: str, prefix: str | None) -> list[dict]:
    return [{"add": {"index": index, "alias": alias, **binding}} for alias, binding in _alias_bindings(prefix).items()]


def ensure_indices(*, es: Elasticsearch, prefix: str | None = None, dims: int | None = None,
                   definition: IndexDefinition | None = None, rekey: Rekey | None = None,
                   options: IndexOptions | None = None) -> list[SetupResult]:
    """Bring the prefix's memory index to its current definition. Idempotent; safe on every deploy.
    One result per type alias.

    ``definition`` overrides the built-in one (tests use it to simulate a mapping change).
    ``rekey(id, source)`` may give a migrated document a new (id, source) (None: unchanged).
    Indices of the earlier layout, one per memory type (``<prefix>-<type>-v<N>``), are migrated
    into the one index like any older version. ``options``: the operator's index settings, read
    here when not given.
    """
    definition = definition or index_definition(options=options or IndexOptions.from_settings(), dims=dims)
    space = embedder_source().space()
    meta = {"engram_schema_hash": definition.schema_hash, "engram_vector_space": space}
    body = {**definition.body, "mappings": {**definition.body["mappings"], "_meta": meta}}
    bindings = _bindings(es, prefix)
    aliases = all_aliases(prefix=prefix)
    if not bindings:
        index = f"{index_base(prefix=prefix)}-v1"
        if es.indices.exists(index=index):  # left over from an interrupted first setup
            es.indices.delete(index=index)
        es.indices.create(index=index, aliases=_alias_bindings(prefix), **body)
        es.cluster.health(index=index, wait_for_status="yellow", timeout="30s")
        log.info("created %s", index)
        return [SetupResult(alias=a, index=index, action="created") for a in aliases]
    current = next(iter(bindings)) if len(bindings) == 1 else None
    if current is not None and current.startswith(f"{index_base(prefix=prefix)}-v"):
        found = es.indices.get(index=current)[current]  # its mappings and settings, in one request
        recorded = found["mappings"].get("_meta", {})
        same_space = recorded.get("engram_vector_space", UNRECORDED_SPACE) == space
        bound = bindings[current]
        complete = all(bound.get(alias_name(t, prefix=prefix), {}).get("filter") == type_filter(t) for t in MemoryType)
        live = _dynamic(found["settings"].get("index", {}))
        hashes = {definition.schema_hash, *definition.legacy_hashes(live=live)}
        if recorded.get("engram_schema_hash") in hashes and same_space and complete:
            if recorded.get("engram_schema_hash") != definition.schema_hash or "engram_vector_space" not in recorded:
                # Recorded before the hash left dynamic settings out, or before the space was recorded.
                es.indices.put_mapping(index=current, meta={**recorded, **meta})
            changed = {k: v for k, v in definition.dynamic_settings.items() if live.get(k) != v}
            if changed:
                es.indices.put_settings(index=current, settings={"index": changed})
                log.info("%s: %s set in place", current, ", ".join(f"{k}={v}" for k, v in changed.items()))
            return [SetupResult(alias=a, index=current, action="unchanged") for a in aliases]
    revector = None
    if (recorded_space := _recorded_space(es, list(bindings))) != space:
        log.warning("%s hold vectors of %s, the embedder gives %s: computing them again", ", ".join(bindings),
                    recorded_space or "several spaces", space)
        revector = embedder_source().revector
    return _migrate(es, prefix, bindings, body, rekey=rekey, revector=revector)


def _recorded_space(es: Elasticsearch, indices: list[str]) -> str | None:
    """The vector space the given indices record (None when they disagree)."""
    spaces = {body["mappings"].get("_meta", {}).get("engram_vector_space", UNRECORDED_SPACE)
              for body in es.indices.get_mapping(index=",".join(indices)).values()}
    return spaces.pop() if len(spaces) == 1 else None


def _copies(es: Elasticsearch, old: str, hits: Iterable[dict], *, rekey: Rekey | None, revector: Revector | None,
            page: int) -> Iterator[tuple[str, dict]]:
    """(id, source) of each document to copy from ``old``, its vectors computed again a page at a
    time with ``revector`` (by memory type)."""
    hits = iter(hits)
    while chunk := list(itertools.islice(hits, page)):
        if revector is not None:
            for memory_type in MemoryType:
                of_type = [h for h in chunk if h["_source"].get("memory_type") == memory_type.value]
                if of_type:
                    revector(es, old, memory_type, of_type)
        for hit in chunk:
            changed = rekey(hit["_id"], hit["_source"]) if rekey else None
            yield changed or (hit["_id"], hit["_source"])


def _migrate(es: Elasticsearch, prefix: str | None, olds: dict[str, dict[str, dict]], body: dict, *,
             rekey: Rekey | None = None, revector: Revector | None = None) -> list[SetupResult]:
    """Copy the documents of ``olds`` (concrete index: {alias: binding}) into the next version,
    move every type alias to it at once and drop ``olds``."""
    base = index_base(prefix=prefix)
    versions = [_version_of(o) for o in olds if o.startswith(f"{base}-v")]
    new = f"{base}-v{max(versions, default=0) + 1}"
    if es.indices.exists(index=new):  # left over from an interrupted migration: start it again
        es.indices.delete(index=new)
    es.indices.create(index=new, **body)
    es.cluster.health(index=new, wait_for_status="yellow", timeout="30s")
    # Block writes on the old indices so nothing lands there after the copy has passed them; a
    # write in that window meets a cluster block, which the write path takes as an outage: it
    # waits in the outbox and lands in the new version (engram_core.es.outage).
    es.indices.put_settings(index=",".join(olds), settings={"index.blocks.write": True})
    try:
        for old in olds:
            es.indices.refresh(index=old)
            # Vectors computed again need only the text: leave the old ones in the old index.
            hits = helpers.scan(es, index=old, query={"query": {"match_all": {}}, "_source": (
                {"excludes": VECTOR_FIELDS} if revector else SOURCE_WITH_VECTORS)}, size=500, preserve_order=False)
            actions = ({"_op_type": "index", "_index": new, "_id": doc_id, "_source": source}
                       for doc_id, source in _copies(es, old, hits, rekey=rekey, revector=revector, page=500))
            for _ in helpers.streaming_bulk(es, actions, chunk_size=500, raise_on_error=True):
                pass  # raise_on_error: a document that fails stops the migration before the aliases move
        es.indices.refresh(index=new)
        expected = sum(es.count(index=old)["count"] for old in olds)
        actual = es.count(index=new)["count"]
        if actual != expected:
            raise RuntimeError(f"migration of {base} copied {actual} of {expected} documents; aliases not moved")
        copied = {t: es.count(index=new, query=type_filter(t))["count"] for t in MemoryType}
        es.indices.update_aliases(actions=[
            *({"remove": {"index": old, "aliases": sorted(olds[old])}} for old in olds), *_alias_actions(new, prefix)])
    except Exception:
        es.indices.put_settings(index=",".join(olds), settings={"index.blocks.write": False})
        raise
    es.indices.delete(index=",".join(olds))
    log.info("migrated %s -> %s (%d documents%s)", ", ".join(olds), new, sum(copied.values()),
             ", vectors computed again" if revector else "")
    return [SetupResult(alias=alias_name(t, prefix=prefix), index=new, action="migrated", copied=copied[t],
                        revectored=revector is not None) for t in MemoryType]


def indices_present(*, es: Elasticsearch, prefix: str | None = None) -> dict[str, bool]:
    aliases = all_aliases(prefix=prefix)
    # A wildcard answers {} rather than 404 when nothing matches.
    found = es.indices.get_alias(name=f"{prefix or shared_prefix()}-*")
    present = {a for info in found.values() for a in info.get("aliases", {})}
    return {MemoryType(a.rsplit("-", 1)[1]).value: a in present for a in aliases}


def vector_spaces(*, es: Elasticsearch, prefix: str | None = None) -> dict[str, str]:
    """The vector space the index behind each present type alias records (``UNRECORDED_SPACE`` if
    none), by type: the aliases' bindings, then the mappings of the indices behind them."""
    bindings = _bindings(es, prefix)
    if not bindings:
        return {}
    mappings = es.indices.get_mapping(index=",".join(bindings))
    return {MemoryType(alias.rsplit("-", 1)[1]).value:
            mappings[index]["mappings"].get("_meta", {}).get("engram_vector_space", UNRECORDED_SPACE)
            for index, aliases in bindings.items() for alias in aliases}


def drop_indices(*, es: Elasticsearch, prefix: str) -> None:
    """Delete every index of a prefix (tests and `es_setup --drop`, never a request path)."""
    es.indices.delete(index=f"{prefix}-*", ignore_unavailable=True, allow_no_indices=True,
                      expand_wildcards="all")


# ---------------------------------------------------------------- audit checkpoints

# Signed checkpoints of the audit log (tenants.audit_chain), kept apart from the database that
# holds the log. Engram writes them through a credential that may only create documents there; no
# credential of Engram's may update, overwrite or delete one, nor drop the index (scripts/stack.py,
# docs/compliance.md).
AUDIT_CHECKPOINTS_STEM = "audit-checkpoints"
AUDIT_CHECKPOINTS_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "chain": {"type": "keyword"}, "seq": {"type": "long"}, "head_hash": {"type": "keyword"},
        "created_at": {"type": "date"}, "previous_seq": {"type": "long"},
        "previous_signature": {"type": "keyword"}, "key_id": {"type": "keyword"},
        "signature": {"type": "keyword"}, "keyed_at": {"type": "long"}, "events_sha256": {"type": "keyword"},
    },
}


def audit_checkpoints_index() -> str:
    """The installation's one checkpoint index: under ``ES_INDEX_PREFIX`` itself, never a scratch
    run's prefix (a measurement run's audit events are in the installation's log)."""
    return f"{settings.ES_INDEX_PREFIX}-{AUDIT_CHECKPOINTS_STEM}"


def audit_checkpoints_ensure(*, es: Elasticsearch) -> str:
    """Create the checkpoint index when it is missing; its name. Raises ImproperlyConfigured when
    an index of that name holds another mapping (created by hand, or tampered with)."""
    index = audit_checkpoints_index()
    if not es.indices.exists(index=index):
        try:
            es.indices.create(index=index, mappings=AUDIT_CHECKPOINTS_MAPPING,
                              settings={"number_of_shards": 1, **replica_settings(settings.ES_NUMBER_OF_REPLICAS)})
            log.info("created %s", index)
        except ApiError as exc:
            if exc.meta.status != 400 or "resource_already_exists" not in str(exc):
                raise
    found = es.indices.get_mapping(index=index)[index]["mappings"]
    if found != AUDIT_CHECKPOINTS_MAPPING:
        raise ImproperlyConfigured(f"{index} does not hold the audit checkpoint mapping (an index of an earlier "
                                   "release holds HMAC-signed checkpoints, which do not verify now: the cluster's "
                                   f"superuser removes it, and es_setup creates it again): {found}")
    return index
