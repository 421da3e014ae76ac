"""Request checks every view relies on, before any of them runs."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from engram_core.errors import EngramError, ValidationFailed
from memory_app import timing

_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def error_answer(request: HttpRequest, exc: EngramError) -> HttpResponse:
    """``exc`` as its own status: the API's envelope ``{"error": {"code", "message", "details"}}``
    under /api/ and /healthz, the message as plain text on the inspector's pages."""
    if request.path.startswith(("/api/", "/healthz")):
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    return HttpResponse(exc.message, status=exc.status, content_type="text/plain; charset=utf-8")


class RefuseNulMiddleware(MiddlewareMixin):
    """A NUL character in a request's path, query string or form fields answers 400. No input
    takes one, and PostgreSQL can neither store nor compare one, so a search box or a filter that
    passed it on (the inspector's, the admin's) answered 500. JSON bodies are the API parser's
    (api.parsers). Sync and async alike (MiddlewareMixin), so no thread hop under ASGI."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        fields = [*request.GET.lists()]
        if request.method == "POST" and request.content_type in _FORMS:
            fields += request.POST.lists()
        if "\x00" not in request.path and not any("\x00" in k or any("\x00" in v for v in values)
                                                  for k, values in fields):
            return None
        return error_answer(request, ValidationFailed("the request contains a NUL character, which no input takes"))


class EngramErrorMiddleware(MiddlewareMixin):
    """An expected failure (EngramError: invalid input, not found) that a view outside the API's
    own error path raises answers its status with its message, as the API does, never a 500.
    The API's views map theirs themselves (api.exceptions)."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return error_answer(request, exception) if isinstance(exception, EngramError) else None


class ServerTimingMiddleware:
    """With ENGRAM_SERVER_TIMING, each response carries the phases its request recorded and
    ``app``, its whole time inside Django (``Server-Timing``, see memory_app.timing); without it,
    the response is left alone."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not settings.ENGRAM_SERVER_TIMING:
            return self.get_response(request)
        timings, token = timing.start()
        try:
            with timing.timed("app"):  # the request inside Django, all phases in it
                response = self.get_response(request)
        finally:
            timing.stop(token)
        if value := timings.header():
            response["Server-Timing"] = value
        return response
