"""What each MCP tool does, as plain synchronous functions: check the token's scope, resolve the
end-user within the token's tenant, call one service or selector, shape the answer.

Every expected failure is an EngramError (engram_core.errors); the server turns it into an MCP
tool error carrying its code, message and details.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from engram_core.errors import PermissionDenied, ValidationFailed
from engram_core.es.schema import VECTOR_FIELDS
from engram_core.validation import clean_external_id
from engram_core.observability import metrics
from memory_app import outbox
from memory_app.commands import write_command
from memory_app.recall import memory_recall
from memory_app.idempotency import idempotent_call
from memory_app.models import OutboxEntry
from memory_app.services.store import new_memory_id
from memory_app.usage import usage_record_recalled
from memory_app.services.context import ContextOptions
from memory_app.validation import Limits, clean_steps
from tenants.models import AgentToken, Subject, TokenRead
from tenants.selectors import subject_find, subject_get
from tenants.services.token_reads import token_read_record
from tenants.services.keys import KeyLifetimes

Op = OutboxEntry.Operation

READ = AgentToken.Scope.MEMORY_READ.value
WRITE = AgentToken.Scope.MEMORY_WRITE.value
FORGET = AgentToken.Scope.MEMORY_FORGET.value

# Internal scope fields an agent has no use for (the end-user is the one it is talking to).
_HIDDEN_FIELDS = frozenset({"tenant_id", "user_id", *VECTOR_FIELDS, "outcome_ids"})


@dataclass(frozen=True)
class Caller:
    """Who is calling: an authenticated agent token, and the end-user the URL pins, if any."""

    token: AgentToken
    subject: str | None = None


def _require(caller: Caller, scope: str) -> None:
    if not caller.token.has_scope(scope):
        # Same code and details as the REST API's scope check (api.auth.HasScope).
        raise PermissionDenied(f"this agent token lacks the {scope} scope", details={"required_scope": [scope]},
                               code="insufficient_scope")


def _external_id(caller: Caller, subject: str | None) -> str:
    """The end-user named by the URL, else by the call; both may name it only if they agree."""
    named = subject.strip() if isinstance(subject, str) else None
    if caller.subject is not None:
        if named and named != caller.subject:
            raise ValidationFailed("this endpoint is pinned to one end-user by its URL; omit subject",
                                   details={"field": "subject"}, code="subject_mismatch")
        return clean_external_id(caller.subject)
    if not named:
        raise ValidationFailed("name the end-user: pass subject, or connect to /mcp/subjects/<external_id>",
                               details={"field": "subject"}, code="subject_required")
    return clean_external_id(named)


def _existing_subject(caller: Caller, subject: str | None) -> Subject:
    # NotFound alike for an unknown end-user and another tenant's: the lookup is tenant-scoped.
    return subject_get(tenant=caller.token.tenant, external_id=_external_id(caller, subject))


def _public(memory: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in memory.items() if k not in _HIDDEN_FIELDS and v is not None and v != {} and v != []}


def _shown(caller: Caller, memory: dict[str, Any]) -> dict[str, Any]:
    """A written memory as a write's answer: whole for a token that may read memory, else its id."""
    return _public(memory) if caller.token.has_scope(READ) else {"id": memory["id"]}


def recall_memory(*, caller: Caller, query: str, k: int = 10, types: list[str] | None = None,
                  since: str | None = None, until: str | None = None, include_superseded: bool = False,
                  explain: bool = False, timezone: str | None = None, subject: str | None = None,
                  as_of: str | None = None) -> dict[str, Any]:
    """The end-user's memories most relevant to ``query`` (memory:read). NotFound for an end-user
    this tenant does not have."""
    _require(caller, READ)
    who = _existing_subject(caller, subject)
    found = memory_recall(subject=who, query=query, k=k, types=types, since=since, until=until,
                          include_superseded=include_superseded, explain=explain, timezone=timezone, as_of=as_of)
    usage_record_recalled(subject=who, memories=found)
    metrics.RECALLS.labels("mcp").inc()
    if found:  # counted before it is answered, as the REST API's reads are
        token_read_record(token=caller.token, subject=who, kind=TokenRead.Kind.RECALL, memories=len(found))
    return {"subject": who.external_id, "memories": [_public(m) for m in found]}


def write_memory(*, caller: Caller, type: str, text: str | None = None, trigger: str | None = None,
                 steps: str | list[str] | None = None, supersedes: list[str] | None = None,
                 contradiction: str = "natural", confidence: float = 1.0, occurred_at: str | None = None,
                 session_id: str | None = None, subject: str | None = None,
                 idempotency_key: str | None = None) -> dict[str, Any]:
    """Store one episodic, semantic or procedural memory (memory:write). The end-user is created
    on first write; the arguments are checked first, so a rejected call stores nothing. Goes
    through the same submit path as the REST API: applied now, or accepted into the outbox
    (``status: queued``) during an outage or behind the end-user's queued writes."""
    _require(caller, WRITE)
    steps = clean_steps(steps, field="steps")
    external_id = _external_id(caller, subject)
    if type == "procedural":
        if text is not None:
            raise ValidationFailed("a procedural memory has trigger and steps, not text", details={"field": "text"},
                                   code="invalid_fields")
        operation, payload = Op.PLAYBOOK, {"trigger": trigger, "steps": steps}
    elif type in ("episodic", "semantic"):
        if trigger is not None or steps is not None:
            raise ValidationFailed(f"trigger and steps belong to procedural memories, not {type}",
                                   details={"field": "trigger" if trigger is not None else "steps"},
                                   code="invalid_fields")
        operation = Op.EPISODE if type == "episodic" else Op.FACT
        payload = {"text": text} if type == "episodic" else {"text": text, "confidence": confidence}
    else:
        raise ValidationFailed("type must be episodic, semantic or procedural", details={"field": "type"},
                               code="unknown_memory_type")
    if type == "episodic" and supersedes:
        raise ValidationFailed("episodes record what happened and are never superseded; supersede a semantic "
                               "or procedural memory", details={"field": "supersedes"}, code="invalid_fields")
    for name, value in (("occurred_at", occurred_at), ("session_id", session_id)):
        if type != "episodic" and value is not None:
            raise ValidationFailed(f"{name} applies to episodic memories only", details={"field": name},
                                   code="invalid_fields")
    if type == "episodic":
        payload.update(occurred_at=occurred_at, session_id=session_id)
    else:
        payload.update(supersedes=supersedes, contradiction=contradiction, confidence=confidence)
    payload["source"] = "mcp"
    return _submitted(caller, "write_memory", external_id, operation, payload, idempotency_key=idempotency_key,
                      shape=lambda done: {"memory": _shown(caller, done["memory"])})


def forget_memory(*, caller: Caller, id: str, reason: str, note: str | None = None, cascade: bool = True,
                  subject: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
    """Hard-delete one of the end-user's memories (memory:forget), and with an episode what was
    derived from it (``cascade``); the audit log keeps the id and the reason's code, never the
    content. NotFound when the memory is not this end-user's."""
    _require(caller, FORGET)
    external_id = _external_id(caller, subject)
    payload = {"reason": reason, "cascade": cascade, **({"note": note} if note else {})}
    return _submitted(caller, "forget_memory", external_id, Op.FORGET, payload, memory_id=id,
                      idempotency_key=idempotency_key,
                      shape=lambda done: {"forgotten": id, "cascade": done["cascade"]})


def record_outcome(*, caller: Caller, playbook_id: str, success: bool, refined_steps: str | list[str] | None = None,
                   subject: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
    """Count one success or failure of one of the end-user's playbooks (memory:write)."""
    _require(caller, WRITE)
    refined = clean_steps(refined_steps, field="refined_steps")
    external_id = _external_id(caller, subject)
    def shape(done: dict[str, Any]) -> dict[str, Any]:
        playbook = _shown(caller, done["memory"])
        if "trigger" in playbook or "steps" in playbook:  # the playbook as stored
            subject = subject_find(tenant=caller.token.tenant, external_id=external_id)
            if subject is not None:
                token_read_record(token=caller.token, subject=subject, kind=TokenRead.Kind.OUTCOME, memories=1)
        return {"playbook": playbook}

    return _submitted(caller, "record_outcome", external_id, Op.OUTCOME,
                      {"success": success, "refined_steps": refined}, memory_id=playbook_id,
                      idempotency_key=idempotency_key, shape=shape)


def _submitted(caller: Caller, tool: str, external_id: str, operation: Op, payload: dict[str, Any], *,
               shape: Callable[[dict[str, Any]], dict[str, Any]], memory_id: str = "",
               idempotency_key: str | None = None) -> dict[str, Any]:
    """Submit a write like the REST API does (outbox, order, validation), under the tool call's
    optional idempotency key: a repeated call with the same key gets the first answer."""
    tenant = caller.token.tenant

    def run(assigned_id: str) -> dict[str, Any]:
        if operation is Op.OUTCOME:
            payload["operation_id"] = assigned_id  # the same on a repeat: the outcome counts once
        target = memory_id or assigned_id
        write = write_command(tenant=tenant, external_id=external_id, operation=operation, payload=payload,
                              limits=Limits.from_settings(), actor=caller.token,
                              context_options=ContextOptions.from_settings(),
                              lifetimes=KeyLifetimes.from_settings(), memory_id=target)
        submitted = outbox.write_submit(tenant=tenant, write=write, token=caller.token, defer_refresh=True)
        if submitted.queued:
            entry = submitted.entry
            return {"subject": external_id, "id": submitted.memory_id, "status": "queued",
                    "operation": {"id": str(entry.uid), "status": entry.status, "reason": entry.reason}}
        return {"subject": external_id, "status": "applied", **shape(submitted.result)}

    if idempotency_key is None:
        return run(new_memory_id())
    return idempotent_call(token=caller.token, key=idempotency_key, name=f"mcp:{tool}", tenant=tenant,
                           external_id=external_id, lock_seconds=settings.ENGRAM_IDEMPOTENCY_LOCK_SECONDS,
                           arguments={"payload": payload, "memory_id": memory_id, "subject": external_id},
                           run=run)
