from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Memory"

    def ready(self) -> None:
        from memory_app import checks  # noqa: F401  (registers the system checks)
        from engram_core.es.vectors import EmbedderSource, register_embedder
        from memory_app.providers import get_embedder
        from memory_app.services.migration import vectors_rebuild

        # The index mappings (in the core package) take their vector width from the embedder, record
        # its vector space, and compute vectors again when an index was written by another embedder.
        from memory_app.observability import tracing_start

        tracing_start()  # off unless ENGRAM_TRACING says otherwise; before any request is handled
        register_embedder(EmbedderSource(dims=lambda: get_embedder().dims, space=lambda: get_embedder().space,
                                         revector=vectors_rebuild))
