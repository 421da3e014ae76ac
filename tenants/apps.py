from django.apps import AppConfig
from django.core.signals import setting_changed
from django.db import connections
from django.db.models.signals import post_migrate

from . import audit_triggers


def _settings_changed(*, setting: str, **kwargs) -> None:
    # Cached capabilities, decrypted keys and the process's audit and guard options depend on
    # these; tests override them per test.
    if setting.startswith(("ES_", "ENGRAM_")):
        from .services.audit import checkpoint_spacing
        from .services.clients import clear_caches

        clear_caches()
        checkpoint_spacing.cache_clear()


def _audit_triggers(*, using: str, **kwargs) -> None:
    audit_triggers.triggers_ensure(connections[using])


class TenantsConfig(AppConfig):
    name = "tenants"

    def ready(self) -> None:
        setting_changed.connect(_settings_changed, dispatch_uid="tenants.settings_changed")
        # After every migrate: a later migration that rebuilds the audit table (SQLite) drops them.
        post_migrate.connect(_audit_triggers, sender=self, dispatch_uid="tenants.audit_triggers")
