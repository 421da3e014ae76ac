from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from memory_app.health import health_report_cached


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    healthy, report = health_report_cached()
    response = JsonResponse(report, status=200 if healthy else 503)
    response["Cache-Control"] = "no-store"
    return response
