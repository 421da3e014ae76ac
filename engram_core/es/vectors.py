"""Where the indices' vectors come from. The embedders live in memory_app: its AppConfig registers
one here at start-up (``register_embedder``), so that the core (the schema's mapping and
migrations, a tenant's move between indices) imports no app.

``space`` names the embedder's vector space: two embedders with the same space give the same
vectors (the numpy and onnx runtimes of one model), two different spaces must never share an
index. Each index records the space of the vectors it holds in its ``_meta``; an index recorded
under another space is migrated with every vector computed again (``revector``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from elasticsearch import Elasticsearch

from engram_core.memory_types import MemoryType

Revector = Callable[[Elasticsearch, str, MemoryType, list[dict]], None]

# The space assumed for an index that records none: every release before the record existed wrote
# all-MiniLM-L6-v2 vectors with float weights (its default), and only that model's 384 dims fit.
UNRECORDED_SPACE = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class EmbedderSource:
    dims: Callable[[], int]
    space: Callable[[], str]
    # revector(es, index, memory_type, hits): set the vector fields of each hit's _source again,
    # in place, from its text (``index``: the index the hits were read from, for their context).
    revector: Revector


_embedder_source: EmbedderSource | None = None


def register_embedder(source: EmbedderSource) -> None:
    """Name where the vectors come from (``memory_app`` does, when ready)."""
    global _embedder_source
    _embedder_source = source


def embedder_source() -> EmbedderSource:
    """The registered source; ImproperlyConfigured before memory_app registered one."""
    if _embedder_source is None:
        raise ImproperlyConfigured("no embedder registered: is memory_app in INSTALLED_APPS?")
    return _embedder_source
