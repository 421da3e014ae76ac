from django.contrib import admin
from django.urls import include, path

from memory_app.observability import metrics_view
from memory_app.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    path("", include("inspector.urls")),
]
