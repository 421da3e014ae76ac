"""Engram as the suites drive it: every product function a suite calls is imported here, so the
benchmarks reach into as few of Engram's internals as possible and a move inside Engram is
mended in one place. Needs Django set up (``python -m benchmarks`` does it)."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.management import call_command

from engram_core.db import as_request
from engram_core.es.client import admin_client
from engram_core.es.schema import VECTOR_FIELDS, MemoryType, alias_name, all_aliases, drop_indices
from memory_app import timing
from config.serving import UVICORN_FLAGS
from memory_app.providers import get_embedder
from embeddings.minilm import MiniLMEmbedder
from embeddings.server import EmbeddingsServer
from engram_eval.locomo import locomo_episodes, locomo_evidence
from memory_app import outbox
from memory_app.commands import turn_command, write_command
from memory_app.services.context import ContextOptions
from memory_app.validation import Limits
from memory_app.recall import memory_recall
from memory_app.services.facts import catalog_entry_write
from memory_app.turns import TurnResult, turn_create
from memory_app.usage import usage_flush
from tenants.es_keys import invalidate_keys
from tenants.models import AgentToken, Subject, SubjectKey, Tenant, WriterKey
from tenants.selectors import index_prefix_for, subject_get
from tenants.services.clients import subject_es_client
from tenants.services import subjects
from tenants.services.tokens import agent_token_create
from tenants.services.keys import KeyLifetimes

__all__ = [  # the product's own names, re-exported for the suites
    "UVICORN_FLAGS", "VECTOR_FIELDS", "EmbeddingsServer", "MemoryType", "MiniLMEmbedder", "Subject", "Tenant",
    "admin_client", "alias_name", "as_request", "catalog_entry_write", "get_embedder", "index_prefix_for",
    "locomo_episodes", "locomo_evidence", "memory_recall", "subject_es_client", "subject_get", "subject_get_or_create",
]


def write_submit(*, tenant: Tenant, external_id: str, operation: str, payload: dict, memory_id: str = "",
                 **options) -> outbox.Submitted:
    """A write as the API makes it: checked into a command (``write_command``), then submitted."""
    write = write_command(tenant=tenant, external_id=external_id, operation=operation, payload=payload,
                          limits=Limits.from_settings(), actor=options.get("actor", "api"),
                          context_options=ContextOptions.from_settings(),
                          lifetimes=KeyLifetimes.from_settings(), memory_id=memory_id)
    return outbox.write_submit(tenant=tenant, write=write, **options)


def subject_get_or_create(*, tenant: Tenant, external_id: str, **fields) -> Subject:
    """An end-user as a command makes one (its key's lifetimes read from the settings here)."""
    return subjects.subject_get_or_create(tenant=tenant, external_id=external_id,
                                          lifetimes=KeyLifetimes.from_settings(), **fields)


def turn(*, tenant: Tenant, external_id: str, text: str, **fields) -> TurnResult:
    """A user turn as ``POST .../turns`` makes it: checked into a command, then the turn service."""
    command = turn_command(tenant=tenant, external_id=external_id, text=text,
                           max_query_chars=settings.ENGRAM_MAX_QUERY_CHARS, limits=Limits.from_settings(),
                           context_options=ContextOptions.from_settings(),
                           lifetimes=KeyLifetimes.from_settings(), **fields)
    return turn_create(tenant=tenant, turn=command)


@contextmanager
def stores() -> Iterator[str]:
    """The run's database tables and indices (``migrate``, ``es_setup``: the product's own set-up)
    under the run's prefix; afterwards the indices are dropped and every API key minted under the
    prefix invalidated, whatever happened. Yields the prefix."""
    prefix = settings.ES_INDEX_PREFIX
    call_command("migrate", verbosity=0)
    call_command("es_setup", stdout=io.StringIO())
    try:
        yield prefix
    finally:
        run_drop(prefix=prefix)


def run_drop(*, prefix: str) -> None:
    """Drop the indices of ``prefix`` and invalidate the keys minted for them."""
    try:
        usage_flush()  # use-count bumps still in flight would write to the dropped indices
    finally:
        keys = [*SubjectKey.objects.filter(index_prefix__startswith=prefix, revoked_at__isnull=True)
                .values_list("es_key_id", flat=True),
                *WriterKey.objects.filter(index_prefix__startswith=prefix, revoked_at__isnull=True)
                .values_list("es_key_id", flat=True)]
        try:
            invalidate_keys(key_ids=keys)
        finally:
            drop_indices(es=admin_client(), prefix=prefix)


def indices_reset() -> None:
    """Empty the run's indices between repetitions: drop them and set them up again."""
    usage_flush()
    drop_indices(es=admin_client(), prefix=settings.ES_INDEX_PREFIX)
    call_command("es_setup", stdout=io.StringIO())


def tenant_create(*, slug: str, name: str) -> Tenant:
    return Tenant.objects.create(slug=slug, name=name)


def token_create(tenant: Tenant, *, name: str = "bench") -> str:
    """A new agent token of ``tenant`` with every scope; the raw token."""
    return agent_token_create(tenant=tenant, name=name, scopes=AgentToken.Scope.values, actor="bench")[1]


def new_question() -> None:
    """Forget every cached query vector: the next recall embeds its question as a new one."""
    get_embedder().query_cache.clear()


def recall_phases(**recall) -> tuple[list[dict], dict[str, float]]:
    """``memory_recall(**recall)`` and where its time went (``memory_app.timing``'s phases, ms)."""
    timings, token = timing.start()
    try:
        hits = memory_recall(**recall)
    finally:
        timing.stop(token)
    return hits, dict(timings.durations)


def footprint() -> dict[str, float]:
    """The run's indices on disk and the node's heap, MB."""
    es = admin_client()
    store = es.indices.stats(index=",".join(all_aliases(prefix=settings.ES_INDEX_PREFIX)), metric="store")
    jvm = next(iter(es.nodes.stats(metric="jvm")["nodes"].values()))["jvm"]["mem"]
    return {"store_mb": round(store["_all"]["primaries"]["store"]["size_in_bytes"] / 1e6, 1),
            "heap_used_mb": round(jvm["heap_used_in_bytes"] / 2**20),
            "heap_max_mb": round(jvm["heap_max_in_bytes"] / 2**20)}


def embedder_load() -> None:
    """Load the embedder's model now, so that no timed call pays for it."""
    get_embedder().embed_documents(["load the weights"])


def node_cpu_ms() -> int:
    """The Elasticsearch node's process CPU so far, ms. The node caches the figure for a second:
    waiting that long first keeps the work just done out of the next reading."""
    time.sleep(1.1)
    nodes = admin_client().nodes.stats(metric="process")["nodes"]
    return sum(node["process"]["cpu"]["total_in_millis"] for node in nodes.values())


def merges_running() -> int:
    nodes = admin_client().nodes.stats(metric="indices")["nodes"]
    return sum(node["indices"]["merges"]["current"] for node in nodes.values())
