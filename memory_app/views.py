import hmac

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from memory_app.health import health_report_cached


def _may_see_details(request: HttpRequest) -> bool:
    """A monitor presenting ``ENGRAM_MONITOR_TOKEN``, or a logged-in superuser: the report names
    the cluster's version, licence, addresses and indices and spans every tenant (the outbox
    backlog), nothing an anonymous caller or a tenant's staff needs."""
    if request.user.is_authenticated and request.user.is_active and request.user.is_superuser:
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    expected = settings.ENGRAM_MONITOR_TOKEN
    # As bytes: compare_digest refuses str holding anything but ASCII, which a header may.
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(),
                                                                                 expected.encode())


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when healthy, 503 when not; the whole report only for a monitor or a superuser."""
    healthy, report = health_report_cached(cache_seconds=settings.ENGRAM_HEALTH_CACHE_SECONDS,
                                           outbox_stale_seconds=settings.ENGRAM_OUTBOX_STALE_SECONDS)
    body = report if _may_see_details(request) else {"status": "ok" if healthy else "unavailable"}
    response = JsonResponse(body, status=200 if healthy else 503)
    response["Cache-Control"] = "no-store"
    return response
