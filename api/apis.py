"""The /api/v1/ endpoints. Each handler validates, calls one service or selector, serializes.

One APIView per URL; where the API puts two operations on one URL (GET and DELETE of a memory),
each method is one operation with its own nested serializers.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from engram_core.errors import NotFound, PermissionDenied, ValidationFailed
from engram_core.es.schema import USER_TYPES, MemoryType
from engram_core.observability import metrics
from engram_core.validation import clean_external_id
from memory_app import outbox, selectors
from memory_app.commands import turn_command, write_command
from memory_app.services.context import ContextOptions
from memory_app.recall import memory_recall
from api.auth import AgentTokenAuthentication, HasScope, ImportRateThrottle, TokenRateThrottle
from api.exceptions import RequestTooLarge
from api.idempotency import HEADER as IDEMPOTENCY_HEADER
from api.idempotency import idempotent
from api.parsers import LimitedJSONParser, body_limit
from api.serializers import (
    MEMORY_ID_PATTERN,
    CascadeSerializer,
    ErrorBodySerializer,
    ErrorSerializer,
    MemorySerializer,
    MomentField,
    OperationSerializer,
    StrictInputSerializer,
    WriteResultSerializer,
    output,
    write_status,
)
from memory_app.consolidation import selectors as consolidation_selectors
from memory_app.consolidation import services as consolidation
from memory_app.consolidation.extractors import EXTRACTORS
from memory_app.freshness import refresh_ensure
from memory_app.metering import USAGE_MAX_DAYS, tenant_usage
from memory_app.models import ConsolidationRun, OutboxEntry
from memory_app.outbox import Submitted
from memory_app.services.facts import catalog_entry_write
from memory_app.services.imports import episodes_assign_ids
from memory_app.turns import turn_create
from memory_app.usage import usage_record_recalled
from memory_app.validation import (
    Limits,
    CONTRADICTIONS,
    EPISODE_ROLES,
    FORGET_REASONS,
    MEMORY_ID_MAX_CHARS,
    NOTE_MAX_CHARS,
    SESSION_ID_MAX_CHARS,
    SUPPORTING_IDS_MAX,
    TITLE_MAX_CHARS,
    clean_memory_id,
    clean_steps,
)
from tenants.models import AgentToken, Subject, Tenant, TokenRead
from tenants.selectors import subject_find, subject_get, subject_page
from tenants.services.token_reads import token_read_record
from tenants.services.keys import KeyLifetimes
from tenants.services.subjects import subject_get_or_create

# By name, not by the enum's order.
READ = AgentToken.Scope.MEMORY_READ.value
WRITE = AgentToken.Scope.MEMORY_WRITE.value
FORGET = AgentToken.Scope.MEMORY_FORGET.value
ADMIN = AgentToken.Scope.TENANT_ADMIN.value
ERASE = AgentToken.Scope.SUBJECT_ERASE.value
Op = OutboxEntry.Operation

# ---------------------------------------------------------------- documentation helpers

_ERRORS = {
    400: "invalid input", 401: "missing, malformed, unknown or revoked agent token",
    403: "the token lacks the scope", 404: "unknown end-user or memory (also: another tenant's)",
    413: "request body too large", 429: "rate limit exceeded (Retry-After)",
    503: "Elasticsearch unavailable (Retry-After)",
}
_WRITE_ERRORS = {409: "conflict (e.g. the Idempotency-Key is in use by a running request)",
                 422: "the Idempotency-Key was used for a different request"}


def documented(ok: dict[int, Any], *, write: bool = False) -> dict[int, Any]:
    errors = {**_ERRORS, **(_WRITE_ERRORS if write else {})}
    return {**ok, **{status: OpenApiResponse(ErrorSerializer, description=text) for status, text in errors.items()}}


# As clean_external_id reads them: the schema says what the API takes, so generated calls reach past it.
EXTERNAL_ID = OpenApiParameter("external_id", str, OpenApiParameter.PATH,
                               pattern=r"^[^\s\x00-\x1f\x7f-\x9f/][^\x00-\x1f\x7f-\x9f/]{0,199}$",
                               description="the end-user's id in your system (1-200 characters, no control "
                                           "character, no '/')")
MEMORY_ID = OpenApiParameter("memory_id", str, OpenApiParameter.PATH, pattern=MEMORY_ID_PATTERN)
IDEMPOTENCY_KEY = OpenApiParameter(
    IDEMPOTENCY_HEADER, str, OpenApiParameter.HEADER, required=False, pattern=r"^[\x21-\x7e][\x20-\x7e]{0,254}$",
    description="Any unique string (e.g. a UUID) per logical write. A retry with the same key gets the first "
                "response and writes nothing twice; reusing a key for a different request is refused (422).")


def accepted(status: int, serializer) -> dict[int, Any]:
    return {status: serializer, 202: OpenApiResponse(serializer, description="queued: accepted into the outbox, "
                                                                              "applied later in order")}


# ---------------------------------------------------------------- base


class BaseApi(APIView):
    authentication_classes = [AgentTokenAuthentication]
    permission_classes = [HasScope]
    throttle_classes = [TokenRateThrottle]
    parser_classes = [LimitedJSONParser]
    renderer_classes = [JSONRenderer]
    metadata_class = None  # no OPTIONS self-description: the OpenAPI schema is the description
    scopes: dict[str, str | tuple[str, ...]] = {}
    # What each method may show of an end-user's memory (a TokenRead kind): a response that did
    # (``shown``) is counted in the token access log before it is sent. tests/api/test_token_access.py
    # walks every URL pattern with a canary and fails for a response showing it uncounted.
    reads: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Nested serializers share names across views: name their schema components after the view.
        for attr in ("InputSerializer", "OutputSerializer", "ForgetQuerySerializer", "ForgetOutputSerializer",
                     "ListQuerySerializer", "ListOutputSerializer", "QuerySerializer"):
            if (nested := cls.__dict__.get(attr)) is not None:
                name = cls.__name__.removesuffix("Api") + attr.removesuffix("Serializer")
                extend_schema_serializer(component_name=name)(nested)

    @property
    def allowed_methods(self) -> list[str]:
        return [m for m in super().allowed_methods if m != "OPTIONS"]

    def initial(self, request: Request, *args, **kwargs) -> None:
        limit = body_limit(self)
        length = request.META.get("CONTENT_LENGTH") or "0"
        # ASCII digits only: "²".isdigit() holds, yet int("²") raises (a header is the client's text).
        if length.isascii() and length.isdigit() and int(length) > limit:
            raise RequestTooLarge(f"the request body exceeds {limit} bytes", details={"limit_bytes": limit})
        super().initial(request, *args, **kwargs)
        # The path names an end-user and a memory that could exist, or the request goes no further
        # (before an Idempotency-Key is claimed: its record keeps the path). The end-user's id is
        # cleaned here once and handed on cleaned: ``self.kwargs`` is the dict dispatch passes to
        # the handler; below this, everything trusts it.
        if "external_id" in kwargs:
            self.kwargs["external_id"] = clean_external_id(kwargs["external_id"])
        if "memory_id" in kwargs:
            clean_memory_id(kwargs["memory_id"])

    def finalize_response(self, request: Request, response, *args, **kwargs):
        shown = getattr(request, "token_shown", None)
        if shown is not None and 200 <= response.status_code < 300:
            subject, memories = shown
            kind = self.reads[request.method.lower()]  # KeyError: the view showed memory it did not declare
            token_read_record(token=request.auth, subject=subject, kind=kind, memories=memories)
        return super().finalize_response(request, response, *args, **kwargs)

    @staticmethod
    def shown(request: Request, subject: Subject | None, memories: int) -> None:
        """The response shows ``memories`` of ``subject``'s memories: count it (nothing when none)."""
        if subject is not None and memories:
            request.token_shown = (subject, memories)

    @staticmethod
    def tenant(request: Request) -> Tenant:
        return request.auth.tenant

    @staticmethod
    def reads_memory(request: Request) -> bool:
        """Whether the token may see memory content: a write answers a token without memory:read
        with ids and statuses only."""
        return request.auth.has_scope(READ)

    def subject(self, request: Request, external_id: str) -> Subject:
        return subject_get(tenant=self.tenant(request), external_id=external_id)

    @staticmethod
    def validated(serializer_class, data) -> dict[str, Any]:
        serializer = serializer_class(data=data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def submit(self, request: Request, external_id: str, operation: Op, payload: dict[str, Any], *,
               memory_id: str = "", background: bool = False) -> Submitted:
        write = write_command(tenant=self.tenant(request), external_id=external_id, operation=operation,
                              payload=payload, limits=Limits.from_settings(), actor=request.auth,
                              context_options=ContextOptions.from_settings(),
                              lifetimes=KeyLifetimes.from_settings(), memory_id=memory_id)
        return outbox.write_submit(tenant=self.tenant(request), write=write, token=request.auth,
                                   background=background, defer_refresh=True)

    @staticmethod
    def written(submitted: Submitted, body: dict[str, Any], serializer_class, *, status: int = 201) -> Response:
        """The answer to a write: ``status`` when applied, 202 + the operation (and its URL) when queued."""
        if submitted.queued:
            entry = submitted.entry
            body = {**body, "status": "queued", "operation": entry}
            headers = {"Location": reverse("api:operation-get", kwargs={"uid": entry.uid})}
            return Response(output(serializer_class, body), status=202, headers=headers)
        return Response(output(serializer_class, {**body, "status": "applied", "operation": None}), status=status)


def _json_ready(data: dict[str, Any]) -> dict[str, Any]:
    """Validated data as the outbox stores it (datetimes as ISO 8601): the same payload now or at replay."""
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in data.items()}


# ---------------------------------------------------------------- subjects


class SubjectCreateApi(BaseApi):
    """POST: create an end-user (tenant:admin). GET: list the tenant's end-users (memory:read)."""

    scopes = {"post": ADMIN, "get": READ}

    class ListQuerySerializer(StrictInputSerializer):
        prefix = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                       help_text="only end-users whose external id starts with this")
        limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=500)
        # Bounded, as every number a request names: an offset past PostgreSQL's bigint answered 500.
        offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=10**9)

    class ListOutputSerializer(serializers.Serializer):
        class ListedSerializer(serializers.Serializer):
            external_id = serializers.CharField()
            display_name = serializers.CharField(allow_blank=True)
            created_at = serializers.DateTimeField()
            memory_counts = serializers.DictField(child=serializers.IntegerField(),
                                                  help_text="memories of each own type, superseded included")

        subjects = ListedSerializer(many=True)
        next_offset = serializers.IntegerField(allow_null=True, help_text="the next page's offset (null: none)")

    @extend_schema(operation_id="subject_list", summary="The tenant's end-users, by external id",
                   parameters=[ListQuerySerializer], responses=documented({200: ListOutputSerializer}))
    def get(self, request: Request) -> Response:
        data = self.validated(self.ListQuerySerializer, request.query_params)
        tenant = self.tenant(request)
        page = subject_page(tenant=tenant, prefix=data["prefix"], limit=data["limit"] + 1, offset=data["offset"])
        more, page = len(page) > data["limit"], page[:data["limit"]]
        for subject in page:  # read-your-writes: the counts include each one's deferred writes
            refresh_ensure(subject=subject)
        stats = selectors.subjects_memory_stats(tenant=tenant, subjects=page)
        empty = {t.value: 0 for t in USER_TYPES}
        rows = [{"external_id": s.external_id, "display_name": s.display_name, "created_at": s.created_at,
                 "memory_counts": stats.get(str(s.user_id), {}).get("counts", empty)} for s in page]
        return Response(output(self.ListOutputSerializer, {
            "subjects": rows, "next_offset": data["offset"] + len(page) if more else None}))

    class InputSerializer(StrictInputSerializer):
        external_id = serializers.CharField(max_length=200)
        display_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    class OutputSerializer(serializers.Serializer):
        external_id = serializers.CharField()
        display_name = serializers.CharField(allow_blank=True)
        created_at = serializers.DateTimeField()

    @extend_schema(operation_id="subject_create", summary="Create an end-user (and mint their key)",
                   request=InputSerializer,
                   responses=documented({201: OutputSerializer, 200: OutputSerializer}, write=True),
                   parameters=[IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request: Request) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        external_id = clean_external_id(data["external_id"])
        try:
            subject, status = subject_get(tenant=self.tenant(request), external_id=external_id), 200
        except NotFound:
            subject = subject_get_or_create(tenant=self.tenant(request), external_id=external_id,
                                            display_name=data["display_name"], actor=request.auth,
                                            lifetimes=KeyLifetimes.from_settings())
            status = 201
        return Response(output(self.OutputSerializer, subject), status=status)


class SubjectEraseApi(BaseApi):
    scopes = {"delete": (ADMIN, ERASE)}

    class OutputSerializer(serializers.Serializer):
        status = write_status()
        documents_deleted = serializers.IntegerField(allow_null=True)
        operation = OperationSerializer(allow_null=True)

    @extend_schema(operation_id="subject_erase", summary="Erase an end-user: every memory and key",
                   request=None, responses=documented(accepted(200, OutputSerializer), write=True),
                   parameters=[EXTERNAL_ID, IDEMPOTENCY_KEY])
    @idempotent
    def delete(self, request: Request, external_id: str) -> Response:
        submitted = self.submit(request, external_id, Op.ERASE, {})
        deleted = submitted.result["documents_deleted"] if submitted.result else None
        return self.written(submitted, {"documents_deleted": deleted}, self.OutputSerializer, status=200)


class SubjectExportApi(BaseApi):
    scopes = {"get": READ}
    reads = {"get": TokenRead.Kind.EXPORT}

    class OutputSerializer(serializers.Serializer):
        class MemoriesSerializer(serializers.Serializer):
            episodic = MemorySerializer(many=True)
            semantic = MemorySerializer(many=True)
            procedural = MemorySerializer(many=True)

        external_id = serializers.CharField()
        tenant_id = serializers.CharField()
        user_id = serializers.CharField()
        memories = MemoriesSerializer()

    @extend_schema(operation_id="subject_export", summary="Everything stored for an end-user, as JSON",
                   responses=documented({200: OutputSerializer}), parameters=[EXTERNAL_ID])
    def get(self, request: Request, external_id: str) -> Response:
        subject = self.subject(request, external_id)
        export = selectors.subject_export(subject=subject)
        self.shown(request, subject, max(1, sum(len(v) for v in export["memories"].values())))
        return Response(output(self.OutputSerializer, {**export, "external_id": subject.external_id}))


# ---------------------------------------------------------------- turns and recall


def _timezone_field() -> serializers.CharField:
    """The optional ``timezone`` of recall and turns (checked by validation.clean_timezone, one
    rule for REST and MCP)."""
    return serializers.CharField(
        required=False, allow_null=True, allow_blank=True,
        help_text="the end-user's IANA time zone, e.g. Europe/Paris: dates the query names "
                  "(\"yesterday\", \"in June\") are read as their calendar days (default UTC)")


class TurnCreateApi(BaseApi):
    scopes = {"post": WRITE}
    reads = {"post": TokenRead.Kind.TURN}

    class InputSerializer(StrictInputSerializer):
        text = serializers.CharField(help_text="the user's message, verbatim")
        occurred_at = MomentField(required=False, allow_null=True)
        session_id = serializers.CharField(required=False, allow_null=True, max_length=SESSION_ID_MAX_CHARS)
        context = serializers.CharField(required=False, allow_null=True,
                                        help_text="the conversation just before the turn (helps short replies)")
        metadata = serializers.DictField(required=False, allow_null=True)
        k = serializers.IntegerField(required=False, default=5, min_value=1)
        setting_bounds = {"k": ("max_value", "ENGRAM_RECALL_MAX_K")}
        types = serializers.ListField(child=serializers.ChoiceField(choices=[t.value for t in MemoryType]),
                                      required=False, allow_null=True, min_length=1)
        include_superseded = serializers.BooleanField(required=False, default=False)
        explain = serializers.BooleanField(required=False, default=False)
        timezone = _timezone_field()

    class OutputSerializer(WriteResultSerializer):
        recall = MemorySerializer(many=True, allow_null=True,
                                  help_text="what the agent should know for this turn (without the turn itself); "
                                            "null when recall was impossible (see recall_error)")
        recall_error = ErrorBodySerializer(allow_null=True)

    @extend_schema(operation_id="turn_create", summary="Store the user's turn and recall for it, in one call",
                   request=InputSerializer, responses=documented(accepted(201, OutputSerializer), write=True),
                   parameters=[EXTERNAL_ID, IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request: Request, external_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        reads = self.reads_memory(request)
        turn = turn_command(tenant=self.tenant(request), external_id=external_id, memory_id=request.memory_id,
                            max_query_chars=settings.ENGRAM_MAX_QUERY_CHARS, limits=Limits.from_settings(),
                            context_options=ContextOptions.from_settings(),
                            lifetimes=KeyLifetimes.from_settings(), actor=request.auth,
                            **_json_ready(data))
        result = turn_create(tenant=self.tenant(request), turn=turn, token=request.auth, with_recall=reads)
        metrics.TURNS.labels("queued" if result.submitted.queued else "applied").inc()
        if result.recall is not None:
            metrics.RECALLS.labels("turn").inc()
        error = result.recall_error.as_dict() if result.recall_error else None
        if result.recall:
            self.shown(request, result.subject, len(result.recall))
        body = {"id": request.memory_id, "memory": (result.submitted.result or {}).get("memory") if reads else None,
                "recall": result.recall, "recall_error": error}
        return self.written(result.submitted, body, self.OutputSerializer)


class RecallApi(BaseApi):
    scopes = {"post": READ}
    reads = {"post": TokenRead.Kind.RECALL}

    class InputSerializer(StrictInputSerializer):
        query = serializers.CharField()
        k = serializers.IntegerField(required=False, default=10, min_value=1)
        setting_bounds = {"k": ("max_value", "ENGRAM_RECALL_MAX_K")}
        types = serializers.ListField(child=serializers.ChoiceField(choices=[t.value for t in MemoryType]),
                                      required=False, allow_null=True, min_length=1)
        since = MomentField(required=False, allow_null=True)
        until = MomentField(required=False, allow_null=True)
        include_superseded = serializers.BooleanField(required=False, default=False)
        as_of = MomentField(
            required=False, allow_null=True,
            help_text="What was true then: the facts valid at that moment (superseded since or not), episodes "
                      "and playbooks up to it, ranked as if asked then.")
        explain = serializers.BooleanField(required=False, default=False)
        timezone = _timezone_field()

    class OutputSerializer(serializers.Serializer):
        memories = MemorySerializer(many=True)

    @extend_schema(operation_id="recall", summary="The memories most useful for a query",
                   request=InputSerializer, responses=documented({200: OutputSerializer}), parameters=[EXTERNAL_ID])
    def post(self, request: Request, external_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        subject = self.subject(request, external_id)
        memories = memory_recall(subject=subject, **data)
        usage_record_recalled(subject=subject, memories=memories)
        metrics.RECALLS.labels("rest").inc()
        self.shown(request, subject, len(memories))
        return Response(output(self.OutputSerializer, {"memories": memories}))


# ---------------------------------------------------------------- memories


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
class StepsField(serializers.Field):
    """A playbook's steps: text, or a list of steps (stored one per line), as MCP takes them."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str | list):
            raise serializers.ValidationError("Not text or a list of strings.")
        try:
            return clean_steps(data, field=self.field_name)
        except ValidationFailed as exc:
            raise serializers.ValidationError(exc.message) from exc

    def to_representation(self, value: Any) -> Any:
        return value


class _WriteMemoryFields(StrictInputSerializer):
    setting_bounds = {"supersedes": ("max_length", "ENGRAM_MAX_SUPERSEDES")}
    confidence = serializers.FloatField(required=False, default=1.0, min_value=0.0, max_value=1.0)
    supersedes = serializers.ListField(child=serializers.CharField(max_length=MEMORY_ID_MAX_CHARS), required=False,
                                       allow_null=True,
                                       help_text="ids of the subject's memories (same type) this one replaces")
    contradiction = serializers.ChoiceField(
        choices=list(CONTRADICTIONS), required=False, default="natural",
        help_text="natural: the world changed (moved house); harsh: the old memory was wrong "
                  "(lowers this one's confidence); fulfilled: a plan came true (went to the festival)")
    metadata = serializers.DictField(required=False, allow_null=True)


class SemanticMemoryInput(_WriteMemoryFields):
    type = serializers.ChoiceField(choices=["semantic"])
    text = serializers.CharField(help_text="one distilled fact")
    supporting_episode_ids = serializers.ListField(child=serializers.CharField(max_length=MEMORY_ID_MAX_CHARS),
                                                   required=False, allow_null=True, max_length=SUPPORTING_IDS_MAX)


class ProceduralMemoryInput(_WriteMemoryFields):
    type = serializers.ChoiceField(choices=["procedural"])
    trigger = serializers.CharField(help_text="when this playbook applies")
    steps = StepsField(help_text="what to do: text, or a list of steps (stored one per line)")


class MemoryCreateApi(BaseApi):
    """POST: write a fact or a playbook (memory:write). GET: list one type of memory (memory:read)."""

    scopes = {"post": WRITE, "get": READ}
    reads = {"get": TokenRead.Kind.LIST}
    inputs = {"semantic": (SemanticMemoryInput, Op.FACT), "procedural": (ProceduralMemoryInput, Op.PLAYBOOK)}

    class ListQuerySerializer(StrictInputSerializer):
        type = serializers.ChoiceField(choices=[t.value for t in USER_TYPES])
        key = serializers.CharField(max_length=MEMORY_ID_MAX_CHARS * 4, required=False,
                                    help_text="only memories stored under this key of yours: an imported "
                                              "episode's id (client_id), a fact's or playbook's metadata.key")
        limit = serializers.IntegerField(required=False, default=50, min_value=1, max_value=selectors.MEMORY_LIST_MAX)
        offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=selectors.MEMORY_LIST_WINDOW)
        include_superseded = serializers.BooleanField(required=False, default=False)

    class ListOutputSerializer(serializers.Serializer):
        memories = MemorySerializer(many=True)

    @extend_schema(operation_id="memory_list", summary="The end-user's memories of one type, newest written first",
                   parameters=[EXTERNAL_ID, ListQuerySerializer], responses=documented({200: ListOutputSerializer}))
    def get(self, request: Request, external_id: str) -> Response:
        data = self.validated(self.ListQuerySerializer, request.query_params)
        subject = self.subject(request, external_id)
        memories = selectors.memory_page(subject=subject, memory_type=MemoryType(data["type"]), key=data.get("key"),
                                         limit=data["limit"], offset=data["offset"],
                                         include_superseded=data["include_superseded"])
        self.shown(request, subject, len(memories))
        return Response(output(self.ListOutputSerializer, {"memories": memories}))

    @extend_schema(operation_id="memory_create", summary="Write a fact (semantic) or a playbook (procedural)",
                   request=PolymorphicProxySerializer(component_name="MemoryCreate",
                                                      serializers={"semantic": SemanticMemoryInput,
                                                                   "procedural": ProceduralMemoryInput},
                                                      resource_type_field_name="type"),
                   responses=documented(accepted(201, WriteResultSerializer), write=True),
                   parameters=[EXTERNAL_ID, IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request: Request, external_id: str) -> Response:
        kind = request.data.get("type") if isinstance(request.data, dict) else None
        if not isinstance(kind, str) or kind not in self.inputs:  # a list or an object cannot key a dict
            raise ValidationFailed("type must be 'semantic' or 'procedural'", details={"field": "type"},
                                   code="invalid_memory_type")
        serializer_class, operation = self.inputs[kind]
        data = self.validated(serializer_class, request.data)
        data.pop("type")
        submitted = self.submit(request, external_id, operation, data, memory_id=request.memory_id)
        memory = submitted.result["memory"] if submitted.result and self.reads_memory(request) else None
        return self.written(submitted, {"id": request.memory_id, "memory": memory}, WriteResultSerializer)


class MemoryApi(BaseApi):
    """GET: one memory (memory:read). DELETE: forget it, with a reason (memory:forget)."""

    scopes = {"get": READ, "delete": FORGET}
    reads = {"get": TokenRead.Kind.GET}

    class ForgetQuerySerializer(StrictInputSerializer):
        reason = serializers.ChoiceField(choices=list(FORGET_REASONS),
                                         help_text="why it is forgotten, a code kept in the audit log: "
                                                   + "; ".join(f"{k}: {v}" for k, v in FORGET_REASONS.items()))
        note = serializers.CharField(max_length=NOTE_MAX_CHARS, required=False, allow_blank=True,
                                     help_text="why, in your words (optional): kept beside the audit log, not in "
                                               "it, and erased with the end-user")
        cascade = serializers.BooleanField(required=False, default=True,
                                           help_text="forgetting an episode forgets the facts and playbooks derived "
                                                     "from it alone and flags those with other support (default); "
                                                     "false keeps them, e.g. when the end-user confirmed them again")

    class ForgetOutputSerializer(WriteResultSerializer):
        cascade = CascadeSerializer(allow_null=True, help_text="what went with it (null while queued: see the "
                                                               "operation's result)")

    @extend_schema(operation_id="memory_get", summary="One memory of the end-user",
                   responses=documented({200: MemorySerializer}), parameters=[EXTERNAL_ID, MEMORY_ID])
    def get(self, request: Request, external_id: str, memory_id: str) -> Response:
        subject = self.subject(request, external_id)
        memory = selectors.memory_get(subject=subject, memory_id=memory_id)
        self.shown(request, subject, 1)
        return Response(output(MemorySerializer, memory))

    @extend_schema(operation_id="memory_forget", summary="Forget a memory and what was derived from it alone "
                                                         "(hard delete, audited without content)",
                   request=None, responses=documented(accepted(200, ForgetOutputSerializer), write=True),
                   parameters=[EXTERNAL_ID, MEMORY_ID, ForgetQuerySerializer, IDEMPOTENCY_KEY])
    @idempotent
    def delete(self, request: Request, external_id: str, memory_id: str) -> Response:
        data = self.validated(self.ForgetQuerySerializer, request.query_params)
        payload = {"reason": data["reason"], "cascade": data["cascade"], **({"note": data["note"]} if data.get("note")
                                                                             else {})}
        submitted = self.submit(request, external_id, Op.FORGET, payload, memory_id=memory_id)
        cascade = submitted.result["cascade"] if submitted.result else None
        return self.written(submitted, {"id": memory_id, "memory": None, "cascade": cascade},
                            self.ForgetOutputSerializer, status=200)


class MemoryHistoryApi(BaseApi):
    scopes = {"get": READ}
    reads = {"get": TokenRead.Kind.HISTORY}

    class OutputSerializer(serializers.Serializer):
        memory = MemorySerializer()
        older = MemorySerializer(many=True, help_text="what it superseded, nearest first, transitively")
        newer = MemorySerializer(many=True, help_text="what superseded it, nearest first, transitively")

    @extend_schema(operation_id="memory_history", summary="The supersession chain around a memory, both ways",
                   responses=documented({200: OutputSerializer}), parameters=[EXTERNAL_ID, MEMORY_ID])
    def get(self, request: Request, external_id: str, memory_id: str) -> Response:
        subject = self.subject(request, external_id)
        history = selectors.memory_history(subject=subject, memory_id=memory_id)
        self.shown(request, subject, 1 + len(history["older"]) + len(history["newer"]))
        return Response(output(self.OutputSerializer, history))


class PlaybookOutcomeApi(BaseApi):
    scopes = {"post": WRITE}
    reads = {"post": TokenRead.Kind.OUTCOME}

    class InputSerializer(StrictInputSerializer):
        success = serializers.BooleanField(help_text="did following the playbook work?")
        refined_steps = StepsField(required=False, allow_null=True,
                                   help_text="better steps learnt this time, if any (text or a list of steps)")

    @extend_schema(operation_id="playbook_outcome", summary="Count a success or failure of a playbook",
                   request=InputSerializer, responses=documented(accepted(200, WriteResultSerializer), write=True),
                   parameters=[EXTERNAL_ID, MEMORY_ID, IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request: Request, external_id: str, memory_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        # The request's pre-assigned id (the same on a retry with the same Idempotency-Key) keys the
        # outcome: applied twice, it counts once.
        submitted = self.submit(request, external_id, Op.OUTCOME, {**data, "operation_id": request.memory_id},
                                memory_id=memory_id)
        memory = submitted.result["memory"] if submitted.result and self.reads_memory(request) else None
        if memory:  # the playbook as stored: its trigger and steps
            self.shown(request, subject_find(tenant=self.tenant(request), external_id=external_id), 1)
        return self.written(submitted, {"id": memory_id, "memory": memory}, WriteResultSerializer, status=200)


class _ImportEpisodes(serializers.ListSerializer):
    """An import's episodes: an episode a field refuses with its own code (``MomentField``) is named
    by its place, as the import service names it (``details.index``)."""

    def to_internal_value(self, data: Any) -> Any:
        self._at = 0
        return super().to_internal_value(data)

    def run_child_validation(self, data: Any) -> Any:
        try:
            return super().run_child_validation(data)
        except ValidationFailed as exc:
            exc.details = {**exc.details, "index": self._at}
            raise
        finally:
            self._at += 1


class ImportEpisodeSerializer(StrictInputSerializer):
    text = serializers.CharField()
    occurred_at = MomentField(help_text="when it happened (required for history)")
    role = serializers.ChoiceField(choices=list(EPISODE_ROLES), required=False, default="user")
    session_id = serializers.CharField(required=False, allow_null=True, max_length=SESSION_ID_MAX_CHARS)
    context = serializers.CharField(required=False, allow_null=True)
    metadata = serializers.DictField(required=False, allow_null=True)
    id = serializers.RegexField(MEMORY_ID_PATTERN, required=False,
                                help_text="optional id of your own (8-64 letters, digits, dashes)")

    class Meta:
        list_serializer_class = _ImportEpisodes


class EpisodesImportApi(BaseApi):
    scopes = {"post": WRITE}
    throttle_classes = [TokenRateThrottle, ImportRateThrottle]

    @property
    def max_body_bytes(self) -> int:
        return settings.ENGRAM_API_MAX_IMPORT_BODY_BYTES

    class InputSerializer(StrictInputSerializer):
        episodes = ImportEpisodeSerializer(many=True, min_length=1)
        setting_bounds = {"episodes": ("max_length", "ENGRAM_MAX_IMPORT_EPISODES")}

    class OutputSerializer(serializers.Serializer):
        status = write_status()
        ids = serializers.ListField(child=serializers.CharField(), help_text="the episodes' ids, in order")
        operation = OperationSerializer(allow_null=True)

    @extend_schema(operation_id="episodes_import",
                   summary="Bulk-import historical episodes (all or nothing; large imports run in the background)",
                   request=InputSerializer, responses=documented(accepted(201, OutputSerializer), write=True),
                   parameters=[EXTERNAL_ID, IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request: Request, external_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        # Ids derive from the request's pre-assigned id (a re-run after a server error reuses them)
        # or from the client's own ids, namespaced to this end-user.
        episodes = episodes_assign_ids(tenant_id=self.tenant(request).pk, external_id=external_id,
                                       episodes=[_json_ready(e) for e in data["episodes"]],
                                       prefix=request.memory_id)
        background = len(episodes) > settings.ENGRAM_API_IMPORT_SYNC_MAX
        submitted = self.submit(request, external_id, Op.IMPORT, {"episodes": episodes}, background=background)
        return self.written(submitted, {"ids": [e["memory_id"] for e in episodes]}, self.OutputSerializer)


# ---------------------------------------------------------------- consolidation


class ConsolidationRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    trigger = serializers.CharField()
    extractor = serializers.CharField()
    extractor_version = serializers.CharField()
    episodes_read = serializers.IntegerField()
    candidates = serializers.IntegerField()
    candidates_dropped = serializers.IntegerField(help_text="not grounded in their supporting episodes")
    facts_created = serializers.IntegerField()
    facts_merged = serializers.IntegerField()
    facts_superseded = serializers.IntegerField()
    facts_unchanged = serializers.IntegerField()
    facts_flagged = serializers.IntegerField(help_text="facts whose every supporting episode was forgotten")
    playbooks_created = serializers.IntegerField()
    outcomes_recorded = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    duration_ms = serializers.IntegerField(allow_null=True)
    error = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class ConsolidationCreateApi(BaseApi):
    """Consolidate the end-user's waiting episodes: queued on Celery (202, poll the run), or with
    ``dry_run`` run here and answered with the proposed changes, writing nothing (those carry the
    end-user's memory: a dry run needs memory:read as well)."""

    scopes = {"post": WRITE}
    reads = {"post": TokenRead.Kind.DRY_RUN}

    class InputSerializer(StrictInputSerializer):
        dry_run = serializers.BooleanField(required=False, default=False)
        extractor = serializers.ChoiceField(choices=list(EXTRACTORS), required=False, allow_null=True,
                                            help_text="default: the server's ENGRAM_CONSOLIDATION_EXTRACTOR")

    class OutputSerializer(serializers.Serializer):
        run = ConsolidationRunSerializer()
        changes = serializers.ListField(child=serializers.DictField(), allow_null=True,
                                        help_text="dry run: each proposed change (create, merge, supersede, "
                                                  "playbook, drop); null otherwise")

    @extend_schema(operation_id="consolidation_create", summary="Consolidate an end-user's episodes into facts",
                   request=InputSerializer,
                   responses=documented({202: OutputSerializer, 200: OutputSerializer}, write=True),
                   parameters=[EXTERNAL_ID])
    def post(self, request: Request, external_id: str) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        subject = self.subject(request, external_id)
        if data["dry_run"]:
            if not self.reads_memory(request):
                raise PermissionDenied(f"a dry run answers with the end-user's memory: this agent token lacks the "
                                       f"{READ} scope", details={"required_scope": [READ]}, code="insufficient_scope")
            result = consolidation.consolidation_run(subject=subject, extractor=data.get("extractor"), dry_run=True,
                                                     trigger=ConsolidationRun.Trigger.API)
            self.shown(request, subject, len(result.changes or []))
            return Response(output(self.OutputSerializer, {"run": result.run, "changes": result.changes}))
        run = consolidation.consolidation_request(subject=subject, extractor=data.get("extractor"))
        headers = {"Location": reverse("api:consolidation-get", kwargs={"external_id": subject.external_id,
                                                                        "run_id": run.pk})}
        return Response(output(self.OutputSerializer, {"run": run, "changes": None}), status=202, headers=headers)


class ConsolidationGetApi(BaseApi):
    scopes = {"get": READ}

    @extend_schema(operation_id="consolidation_get", summary="One consolidation run of the end-user",
                   responses=documented({200: ConsolidationRunSerializer}),
                   parameters=[EXTERNAL_ID, OpenApiParameter("run_id", int, OpenApiParameter.PATH)])
    def get(self, request: Request, external_id: str, run_id: int) -> Response:
        run = consolidation_selectors.consolidation_run_get(subject=self.subject(request, external_id), run_id=run_id)
        return Response(output(ConsolidationRunSerializer, run))


# ---------------------------------------------------------------- tenant-wide


class CatalogEntryCreateApi(BaseApi):
    scopes = {"post": ADMIN}

    class InputSerializer(StrictInputSerializer):
        title = serializers.CharField(max_length=TITLE_MAX_CHARS)
        text = serializers.CharField()
        metadata = serializers.DictField(required=False, allow_null=True)

    @extend_schema(operation_id="catalog_entry_create",
                   summary="Add tenant-wide knowledge every end-user's recall can find",
                   request=InputSerializer, responses=documented({201: MemorySerializer}, write=True),
                   parameters=[IDEMPOTENCY_KEY])
    @idempotent
    def post(self, request: Request) -> Response:
        data = self.validated(self.InputSerializer, request.data)
        entry = catalog_entry_write(tenant=self.tenant(request), memory_id=request.memory_id, **data)
        return Response(output(MemorySerializer, entry), status=201)


class UsageApi(BaseApi):
    scopes = {"get": ADMIN}

    class QuerySerializer(StrictInputSerializer):
        days = serializers.IntegerField(required=False, default=30, min_value=1, max_value=USAGE_MAX_DAYS)

    class OutputSerializer(serializers.Serializer):
        class DaySerializer(serializers.Serializer):
            date = serializers.DateField()
            requests = serializers.IntegerField(help_text="agent-token requests (REST and MCP)")
            memories_stored = serializers.IntegerField(help_text="memories written: turns, facts, playbooks, "
                                                                 "imported episodes, consolidation's")
            consolidation_runs = serializers.IntegerField()
            llm_tokens_in = serializers.IntegerField(help_text="prompt tokens sent to the consolidation LLM")
            llm_tokens_out = serializers.IntegerField(help_text="completion tokens it returned")

        days = DaySerializer(many=True, help_text="newest first, one per day (UTC), days without use as zeros")

    @extend_schema(operation_id="usage_get", summary="Your tenant's usage per day (tenant:admin)",
                   parameters=[QuerySerializer], responses=documented({200: OutputSerializer}))
    def get(self, request: Request) -> Response:
        data = self.validated(self.QuerySerializer, request.query_params)
        return Response(output(self.OutputSerializer, {"days": tenant_usage(tenant=self.tenant(request),
                                                                            days=data["days"])}))


class OperationGetApi(BaseApi):
    """A token polls the operations it created, whatever its scopes (an erase-only token polls its
    erase); a token with memory:read, write or forget may poll any of its tenant's, as before."""

    scopes = {"get": tuple(AgentToken.Scope.values)}

    @extend_schema(operation_id="operation_get", summary="A queued write: pending, done or failed",
                   responses=documented({200: OperationSerializer}))
    def get(self, request: Request, uid) -> Response:
        entry = outbox.operation_get(tenant=self.tenant(request), uid=uid)
        token = request.auth
        if entry.token_id != token.pk and not any(token.has_scope(s) for s in (READ, WRITE, FORGET)):
            raise NotFound("unknown operation", details={"id": str(uid)})  # as for another tenant's
        return Response(output(OperationSerializer, entry))  # ids and counts: a result holds no memory


class NotFoundApi(APIView):
    """Unknown paths under /api/v1/ answer in the API's error format too."""

    schema = None
    authentication_classes: list = []
    permission_classes: list = []
    renderer_classes = [JSONRenderer]

    def dispatch(self, request, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.request = self.initialize_request(request, *args, **kwargs)
        self.headers = self.default_response_headers
        response = self.handle_exception(NotFound("no such endpoint", details={"path": request.path}))
        self.response = self.finalize_response(self.request, response, *args, **kwargs)
        return self.response
