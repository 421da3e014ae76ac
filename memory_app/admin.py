"""Django admin for the memory domain's database state: consolidation runs (read-only, scoped
to the staff user's tenants like every tenant admin page)."""

from __future__ import annotations

from django.contrib import admin

from memory_app.models import ConsolidationRun
from tenants.admin import TenantScopedAdmin


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(TenantScopedAdmin):
    tenant_path = "subject__tenant"
    list_display = ("id", "subject", "status", "trigger", "extractor", "episodes_read", "facts_created",
                    "facts_merged", "facts_superseded", "candidates_dropped", "facts_flagged", "playbooks_created",
                    "outcomes_recorded", "prompt_tokens", "completion_tokens", "duration_ms", "created_at")
    list_filter = ("status", "trigger", "extractor")
    search_fields = ("subject__external_id",)
    list_select_related = ("subject__tenant",)
    readonly_fields = [f.name for f in ConsolidationRun._meta.fields]
    ordering = ("-created_at",)
