"""The kinds of memory: the domain's words, which the index schema, the services and the API share."""

from __future__ import annotations

from enum import StrEnum


class MemoryType(StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    CATALOG = "catalog"


# The types that belong to one end-user (the catalog is tenant-wide).
USER_TYPES = (MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL)
