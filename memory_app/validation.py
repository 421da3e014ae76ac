"""Validation at the edge of the memory domain: every input is checked before anything is written.

Field rules (``clean_*``: the cleaned value, or ValidationFailed) and the checks of a whole write
(``*_validate``, ``write_validate``) shared by every path: REST, MCP, outbox acceptance and the
write services themselves, so an accepted write cannot fail validation at replay. The limits an
operator sets (``Limits``) are read once at an entry (``Limits.from_settings``: a request, a task, a
command) and passed in; no check reads a setting.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from django.conf import settings

from engram_core.errors import NotFound, ValidationFailed
from engram_core.validation import clean_datetime
from engram_core.es.schema import MemoryType


@dataclass(frozen=True)
class Limits:
    """The size limits an operator sets (config/settings/base.py explains each), the one
    confidence rule a write applies and how long its deferred refresh is awaited, as read at an entry."""

    text_chars: int  # a memory's text, trigger, steps, context (ENGRAM_MAX_TEXT_CHARS)
    recall_k: int  # the most memories one recall returns (ENGRAM_RECALL_MAX_K)
    metadata_bytes: int  # a memory's metadata as JSON (ENGRAM_MAX_METADATA_BYTES)
    supersedes: int  # the ids one fact or playbook supersedes (ENGRAM_MAX_SUPERSEDES)
    import_episodes: int  # the episodes of one import (ENGRAM_MAX_IMPORT_EPISODES)
    harsh_penalty: float  # a harsh contradiction's cut to the new memory's confidence (ENGRAM_HARSH_CONFIDENCE_PENALTY)
    pending_seconds: int  # how long a deferred write's refresh mark lives (ENGRAM_REFRESH_PENDING_SECONDS)

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(text_chars=settings.ENGRAM_MAX_TEXT_CHARS, recall_k=settings.ENGRAM_RECALL_MAX_K,
                   metadata_bytes=settings.ENGRAM_MAX_METADATA_BYTES, supersedes=settings.ENGRAM_MAX_SUPERSEDES,
                   import_episodes=settings.ENGRAM_MAX_IMPORT_EPISODES,
                   harsh_penalty=settings.ENGRAM_HARSH_CONFIDENCE_PENALTY,
                   pending_seconds=settings.ENGRAM_REFRESH_PENDING_SECONDS)


def clean_text(value: Any, *, field: str = "text", limit: int) -> str:
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be a string", details={"field": field}, code="invalid_text")
    text = value.strip()
    if not text:
        raise ValidationFailed(f"{field} must not be empty", details={"field": field}, code="empty_text")
    if len(text) > limit:
        raise ValidationFailed(f"{field} is {len(text)} characters; the limit is {limit}",
                               details={"field": field, "length": len(text), "limit": limit}, code="text_too_long")
    if "\x00" in text:
        raise ValidationFailed(f"{field} contains a NUL character", details={"field": field}, code="invalid_text")
    return text


def clean_optional_text(value: Any, *, field: str, limit: int) -> str | None:
    """``clean_text`` of a field that may be absent (None passes through)."""
    return None if value is None else clean_text(value, field=field, limit=limit)


SESSION_ID_MAX_CHARS = 200
NOTE_MAX_CHARS = 500
TITLE_MAX_CHARS = 500


def clean_session_id(value: Any) -> str | None:
    """An episode's optional ``session_id``: a non-empty string of at most 200 characters."""
    return clean_optional_text(value, field="session_id", limit=SESSION_ID_MAX_CHARS)


# Why a memory is forgotten: the code goes into the audit chain, which outlives every forget and
# erase, so it is one of these and never free text (a note in the caller's words is kept apart).
FORGET_REASONS = {
    "user_request": "the end-user asked to forget it",
    "inaccurate": "it is wrong",
    "sensitive": "it holds data that should not have been stored",
    "legal": "a legal or compliance request",
    "retention": "a retention policy ended it",
    "other": "another reason (say which in the note)",
}


def clean_reason(value: Any) -> str:
    """A forget's reason: one of FORGET_REASONS."""
    if not isinstance(value, str) or value.strip() not in FORGET_REASONS:
        raise ValidationFailed("reason must be one of " + ", ".join(FORGET_REASONS),
                               details={"field": "reason", "allowed": list(FORGET_REASONS)}, code="invalid_reason")
    return value.strip()


def clean_note(value: Any) -> str | None:
    """A forget's optional note in the caller's words (None when absent or blank): kept outside the
    audit chain and erased with the end-user."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return clean_text(value, field="note", limit=NOTE_MAX_CHARS)


def clean_cascade(value: Any) -> bool:
    """Whether a forget takes the facts and playbooks derived from the memory with it (the default)."""
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ValidationFailed("cascade must be true or false", details={"field": "cascade"}, code="invalid_cascade")
    return value


def clean_memory_type(value: Any, *, allowed: tuple[MemoryType, ...] = tuple(MemoryType)) -> MemoryType:
    try:
        memory_type = MemoryType(value) if isinstance(value, str) else None
    except ValueError:
        memory_type = None
    if memory_type not in allowed:
        named = repr(value[:100]) if isinstance(value, str) else f"of type {type(value).__name__}"
        raise ValidationFailed(
            f"unknown memory type {named}; expected one of {', '.join(t.value for t in allowed)}",
            details={"field": "type", "allowed": [t.value for t in allowed]}, code="unknown_memory_type",
        )
    return memory_type


def clean_types(values: Any) -> list[MemoryType]:
    if values is None:
        return list(MemoryType)
    if not isinstance(values, (list, tuple)) or not values:
        raise ValidationFailed("types must be a non-empty list", details={"field": "types"}, code="invalid_types")
    return list(dict.fromkeys(clean_memory_type(v) for v in values))


TIMEZONE_MAX_CHARS = 64
# Engram's ids and those clients choose; the outbox and idempotency columns hold this many.
MEMORY_ID_MAX_CHARS = 64


def clean_timezone(value: Any) -> ZoneInfo | None:
    """An IANA time zone name ("Europe/Paris", "America/Los_Angeles", "UTC") as a ZoneInfo; None
    (or empty) passes through as None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > TIMEZONE_MAX_CHARS:
        raise ValidationFailed("timezone must be an IANA time zone name, e.g. Europe/Paris",
                               details={"field": "timezone"}, code="invalid_timezone")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # unknown name, or a path-like one ZoneInfo refuses
        raise ValidationFailed(f"unknown time zone {value[:TIMEZONE_MAX_CHARS]!r}; use an IANA name, e.g. Europe/Paris",
                               details={"field": "timezone"}, code="invalid_timezone") from None


def clean_k(value: Any, *, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ValidationFailed(f"k must be an integer from 1 to {limit}", details={"field": "k", "max": limit},
                               code="k_out_of_range")
    return value


def holds_nul(value: Any) -> bool:
    """Whether a NUL character is in ``value`` (a string, or any key or value of JSON data,
    however deeply nested: walked without recursion)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple):
            pending += item
    return False


def clean_metadata(value: Any, *, limit: int) -> dict[str, Any]:
    """A memory's metadata: a JSON object of at most ``limit`` bytes ({} when absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed("metadata must be an object", details={"field": "metadata"}, code="invalid_metadata")
    try:
        # What the Elasticsearch client writes (engram_core.es.client): no whole number beyond 64
        # bits, no lone surrogate, no nesting deeper than 255 (so the size below cannot recurse too
        # deep); and below, no NaN or infinity (orjson would write null).
        orjson.dumps(value)
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError):
        raise ValidationFailed("metadata must be JSON with finite numbers, whole numbers within 64 bits and "
                               "valid Unicode text", details={"field": "metadata"}, code="invalid_metadata") from None
    if size > limit:
        raise ValidationFailed(f"metadata is {size} bytes; the limit is {limit}",
                               details={"field": "metadata"}, code="metadata_too_large")
    if holds_nul(value):  # as in text fields: PostgreSQL (outbox payloads, idempotency records) holds none
        raise ValidationFailed("metadata contains a NUL character", details={"field": "metadata"},
                               code="invalid_metadata")
    return value


def clean_confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValidationFailed("confidence must be a number from 0 to 1", details={"field": "confidence"},
                               code="invalid_confidence")
    return float(value)


def memory_id_possible(value: str) -> bool:
    """Whether some memory could have the id ``value``: Engram's own ids and the ids clients may
    choose are 1-64 letters, digits and dashes (MEMORY_ID_MAX_CHARS), so never empty, never
    longer and never with a control character."""
    return 0 < len(value) <= MEMORY_ID_MAX_CHARS and not any(unicodedata.category(c) == "Cc" for c in value)


def memory_not_found(memory_id: str) -> NotFound:
    """The one answer for a memory the end-user does not have (or no memory can have)."""
    return NotFound(f"no memory {memory_id!r} for this subject", details={"id": memory_id})


def clean_memory_id(memory_id: str) -> str:
    """A memory id some memory could have (``memory_id_possible``); NotFound otherwise."""
    if not memory_id_possible(memory_id):
        raise memory_not_found(memory_id)
    return memory_id


def clean_new_memory_id(value: Any) -> str:
    """The id a write gives the memory it creates: 8-64 letters, digits or dashes."""
    if (not isinstance(value, str) or not 8 <= len(value) <= MEMORY_ID_MAX_CHARS
            or not value.replace("-", "").isalnum()):
        raise ValidationFailed("memory id must be 8-64 letters, digits or dashes", details={"field": "id"},
                               code="invalid_id")
    return value


def clean_ids(values: Any, *, field: str, limit: int) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) and memory_id_possible(v.strip())
                                                        for v in values):
        raise ValidationFailed(f"{field} must be a list of memory ids", details={"field": field}, code="invalid_ids")
    if len(values) > limit:
        raise ValidationFailed(f"{field} names {len(values)} ids; the limit is {limit}", details={"field": field},
                               code="invalid_ids")
    return list(dict.fromkeys(v.strip() for v in values))


SUPPORTING_IDS_MAX = 1000


def clean_supporting_ids(values: Any) -> list[str]:
    """A fact's ``supporting_episode_ids``."""
    return clean_ids(values, field="supporting_episode_ids", limit=SUPPORTING_IDS_MAX)


def clean_supersedes(values: Any, *, limit: int) -> list[str]:
    """The ids a fact or playbook supersedes (at most ``limit``: ``Limits.supersedes``)."""
    return clean_ids(values, field="supersedes", limit=limit)


def duplicate_ids_validate(*, ids: Iterable[str | None], field: str) -> None:
    """ValidationFailed when one request names the same id twice (it could never all be stored)."""
    seen: set[str] = set()
    duplicates: list[str] = []
    for i in ids:
        if i is not None:
            if i in seen:
                duplicates.append(i)
            seen.add(i)
    if duplicates:
        raise ValidationFailed(f"{field} names the same id more than once: {', '.join(sorted(set(duplicates)))}",
                               details={"field": field, "ids": sorted(set(duplicates))}, code="duplicate_ids")


EPISODE_ROLES = ("user", "assistant", "system", "tool")
CONTRADICTIONS = ("natural", "harsh", "fulfilled")
# What a client may name as a write's source; the services also store their own (import, consolidation).
WRITE_SOURCES = ("agent", "mcp")


def clean_role(role: Any) -> str:
    if role not in EPISODE_ROLES:
        raise ValidationFailed("role must be one of " + ", ".join(EPISODE_ROLES), details={"field": "role"},
                               code="invalid_role")
    return role


def clean_contradiction(contradiction: Any) -> str:
    if contradiction not in CONTRADICTIONS:
        raise ValidationFailed("contradiction must be 'natural', 'harsh' or 'fulfilled'", details={"field": "contradiction"},
                               code="invalid_contradiction")
    return contradiction


def clean_success(success: Any) -> bool:
    if not isinstance(success, bool):
        raise ValidationFailed("success must be true or false", details={"field": "success"}, code="invalid_outcome")
    return success


def clean_steps(value: Any, *, field: str = "steps") -> Any:
    """A playbook's ``steps`` (or ``refined_steps``) as stored: text as given, or a list of steps
    joined one per line (blank steps dropped); REST and MCP take both. Anything else is refused;
    the text itself is checked with the write (``write_validate``)."""
    if isinstance(value, list):
        if not all(isinstance(step, str) for step in value):
            raise ValidationFailed(f"{field} must be text or a list of strings", details={"field": field},
                                   code="invalid_text")
        return "\n".join(step.strip() for step in value if step.strip())
    return value


def clean_imported_occurred_at(value: Any) -> datetime:
    """An imported episode's ``occurred_at``: required (it is when the event happened, not when it was sent)."""
    occurred = clean_datetime(value, field="occurred_at")
    if occurred is None:
        raise ValidationFailed("occurred_at is required for imported episodes", details={"field": "occurred_at"},
                               code="invalid_datetime")
    return occurred


Cleaned = TypeVar("Cleaned")


def _import_too_large(limit: int) -> ValidationFailed:
    return ValidationFailed(f"an import holds at most {limit} episodes", code="import_too_large")


def _import_empty() -> ValidationFailed:
    return ValidationFailed("no episodes to import", code="empty_import")


def imported_episodes_clean(episodes: Iterable[Any], *, clean: Callable[[dict[str, Any]], Cleaned],
                            limit: int) -> list[Cleaned]:
    """``clean`` of each episode of an import, in order. An import holds 1 to ``limit``
    (``Limits.import_episodes``) objects; ValidationFailed names the first bad one's position
    (``index``) and the problem ``clean`` found."""
    cleaned: list[Cleaned] = []
    for n, episode in enumerate(episodes):
        if n >= limit:
            raise _import_too_large(limit)
        try:
            if not isinstance(episode, dict):
                raise ValidationFailed("each episode must be an object", code="invalid_episode")
            cleaned.append(clean(episode))
        except ValidationFailed as exc:
            raise ValidationFailed(f"episode {n}: {exc.message}", details={**exc.details, "index": n},
                                   code=exc.code) from None
    if not cleaned:
        raise _import_empty()
    return cleaned


# ---------------------------------------------------------------- whole writes
# A write's payload as the outbox holds it, checked before the write is accepted.


def _clean_source(value: Any) -> str:
    if value not in WRITE_SOURCES:
        raise ValidationFailed("source must be one of " + ", ".join(WRITE_SOURCES), details={"field": "source"},
                               code="invalid_source")
    return value


@dataclass(frozen=True)
class EpisodeFields:
    """An episode's fields, cleaned: made by ``EpisodeFields.clean`` only (at the edge, by a replay
    from its stored payload, or by a caller with no edge), and stored as they are by
    ``services.episodes.episode_store``. ``occurred_at`` None: when the write was accepted."""

    text: str
    role: str
    session_id: str | None
    context: str | None
    metadata: dict[str, Any]
    occurred_at: datetime | None
    source: str

    @classmethod
    def clean(cls, p: Mapping[str, Any], *, limits: Limits, source: str | None = None) -> EpisodeFields:
        """The fields of the payload ``p`` (a write's, as REST, MCP and the outbox hold it), checked
        within ``limits``; ValidationFailed names the first problem, in the order every path shares.
        ``source``: a service's own (import, consolidation, demo), trusted as given; without it the
        payload's, one a client may name (WRITE_SOURCES)."""
        metadata, source = _common_clean(p, limits, source)
        return cls(text=clean_text(p.get("text"), limit=limits.text_chars),
                   context=clean_optional_text(p.get("context"), field="context", limit=limits.text_chars),
                   session_id=clean_session_id(p.get("session_id")),
                   occurred_at=clean_datetime(p.get("occurred_at"), field="occurred_at"),
                   role=clean_role(p.get("role") or "user"), metadata=metadata, source=source)


@dataclass(frozen=True, kw_only=True)
class SupersedingFields:
    """What a fact and a playbook share, cleaned: how sure it is, the memories it replaces and how
    (``supersedes``, ``contradiction``), its metadata and source. Made only through a subclass's
    ``clean``; ``services.supersession.superseding_write`` trusts it as it is."""

    confidence: float
    supersedes: tuple[str, ...]
    contradiction: str
    metadata: dict[str, Any]
    source: str

    @classmethod
    def _cleaned(cls, p: Mapping[str, Any], limits: Limits, source: str | None,
                 own: Callable[[], dict[str, Any]]) -> Self:
        """The shared fields cleaned around the subclass's ``own``, in the order every path shares:
        metadata and source, its own fields, then confidence, supersedes and contradiction."""
        metadata, source = _common_clean(p, limits, source)
        fields = own()
        return cls(**fields, confidence=clean_confidence(p.get("confidence", 1.0)),
                   supersedes=tuple(clean_supersedes(p.get("supersedes"), limit=limits.supersedes)),
                   contradiction=clean_contradiction(p.get("contradiction", "natural")),
                   metadata=metadata, source=source)


@dataclass(frozen=True, kw_only=True)
class FactFields(SupersedingFields):
    """A fact's fields, cleaned: made by ``FactFields.clean`` only, stored as they are by
    ``services.facts.fact_store``."""

    text: str
    supporting_episode_ids: tuple[str, ...]

    @classmethod
    def clean(cls, p: Mapping[str, Any], *, limits: Limits, source: str | None = None) -> FactFields:
        """As ``EpisodeFields.clean``, for a fact's payload."""
        return cls._cleaned(p, limits, source, lambda: {
            "text": clean_text(p.get("text"), limit=limits.text_chars),
            "supporting_episode_ids": tuple(clean_supporting_ids(p.get("supporting_episode_ids")))})


@dataclass(frozen=True, kw_only=True)
class PlaybookFields(SupersedingFields):
    """A playbook's fields, cleaned: made by ``PlaybookFields.clean`` only, stored as they are by
    ``services.facts.playbook_store``."""

    trigger: str
    steps: str

    @classmethod
    def clean(cls, p: Mapping[str, Any], *, limits: Limits, source: str | None = None) -> PlaybookFields:
        """As ``EpisodeFields.clean``, for a playbook's payload (its steps as text: ``clean_steps``)."""
        return cls._cleaned(p, limits, source, lambda: {
            "trigger": clean_text(p.get("trigger"), field="trigger", limit=limits.text_chars),
            "steps": clean_text(p.get("steps"), field="steps", limit=limits.text_chars)})


def _common_clean(p: Mapping[str, Any], limits: Limits, source: str | None) -> tuple[dict[str, Any], str]:
    metadata = clean_metadata(p.get("metadata"), limit=limits.metadata_bytes)
    return metadata, _clean_source(p.get("source", "agent")) if source is None else source


@dataclass(frozen=True)
class OutcomeFields:
    """A playbook outcome, cleaned: made by ``OutcomeFields.clean`` only, counted as it is by
    ``services.facts.playbook_outcome_store``. ``operation_id``: fixed when the write was accepted;
    ``episode_id``: the episode that reported it (consolidation's; never a client's)."""

    success: bool
    refined_steps: str | None
    operation_id: str | None
    episode_id: str | None = None

    @classmethod
    def clean(cls, p: Mapping[str, Any], *, limits: Limits, episode_id: str | None = None) -> OutcomeFields:
        success = clean_success(p.get("success"))
        refined = clean_optional_text(p.get("refined_steps"), field="refined_steps", limit=limits.text_chars)
        operation_id = p.get("operation_id")
        if operation_id is not None and not isinstance(operation_id, str):
            raise ValidationFailed("operation_id must be a string", details={"field": "operation_id"},
                                   code="invalid_id")
        if episode_id is not None:
            episode_id = clean_ids([episode_id], field="episode_id", limit=1)[0]
        return cls(success=success, refined_steps=refined, operation_id=operation_id, episode_id=episode_id)


@dataclass(frozen=True)
class ForgetFields:
    """A forget, cleaned: its reason (FORGET_REASONS), the caller's note and whether what was
    derived from the memory follows it. Made by ``ForgetFields.clean`` only, run as it is by
    ``services.forget.pipeline.forget_apply``."""

    reason: str
    note: str | None
    cascade: bool

    @classmethod
    def clean(cls, p: Mapping[str, Any], *, limits: Limits | None = None) -> ForgetFields:
        return cls(reason=clean_reason(p.get("reason")), note=clean_note(p.get("note")),
                   cascade=clean_cascade(p.get("cascade")))


@dataclass(frozen=True)
class ImportedEpisode:
    """One imported episode, cleaned. Its stored id: ``memory_id`` when given (an edge fixed it),
    else derived from ``client_id`` (the client's own, namespaced to the end-user when stored),
    else a new one."""

    text: str
    occurred_at: datetime
    role: str
    session_id: str | None
    context: str | None
    metadata: dict[str, Any]
    memory_id: str | None
    client_id: str | None


@dataclass(frozen=True)
class ImportFields:
    """An import, cleaned: 1 to ``Limits.import_episodes`` episodes, no id named twice. Made by
    ``ImportFields.clean`` (a write's payload) or ``ImportFields.of`` (episodes from a caller
    with no edge) only, stored as it is by ``services.imports.episodes_store``."""

    episodes: tuple[ImportedEpisode, ...]

    @classmethod
    def clean(cls, p: Mapping[str, Any], *, limits: Limits) -> ImportFields:
        episodes = p.get("episodes") or []
        if not isinstance(episodes, list) or not episodes:
            raise _import_empty()
        if len(episodes) > limits.import_episodes:
            raise _import_too_large(limits.import_episodes)
        return cls.of(episodes, limits=limits)

    @classmethod
    def of(cls, episodes: Iterable[Any], *, limits: Limits) -> ImportFields:
        """Each episode checked as an episode write is (``EpisodeFields.clean``) with a required
        ``occurred_at`` and its ids; ValidationFailed names the first bad one's position."""

        def imported(raw: dict[str, Any]) -> ImportedEpisode:
            episode = EpisodeFields.clean(raw, limits=limits, source="import")  # the import's own source
            occurred = clean_imported_occurred_at(raw.get("occurred_at"))
            if raw.get("memory_id") is not None:
                memory_id, client_id = clean_new_memory_id(raw["memory_id"]), raw.get("client_id")
            else:
                memory_id, client_id = None, raw.get("id")
            return ImportedEpisode(text=episode.text, occurred_at=occurred, role=episode.role,
                                   session_id=episode.session_id, context=episode.context,
                                   metadata=episode.metadata, memory_id=memory_id,
                                   client_id=clean_new_memory_id(client_id) if client_id is not None else None)

        cleaned = imported_episodes_clean(episodes, clean=imported, limit=limits.import_episodes)
        duplicate_ids_validate(ids=[e.client_id for e in cleaned], field="episodes")
        duplicate_ids_validate(ids=[e.memory_id for e in cleaned], field="episodes")
        return cls(episodes=tuple(cleaned))


# The cleaned fields of a write, by its operation (an erase has none).
WriteFields = EpisodeFields | FactFields | PlaybookFields | OutcomeFields | ForgetFields | ImportFields
_FIELDS: dict[str, type[WriteFields]] = {
    "episode": EpisodeFields, "fact": FactFields, "playbook": PlaybookFields,
    "outcome": OutcomeFields, "forget": ForgetFields, "import": ImportFields}


def write_fields(*, operation: str, payload: Mapping[str, Any], limits: Limits) -> WriteFields | None:
    """The cleaned fields of a write of ``operation`` (None for an erase): what the edge's check
    returns, and what a replay cleans its stored payload into."""
    kind = _FIELDS.get(str(operation))
    return kind.clean(payload, limits=limits) if kind is not None else None


def write_validate(*, operation: str, payload: dict[str, Any], limits: Limits) -> WriteFields | None:
    """Check a write of ``operation`` (an outbox operation name) before it is accepted, within
    ``limits``; ValidationFailed names the first problem. Returns its cleaned fields
    (``write_fields``; None for an erase)."""
    if str(operation) not in (*_FIELDS, "erase"):
        raise KeyError(operation)
    return write_fields(operation=operation, payload=payload, limits=limits)
