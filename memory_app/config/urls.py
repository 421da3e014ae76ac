from django.contrib import admin
from django.urls import path

from memory_app.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
