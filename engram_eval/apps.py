from django.apps import AppConfig


class EngramEvalConfig(AppConfig):
    """The product's own measurement, installed for its management commands (``memory_eval``,
    ``isolation_probe``, ``canary_scan``); it has no models."""

    name = "engram_eval"
    verbose_name = "Engram eval"
