"""The MCP server: Engram's memory tools, their JSON schemas and the descriptions agents follow.

Tools are thin: take the caller the ASGI layer authenticated (mcp_server.asgi), run one
handler in a worker thread, return its result as JSON. Failures come back as MCP tool errors
(``isError``) carrying ``{"error": {"code", "message", "details"}}``, never a traceback.
"""

# No "from __future__ import annotations": the tools' annotations are evaluated where they are
# defined, since their Field bounds come from settings read when the server is built.
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from django.conf import settings
from elastic_transport import TransportError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from engram_core.errors import AuthenticationFailed, EngramError, ValidationFailed, database_busy
from memory_app.outbox import is_outage, outage_error
from memory_app.validation import FORGET_REASONS, NOTE_MAX_CHARS, SESSION_ID_MAX_CHARS, holds_nul

from . import handlers
from .handlers import Caller
from .threads import run_sync

log = logging.getLogger(__name__)

# Where the ASGI layer leaves the authenticated Caller in the HTTP request's scope.
CALLER_SCOPE_KEY = "engram.mcp.caller"

INSTRUCTIONS = """\
Engram is long-term memory about the end-user you are talking to.
- Before answering a user message, call recall_memory with that message as the query.
- Store the user's message verbatim with write_memory type=episodic (with the conversation's session_id) \
when it says something worth remembering; store durable facts about the user as type=semantic, and procedures that worked as \
type=procedural (trigger + steps).
- When a new fact updates or corrects a fact you recalled, write it with supersedes=[that fact's id] \
instead of leaving both.
- After following a recalled playbook, report whether it worked with record_outcome.
- When the user asks you to forget something, recall it, then call forget_memory with its id."""

Subject = Annotated[str | None, Field(
    description="The end-user's external id. Omit it when the server URL already names the end-user "
                "(/mcp/subjects/<external_id>); required when connected to plain /mcp.")]
MemoryId = Annotated[str, Field(min_length=8, max_length=64, description="A memory id, as returned by recall_memory "
                                                                            "or write_memory.")]
Steps = str | list[str]
IdempotencyKey = Annotated[str | None, Field(
    max_length=255, description="Optional: any unique string per logical write (e.g. a UUID). Calling again with "
                                "the same key returns the first answer and writes nothing twice; send it when "
                                "you may retry a call whose answer you did not get.")]

RECALL_DESCRIPTION = """\
Search the end-user's long-term memory, and the tenant's shared catalog, for what is relevant to a query.

Call it before answering a user message, with the message (or a focused paraphrase) as the query. \
Results come best first; each has an id, a memory_type and a score:
- episodic: something that happened or was said, with occurred_at;
- semantic: a fact about the user (confidence, use_count);
- procedural: a playbook: trigger, steps, success_count/failure_count, refined_steps;
- catalog: knowledge shared by every user of the tenant (read-only).
Facts that were superseded (outdated or corrected) are hidden unless include_superseded is true; \
then superseded_by names what replaced them. Keep the ids: supersede, forget and record_outcome need them. \
An end-user with no memory yet is reported as not_found."""

WRITE_DESCRIPTION = """\
Store one memory about the end-user. The end-user is created on their first write.

type:
- episodic: what happened or was said, verbatim in text (e.g. the user's message). occurred_at defaults to now.
- semantic: one durable, self-contained fact about the user in text ("Prefers window seats", \
"Moved to Lyon in March 2026"). Do not store what recall_memory already returned.
- procedural: a playbook: trigger (when it applies) and steps (what to do, in order).

When to supersede: if the new fact or playbook updates or corrects one you recalled earlier, pass \
supersedes=[that memory's id] instead of leaving both. The old one stays as history but is no longer \
recalled by default. contradiction says why:
- "natural": the world changed; the old memory was true then (the user moved, changed plan or preference);
- "harsh": the old memory was wrong (misheard, mistaken, the user corrected it);
- "fulfilled": the old memory was a plan or hope that came true (planned the trip, then went).
Episodic memories are a record and are never superseded. Only supersede ids of the same type \
(semantic by semantic, procedural by procedural)."""

FORGET_DESCRIPTION = """\
Permanently delete one of the end-user's memories by id (get it from recall_memory or write_memory).

Use it when the user asks you to forget something, or a memory must not be kept (e.g. sensitive data stored \
by mistake). To correct or update a fact, use write_memory with supersedes instead: that keeps the history. \
Forgetting an episode also forgets the facts and playbooks derived from it alone, and flags for review those \
with other support; the result lists them (cascade). Pass cascade=false only when the user has just confirmed \
those facts again. Irreversible; the reason's code is recorded in the audit log, the content is not."""

OUTCOME_DESCRIPTION = """\
Report whether following one of the end-user's playbooks (a procedural memory) worked.

success=true or false adds one to its success_count or failure_count, which later recalls weigh. \
Pass refined_steps when the steps that actually worked differ from the stored ones."""


def build_server() -> MCPServer:
    """A fresh MCP server with Engram's tools (one per ASGI application: the SDK's session
    manager runs once)."""
    server = EngramMcpServer("engram", title="Engram memory", instructions=INSTRUCTIONS)
    max_k = settings.ENGRAM_RECALL_MAX_K

    @server.tool(description=RECALL_DESCRIPTION,
                 annotations=ToolAnnotations(title="Recall memory", read_only_hint=True, open_world_hint=False))
    async def recall_memory(
        ctx: Context,
        query: Annotated[str, Field(description="What to look for: the user's message, or a focused paraphrase.")],
        k: Annotated[int, Field(ge=1, le=max_k, description="How many memories to return at most.")] = 10,
        types: Annotated[list[Literal["episodic", "semantic", "procedural", "catalog"]] | None, Field(
            min_length=1, description="Only these memory types (default: all).")] = None,
        since: Annotated[str | None, Field(
            description="Only memories from this time on: ISO 8601 with a timezone (a trailing Z or an offset such as +02:00). "
                        "Episodes by when they happened, other memories by when they were stored.")] = None,
        until: Annotated[str | None, Field(description="Only memories up to this time (ISO 8601, with a timezone).")
                         ] = None,
        include_superseded: Annotated[bool, Field(
            description="Also return facts and playbooks that were superseded.")] = False,
        explain: Annotated[bool, Field(description="Add per result how its score was computed.")] = False,
        timezone: Annotated[str | None, Field(description=(
            "The user's IANA time zone, e.g. Europe/Paris: dates the query names ('yesterday', 'in June') "
            "are read as their calendar days (default UTC)."))] = None,
        subject: Subject = None,
        as_of: Annotated[str | None, Field(description=(
            "What was true at this moment (ISO 8601, with a timezone): the facts valid then, even if superseded "
            "since, and episodes and playbooks up to it."))] = None,
    ) -> CallToolResult:
        return await _call(ctx, handlers.recall_memory, query=query, k=k, types=types, since=since, until=until,
                           include_superseded=include_superseded, explain=explain, timezone=timezone,
                           subject=subject, as_of=as_of)

    @server.tool(description=WRITE_DESCRIPTION,
                 annotations=ToolAnnotations(title="Write memory", read_only_hint=False, destructive_hint=False,
                                             idempotent_hint=False, open_world_hint=False))
    async def write_memory(
        ctx: Context,
        type: Annotated[Literal["episodic", "semantic", "procedural"], Field(description="The kind of memory.")],
        text: Annotated[str | None, Field(description="episodic and semantic: the memory itself.")] = None,
        trigger: Annotated[str | None, Field(description="procedural: the situation the playbook is for.")] = None,
        steps: Annotated[Steps | None, Field(description="procedural: the steps, as text or a list.")] = None,
        supersedes: Annotated[list[str] | None, Field(
            max_length=settings.ENGRAM_MAX_SUPERSEDES,
            description="Ids of earlier memories of the same type that this one updates or corrects.")] = None,
        contradiction: Annotated[Literal["natural", "harsh", "fulfilled"], Field(
            description="With supersedes: natural = the world changed; harsh = the old memory was wrong; "
                        "fulfilled = a plan came true.")
        ] = "natural",
        confidence: Annotated[float, Field(ge=0, le=1, description="semantic and procedural: how sure you are.")
                              ] = 1.0,
        occurred_at: Annotated[str | None, Field(
            description="episodic: when it happened (ISO 8601 with a timezone); default now.")] = None,
        session_id: Annotated[str | None, Field(
            max_length=SESSION_ID_MAX_CHARS,
            description="episodic: the conversation the message belongs to (any stable id). Engram stores "
                        "the session's preceding messages with it as context, so a short reply is found by "
                        "what it answers.")] = None,
        subject: Subject = None,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        return await _call(ctx, handlers.write_memory, type=type, text=text, trigger=trigger, steps=steps,
                           supersedes=supersedes, contradiction=contradiction, confidence=confidence,
                           occurred_at=occurred_at, session_id=session_id, subject=subject,
                           idempotency_key=idempotency_key)

    @server.tool(description=FORGET_DESCRIPTION,
                 annotations=ToolAnnotations(title="Forget memory", read_only_hint=False, destructive_hint=True,
                                             idempotent_hint=False, open_world_hint=False))
    async def forget_memory(
        ctx: Context,
        id: MemoryId,
        reason: Annotated[Literal[tuple(FORGET_REASONS)], Field(  # type: ignore[valid-type]
            description="Why it is forgotten, kept in the audit log: "
                        + "; ".join(f"{k}: {v}" for k, v in FORGET_REASONS.items()) + ".")],
        note: Annotated[str | None, Field(max_length=NOTE_MAX_CHARS, description=(
            "Why, in your words (optional): kept beside the audit log, erased with the end-user. Do not repeat "
            "the content."))] = None,
        cascade: Annotated[bool, Field(description=(
            "Forget what was derived from this episode alone too (default true); false keeps it."))] = True,
        subject: Subject = None,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        return await _call(ctx, handlers.forget_memory, id=id, reason=reason, note=note, cascade=cascade,
                           subject=subject, idempotency_key=idempotency_key)

    @server.tool(description=OUTCOME_DESCRIPTION,
                 annotations=ToolAnnotations(title="Record playbook outcome", read_only_hint=False,
                                             destructive_hint=False, idempotent_hint=False, open_world_hint=False))
    async def record_outcome(
        ctx: Context,
        playbook_id: Annotated[str, Field(min_length=8, max_length=64,
                                          description="The id of the procedural memory that was followed.")],
        success: Annotated[bool, Field(description="Whether following it worked.")],
        refined_steps: Annotated[Steps | None, Field(
            description="The steps as they actually worked, when they differ from the stored ones.")] = None,
        subject: Subject = None,
        idempotency_key: IdempotencyKey = None,
    ) -> CallToolResult:
        return await _call(ctx, handlers.record_outcome, playbook_id=playbook_id, success=success,
                           refined_steps=refined_steps, subject=subject, idempotency_key=idempotency_key)

    return server


class EngramMcpServer(MCPServer):
    _accepted: dict[str, frozenset[str]] | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None):
        # An argument the tool does not take is refused, not dropped (as REST refuses an unknown
        # field): a misspelt "sesion_id" or "supersede" would otherwise be lost without a word.
        if self._accepted is None:
            self._accepted = {tool.name: frozenset(tool.input_schema.get("properties", ()))
                              for tool in await self.list_tools()}
        if name in self._accepted and (unknown := sorted(set(arguments or ()) - self._accepted[name])):
            accepted = ", ".join(sorted(self._accepted[name]))
            return _invalid_arguments(name, [(field, f"unknown argument; {name} takes {accepted}")
                                             for field in unknown])
        if nul := sorted(field for field, value in (arguments or {}).items() if holds_nul(value)):
            # As REST refuses such a body: no argument takes one, and an answer naming it would
            # carry it into the idempotency record, which PostgreSQL cannot store.
            return _invalid_arguments(name, [(field, "contains a NUL character (\\u0000)") for field in nul])
        # Arguments that fail the tool's schema get the same error shape as any other rejection.
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            return _invalid_arguments(name, [(".".join(str(p) for p in e["loc"]), e["msg"])
                                             for e in exc.__cause__.errors()])


def _invalid_arguments(tool: str, problems: list[tuple[str, str]]) -> CallToolResult:
    """The one answer to arguments a tool refuses: ``invalid_arguments``, each (field, message)."""
    fields = ", ".join(field for field, _ in problems)
    return error_result(ValidationFailed(f"invalid arguments for {tool}: {fields}",
                                         details={"errors": [{"field": f, "message": m} for f, m in problems]},
                                         code="invalid_arguments"))


async def _call(ctx: Context, handler: Callable[..., dict[str, Any]], **arguments: Any) -> CallToolResult:
    try:
        result = await run_sync(handler, caller=_caller(ctx), **arguments)
    except EngramError as exc:
        return error_result(exc)
    except Exception as exc:  # the tool boundary: log it, tell the agent no more than that it failed
        if busy := database_busy(exc):
            return error_result(busy)
        if not (is_outage(exc) or isinstance(exc, TransportError)):
            log.exception("MCP tool %s failed", handler.__name__)
            return error_result(EngramError("the tool failed unexpectedly; the error was logged",
                                            code="internal_error"))
        # The same code the REST API answers with (engram_core.es.outage.outage_error).
        return error_result(outage_error(exc))
    return CallToolResult(content=[TextContent(type="text", text=_json(result))], structured_content=result)


def _caller(ctx: Context) -> Caller:
    request = ctx.request_context.request
    caller = getattr(request, "scope", {}).get(CALLER_SCOPE_KEY)
    if not isinstance(caller, Caller):
        raise AuthenticationFailed("no authenticated agent token on this request")
    return caller


def error_result(exc: EngramError) -> CallToolResult:
    body = {"error": exc.as_dict()}
    return CallToolResult(content=[TextContent(type="text", text=_json(body))], structured_content=body,
                          is_error=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
