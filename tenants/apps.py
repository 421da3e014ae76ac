from django.apps import AppConfig
from django.core.signals import setting_changed


def _settings_changed(*, setting: str, **kwargs) -> None:
    # Cached capabilities and decrypted keys depend on these; tests override them per test.
    if setting.startswith(("ES_", "ENGRAM_")):
        from .services.clients import clear_caches

        clear_caches()


class TenantsConfig(AppConfig):
    name = "tenants"

    def ready(self) -> None:
        setting_changed.connect(_settings_changed, dispatch_uid="tenants.settings_changed")
