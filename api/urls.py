from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from api import apis

app_name = "api"

_subject = "subjects/<str:external_id>"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("subjects", apis.SubjectCreateApi.as_view(), name="subject-create"),
    path(f"{_subject}", apis.SubjectEraseApi.as_view(), name="subject-erase"),
    path(f"{_subject}/export", apis.SubjectExportApi.as_view(), name="subject-export"),
    path(f"{_subject}/turns", apis.TurnCreateApi.as_view(), name="turn-create"),
    path(f"{_subject}/recall", apis.RecallApi.as_view(), name="recall"),
    path(f"{_subject}/memories", apis.MemoryCreateApi.as_view(), name="memory-create"),
    path(f"{_subject}/memories/<str:memory_id>", apis.MemoryApi.as_view(), name="memory"),
    path(f"{_subject}/memories/<str:memory_id>/history", apis.MemoryHistoryApi.as_view(), name="memory-history"),
    path(f"{_subject}/playbooks/<str:memory_id>/outcome", apis.PlaybookOutcomeApi.as_view(),
         name="playbook-outcome"),
    path(f"{_subject}/episodes:import", apis.EpisodesImportApi.as_view(), name="episodes-import"),
    path(f"{_subject}/consolidate", apis.ConsolidationCreateApi.as_view(), name="consolidation-create"),
    path(f"{_subject}/consolidations/<int:run_id>", apis.ConsolidationGetApi.as_view(), name="consolidation-get"),
    path("catalog/entries", apis.CatalogEntryCreateApi.as_view(), name="catalog-entry-create"),
    path("operations/<uuid:uid>", apis.OperationGetApi.as_view(), name="operation-get"),
    path("usage", apis.UsageApi.as_view(), name="usage"),
    # [\s\S], not ".": a path holding a line break (%0A) is an unknown path of the API too, not the inspector's.
    re_path(r"^[\s\S]*$", apis.NotFoundApi.as_view(), name="not-found"),
]
