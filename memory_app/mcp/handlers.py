"""What each MCP tool does, as plain synchronous functions: check the token's scope, resolve the
end-user within the token's tenant, call one service or selector, shape the answer.

Every expected failure is an EngramError (memory_app.errors); the server turns it into an MCP
tool error carrying its code, message and details.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_app import selectors, services
from memory_app.errors import PermissionDenied, ValidationFailed
from memory_app.validation import clean_text
from tenants.models import AgentToken, Subject
from tenants.selectors import subject_get
from tenants.services import subject_get_or_create

READ = AgentToken.Scope.MEMORY_READ.value
WRITE = AgentToken.Scope.MEMORY_WRITE.value
FORGET = AgentToken.Scope.MEMORY_FORGET.value

# Internal scope fields an agent has no use for (the end-user is the one it is talking to).
_HIDDEN_FIELDS = frozenset({"tenant_id", "user_id", "embedding", "outcome_ids"})


@dataclass(frozen=True)
class Caller:
    """Who is calling: an authenticated agent token, and the end-user the URL pins, if any."""

    token: AgentToken
    subject: str | None = None


def _require(caller: Caller, scope: str) -> None:
    if not caller.token.has_scope(scope):
        # Same code and details as the REST API's scope check (memory_app.api.auth.HasScope).
        raise PermissionDenied(f"this agent token lacks the {scope} scope", details={"required_scope": [scope]},
                               code="insufficient_scope")


def _external_id(caller: Caller, subject: str | None) -> str:
    """The end-user named by the URL, else by the call; both may name it only if they agree."""
    named = subject.strip() if isinstance(subject, str) else None
    if caller.subject is not None:
        if named and named != caller.subject:
            raise ValidationFailed("this endpoint is pinned to one end-user by its URL; omit subject",
                                   details={"field": "subject"}, code="subject_mismatch")
        return caller.subject
    if not named:
        raise ValidationFailed("name the end-user: pass subject, or connect to /mcp/subjects/<external_id>",
                               details={"field": "subject"}, code="subject_required")
    return named


def _existing_subject(caller: Caller, subject: str | None) -> Subject:
    # NotFound alike for an unknown end-user and another tenant's: the lookup is tenant-scoped.
    return subject_get(tenant=caller.token.tenant, external_id=_external_id(caller, subject))


def _public(memory: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in memory.items() if k not in _HIDDEN_FIELDS and v is not None and v != {} and v != []}


def _steps(value: str | list[str] | None, *, field: str) -> str | None:
    if isinstance(value, list):
        if not all(isinstance(step, str) for step in value):
            raise ValidationFailed(f"{field} must be text or a list of strings", details={"field": field},
                                   code="invalid_text")
        value = "\n".join(step.strip() for step in value if step.strip())
    return value


def recall_memory(*, caller: Caller, query: str, k: int = 10, types: list[str] | None = None,
                  since: str | None = None, until: str | None = None, include_superseded: bool = False,
                  explain: bool = False, subject: str | None = None) -> dict[str, Any]:
    """The end-user's memories most relevant to ``query`` (memory:read). NotFound for an end-user
    this tenant does not have."""
    _require(caller, READ)
    who = _existing_subject(caller, subject)
    found = selectors.memory_recall(subject=who, query=query, k=k, types=types, since=since, until=until,
                                    include_superseded=include_superseded, explain=explain)
    return {"subject": who.external_id, "memories": [_public(m) for m in found]}


def write_memory(*, caller: Caller, type: str, text: str | None = None, trigger: str | None = None,
                 steps: str | list[str] | None = None, supersedes: list[str] | None = None,
                 contradiction: str = "natural", confidence: float = 1.0, occurred_at: str | None = None,
                 subject: str | None = None) -> dict[str, Any]:
    """Store one episodic, semantic or procedural memory (memory:write). The end-user is created
    on first write; the arguments are checked first, so a rejected call stores nothing."""
    _require(caller, WRITE)
    steps = _steps(steps, field="steps")
    external_id = _external_id(caller, subject)
    if type == "procedural":
        if text is not None:
            raise ValidationFailed("a procedural memory has trigger and steps, not text", details={"field": "text"},
                                   code="invalid_fields")
        clean_text(trigger, field="trigger")
        clean_text(steps, field="steps")
    elif type in ("episodic", "semantic"):
        if trigger is not None or steps is not None:
            raise ValidationFailed(f"trigger and steps belong to procedural memories, not {type}",
                                   details={"field": "trigger" if trigger is not None else "steps"},
                                   code="invalid_fields")
        clean_text(text)
    else:
        raise ValidationFailed("type must be episodic, semantic or procedural", details={"field": "type"},
                               code="unknown_memory_type")
    if type == "episodic" and supersedes:
        raise ValidationFailed("episodes record what happened and are never superseded; supersede a semantic "
                               "or procedural memory", details={"field": "supersedes"}, code="invalid_fields")
    if type != "episodic" and occurred_at is not None:
        raise ValidationFailed("occurred_at applies to episodic memories only", details={"field": "occurred_at"},
                               code="invalid_fields")

    who = subject_get_or_create(tenant=caller.token.tenant, external_id=external_id, actor=caller.token)
    if type == "episodic":
        stored = services.episode_write(subject=who, text=text, occurred_at=occurred_at, source="mcp")
    elif type == "semantic":
        stored = services.fact_write(subject=who, text=text, confidence=confidence, supersedes=supersedes,
                                     contradiction=contradiction, source="mcp")
    else:
        stored = services.playbook_write(subject=who, trigger=trigger, steps=steps, confidence=confidence,
                                         supersedes=supersedes, contradiction=contradiction, source="mcp")
    return {"subject": who.external_id, "memory": _public(stored)}


def forget_memory(*, caller: Caller, id: str, reason: str, subject: str | None = None) -> dict[str, Any]:
    """Hard-delete one of the end-user's memories (memory:forget); the audit log keeps the id and
    the reason, never the content. NotFound when the memory is not this end-user's."""
    _require(caller, FORGET)
    clean_text(reason, field="reason", limit=500)
    who = _existing_subject(caller, subject)
    services.memory_forget(subject=who, memory_id=id, reason=reason, actor=caller.token)
    return {"subject": who.external_id, "forgotten": id}


def record_outcome(*, caller: Caller, playbook_id: str, success: bool, refined_steps: str | list[str] | None = None,
                   subject: str | None = None) -> dict[str, Any]:
    """Count one success or failure of one of the end-user's playbooks (memory:write)."""
    _require(caller, WRITE)
    refined = _steps(refined_steps, field="refined_steps")
    who = _existing_subject(caller, subject)
    updated = services.playbook_outcome_record(subject=who, playbook_id=playbook_id, success=success,
                                               refined_steps=refined)
    return {"subject": who.external_id, "playbook": _public(updated)}
