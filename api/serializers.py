"""Shapes shared by several endpoints: the base of every request body, and the output shapes of a
memory, an error, an outbox operation."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from engram_core.es.schema import MemoryType
from engram_core.validation import clean_datetime
from memory_app.models import OutboxEntry

MEMORY_ID_PATTERN = r"^[A-Za-z0-9-]{8,64}$"


class StrictInputSerializer(serializers.Serializer):
    """The base of every request's input: a name the operation does not define is an error, reported
    with the others in ``details.fields``, instead of being dropped. A dropped name loses what the
    caller meant: a misspelt ``ocurred_at`` would date a turn now, ``sesion_id`` store it outside
    its session, ``typs`` recall every type."""

    # Bounds that are settings, {field: (argument, setting)}: set when a request's serializer is
    # made, not when its class is defined (at import), so that the settings of the moment apply.
    setting_bounds: ClassVar[dict[str, tuple[str, str]]] = {}

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name, (argument, setting) in self.setting_bounds.items():
            # A field is made from its arguments again when copied (DRF's Field.__deepcopy__), and
            # this one is get_fields' own copy: its arguments can change.
            fields[name]._kwargs[argument] = getattr(settings, setting)
            fields[name] = copy.deepcopy(fields[name])
        return fields

    def to_internal_value(self, data: Any) -> Any:
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) else []
        errors = {name: [f"Unknown field; this accepts {', '.join(self.fields) or 'no fields'}."]
                  for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not errors or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**exc.detail, **errors}) from exc
        if errors:
            raise serializers.ValidationError(errors)
        return value


class MomentField(serializers.DateTimeField):
    """A date-time in a request, read as MCP and the services read one (``clean_datetime``): ISO 8601
    with a timezone, within the years 0001-9999 in UTC, else 400 ``invalid_datetime`` naming the
    field. DRF's own field took a moment without a timezone as UTC and answered the others
    ``invalid``: one turn, two doors, two answers."""

    def to_internal_value(self, value: Any) -> Any:
        # A ValidationFailed, not DRF's error: it passes the serializer with its own code.
        return clean_datetime(value, field=self.field_name)


def strict_request_bodies(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing: every request body's object schema (``…Request`` with
    COMPONENT_SPLIT_REQUEST) says ``additionalProperties: false``, as StrictInputSerializer does."""
    schemas = result.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    # A body of one of several shapes (a PolymorphicProxySerializer) is required when every shape
    # requires a field, as for any other body (drf-spectacular leaves it optional).
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            ref = ((body or {}).get("content", {}).get("application/json", {}).get("schema") or {}).get("$ref", "")
            shapes = schemas.get(ref.rsplit("/", 1)[-1], {}).get("oneOf")
            if shapes and all(schemas.get(s.get("$ref", "").rsplit("/", 1)[-1], {}).get("required") for s in shapes):
                body["required"] = True
    return result


@functools.cache
def _shared(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    return serializer_class()


def output(serializer_class: type[serializers.Serializer], instance: Any) -> dict[str, Any]:
    """``serializer_class(instance).data``, from one instance per output class. DRF deep-copies a
    serializer's declared fields, nested serializers' included, for every new instance (a memory
    has 31), and that copying was most of the cost of writing a recall's or a turn's answer. An
    output serializer keeps nothing between calls (no context, no ``instance`` read), so one
    instance serves every request and thread."""
    return _shared(serializer_class).to_representation(instance)


def _opt(field_class, **kwargs):
    return field_class(required=False, allow_null=True, **kwargs)


class MemorySerializer(serializers.Serializer):
    """A memory as stored (no embedding, no tenant/user ids); only the fields its type has are present."""

    id = serializers.CharField()
    client_id = _opt(serializers.CharField, help_text="imported episodes: the id you gave it (the memory's "
                                                       "own id is namespaced to the end-user)")
    memory_type = serializers.ChoiceField(choices=[t.value for t in MemoryType], required=False)
    text = _opt(serializers.CharField)
    title = _opt(serializers.CharField)
    trigger = _opt(serializers.CharField)
    steps = _opt(serializers.CharField)
    refined_steps = _opt(serializers.CharField)
    role = _opt(serializers.CharField)
    context = _opt(serializers.CharField)
    session_id = _opt(serializers.CharField)
    source = _opt(serializers.CharField)
    created_at = _opt(serializers.DateTimeField)
    occurred_at = _opt(serializers.DateTimeField)
    last_used_at = _opt(serializers.DateTimeField)
    last_success_at = _opt(serializers.DateTimeField)
    consolidated_at = _opt(serializers.DateTimeField)
    use_count = _opt(serializers.IntegerField)
    success_count = _opt(serializers.IntegerField)
    failure_count = _opt(serializers.IntegerField)
    confidence = _opt(serializers.FloatField)
    supersedes = _opt(serializers.ListField, child=serializers.CharField())
    superseded_by = _opt(serializers.ListField, child=serializers.CharField())
    superseded_at = _opt(serializers.DateTimeField)
    contradiction = _opt(serializers.CharField)
    supporting_episode_ids = _opt(serializers.ListField, child=serializers.CharField())
    metadata = _opt(serializers.DictField)
    score = _opt(serializers.FloatField, help_text="recall only: the final fused and weighted score")
    explain = _opt(serializers.DictField, help_text="recall with explain: ranks, RRF score, every multiplier")
    forgotten = _opt(serializers.BooleanField, help_text="history only: a link to a memory since forgotten")

    def to_representation(self, instance):
        data = super().to_representation(instance)
        return {k: v for k, v in data.items() if k in instance}


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


class OperationSerializer(serializers.Serializer):
    """A write accepted into the outbox (202): poll it at ``/api/v1/operations/{id}``."""

    id = serializers.UUIDField(source="uid")
    operation = serializers.ChoiceField(choices=OutboxEntry.Operation.choices)
    status = serializers.ChoiceField(choices=OutboxEntry.Status.choices)
    reason = serializers.ChoiceField(choices=OutboxEntry.Reason.choices)
    memory_id = serializers.CharField(allow_blank=True)
    external_id = serializers.CharField()
    attempts = serializers.IntegerField()
    error = serializers.SerializerMethodField()
    result = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()
    processed_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(ErrorBodySerializer(allow_null=True))
    def get_error(self, entry: OutboxEntry):
        return entry.last_error if entry.status == OutboxEntry.Status.FAILED else None


def write_status() -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=["applied", "queued"],
        help_text="applied: done (visible to recall); queued: accepted into the outbox (Elasticsearch outage, "
                  "earlier writes of the end-user still queued, or a large import), applied later in order")


class WriteResultSerializer(serializers.Serializer):
    status = write_status()
    id = serializers.CharField(help_text="the memory's id (assigned now, also when queued)")
    memory = MemorySerializer(allow_null=True)
    operation = OperationSerializer(allow_null=True)


class DerivedSerializer(serializers.Serializer):
    id = serializers.CharField()
    memory_type = serializers.ChoiceField(choices=["semantic", "procedural"])


class CascadeSerializer(serializers.Serializer):
    """What went with a forgotten episode (empty lists for a fact or playbook)."""

    forgotten = DerivedSerializer(many=True, help_text="facts and playbooks derived from it alone: forgotten too")
    flagged = DerivedSerializer(many=True, help_text="derived from it and other episodes: kept with the others' ids "
                                                     "only, flagged for review (metadata.review)")
    kept = DerivedSerializer(many=True, help_text="with cascade=false: derived from it, kept as they are")
