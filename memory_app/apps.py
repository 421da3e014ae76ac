from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Memory"

    def ready(self) -> None:
        from engram_core.es.schema import register_dims_source
        from memory_app.embeddings import get_embedder

        # The index mappings (in the core package) take their vector width from the embedder.
        register_dims_source(lambda: get_embedder().dims)
