"""The API's one error path: every 4xx/5xx is ``{"error": {"code", "message", "details"}}``.

Application errors (EngramError) carry their own code and status; DRF's and Django's own
exceptions, and Elasticsearch being unavailable, are translated here. Anything else is a bug:
logged with its traceback and answered with a content-free 500.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from elasticsearch import ApiError, TransportError
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import set_rollback

from engram_core.errors import EngramError, database_busy
from memory_app.outbox import is_outage, outage_error

log = logging.getLogger(__name__)


class RequestTooLarge(EngramError):
    code, status = "request_too_large", 413


_DRF_CODES: list[tuple[type[drf.APIException], str]] = [
    (drf.NotAuthenticated, "unauthenticated"),
    (drf.AuthenticationFailed, "unauthenticated"),
    (drf.PermissionDenied, "forbidden"),
    (drf.NotFound, "not_found"),
    (drf.MethodNotAllowed, "method_not_allowed"),
    (drf.NotAcceptable, "not_acceptable"),
    (drf.UnsupportedMediaType, "unsupported_media_type"),
    (drf.ParseError, "parse_error"),
    (drf.Throttled, "rate_limited"),
]


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    return Response({"error": {"code": code, "message": message, "details": details or {}}}, status=status,
                    headers=headers)


def retry_after() -> dict[str, str]:
    return {"Retry-After": str(settings.ENGRAM_API_RETRY_AFTER_SECONDS)}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    set_rollback()
    if busy := database_busy(exc):
        log.warning("database busy: %s", exc)
        exc = busy
    if isinstance(exc, EngramError):
        headers = retry_after() if exc.status == 503 else {}
        if seconds := getattr(exc, "retry_after", None):
            headers["Retry-After"] = str(seconds)
        if exc.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="engram"'
        return error_response(exc.status, exc.code, exc.message, exc.details, headers)
    if is_outage(exc) or isinstance(exc, TransportError):
        log.warning("Elasticsearch unavailable: %s: %s", type(exc).__name__, exc)
        error = outage_error(exc)
        return error_response(503, error.code, error.message, headers=retry_after())
    if isinstance(exc, RequestDataTooBig):
        return error_response(413, "request_too_large", "the request body is too large",
                              {"limit_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE})
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        return error_response(400, "invalid", "the request is invalid; see details.fields", {"fields": fields})
    if isinstance(exc, drf.APIException):
        code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), exc.default_code)
        headers, details = {}, {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if isinstance(exc, drf.Throttled) and exc.wait is not None:
            headers["Retry-After"] = str(max(1, int(exc.wait + 0.999)))
            details["retry_after"] = int(headers["Retry-After"])
        message = exc.detail if isinstance(exc.detail, str) else str(exc.default_detail)
        return error_response(exc.status_code, code, str(message), details, headers)
    if isinstance(exc, ApiError):
        log.error("Elasticsearch refused a request: %s", exc, exc_info=exc)
    else:
        log.error("unhandled error in %s", type(context.get("view")).__name__, exc_info=exc)
    return error_response(500, "internal_error", "internal server error")
