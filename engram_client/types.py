"""The API's JSON shapes, as TypedDicts (they are plain dicts at runtime)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

MemoryType = Literal["episodic", "semantic", "procedural", "catalog"]
WriteStatus = Literal["applied", "queued"]


class Memory(TypedDict):
    """A memory; only the fields of its type are present."""

    id: str
    memory_type: NotRequired[MemoryType]
    text: NotRequired[str]
    title: NotRequired[str]
    trigger: NotRequired[str]
    steps: NotRequired[str]
    refined_steps: NotRequired[str | None]
    role: NotRequired[str]
    context: NotRequired[str | None]
    session_id: NotRequired[str | None]
    source: NotRequired[str]
    created_at: NotRequired[str]
    occurred_at: NotRequired[str]
    last_used_at: NotRequired[str]
    last_success_at: NotRequired[str | None]
    use_count: NotRequired[int]
    success_count: NotRequired[int]
    failure_count: NotRequired[int]
    confidence: NotRequired[float]
    supersedes: NotRequired[list[str]]
    superseded_by: NotRequired[list[str] | None]
    superseded_at: NotRequired[str | None]
    contradiction: NotRequired[str]
    supporting_episode_ids: NotRequired[list[str]]
    metadata: NotRequired[dict[str, Any]]
    score: NotRequired[float]
    explain: NotRequired[dict[str, Any]]
    forgotten: NotRequired[bool]


class ErrorBody(TypedDict):
    code: str
    message: str
    details: dict[str, Any]


class Operation(TypedDict):
    """A write accepted into the outbox (while Elasticsearch was unavailable, or behind earlier ones)."""

    id: str
    operation: Literal["episode", "fact", "playbook", "outcome", "forget", "import", "erase"]
    status: Literal["pending", "done", "failed", "cancelled"]
    reason: Literal["outage", "backlog", "background"]
    memory_id: str
    external_id: str
    attempts: int
    error: ErrorBody | None
    result: dict[str, Any] | None
    created_at: str
    processed_at: str | None


class WriteResult(TypedDict):
    status: WriteStatus
    id: str
    memory: Memory | None
    operation: Operation | None


class Derived(TypedDict):
    id: str
    memory_type: Literal["semantic", "procedural"]


class Cascade(TypedDict):
    forgotten: list[Derived]
    flagged: list[Derived]
    kept: list[Derived]


class ForgetResult(WriteResult):
    cascade: Cascade | None


class TurnResult(WriteResult):
    recall: list[Memory] | None
    recall_error: ErrorBody | None


class ImportResult(TypedDict):
    status: WriteStatus
    ids: list[str]
    operation: Operation | None


class EraseResult(TypedDict):
    status: WriteStatus
    documents_deleted: int | None
    operation: Operation | None


class History(TypedDict):
    memory: Memory
    older: list[Memory]
    newer: list[Memory]


class ExportMemories(TypedDict):
    episodic: list[Memory]
    semantic: list[Memory]
    procedural: list[Memory]


class Export(TypedDict):
    external_id: str
    tenant_id: str
    user_id: str
    memories: ExportMemories


class Subject(TypedDict):
    external_id: str
    display_name: str
    created_at: str


class ListedSubject(Subject):
    memory_counts: dict[str, int]


class SubjectPage(TypedDict):
    subjects: list[ListedSubject]
    next_offset: int | None


class UsageDay(TypedDict):
    date: str
    requests: int
    memories_stored: int
    consolidation_runs: int
    llm_tokens_in: int
    llm_tokens_out: int
