"""The embedder, reranker and WordNet this deployment's settings choose (memory_app.providers), built from the embeddings and language libraries."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.core.exceptions import ImproperlyConfigured
from embeddings.minilm import MiniLMEmbedder
from embeddings.rerankers import CrossEncoderReranker, HttpReranker
from memory_app.providers import clear_cache, get_embedder, get_reranker, warm_up

# A real local HTTP server and a tiny cross-encoder, as the library's own tests make them.
from tests.embeddings.test_embeddings import openai_responder, server, write_tiny_cross_encoder  # noqa: F401 (a fixture)


@pytest.fixture(autouse=True)
def _fresh_providers() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def test_default_embedder_is_minilm_and_cached(settings):
    settings.ENGRAM_EMBEDDER = "minilm"
    settings.ENGRAM_EMBEDDER_BATCH_SIZE = 8
    embedder = get_embedder()
    assert isinstance(embedder, MiniLMEmbedder) and embedder.batch_size == 8
    assert embedder.runtime == "onnx-int8" and embedder.space == "all-MiniLM-L6-v2 int8 v3"
    assert embedder.threads == 1 and embedder.workers == min(os.cpu_count() or 1, 4)
    assert get_embedder() is embedder
    clear_cache()
    assert get_embedder() is not embedder
    assert get_reranker() is None


def test_factories_build_http_providers_from_settings(settings, server):
    settings.ENGRAM_EMBEDDER = "openai"
    settings.ENGRAM_OPENAI_EMBEDDINGS_URL = server.url
    settings.ENGRAM_OPENAI_EMBEDDINGS_MODEL = "text-embedding-3-small"
    settings.ENGRAM_OPENAI_EMBEDDINGS_DIMS = 6
    settings.ENGRAM_RERANKER = "http"
    settings.ENGRAM_RERANKER_URL = server.url + "/rerank"
    settings.ENGRAM_RERANKER_API = "tei"
    server.respond = lambda path, body: (
        openai_responder(6)(path, body) if path == "/embeddings" else (200, [{"index": 0, "score": 0.5}])
    )
    assert len(get_embedder().embed_query("hello")) == 6
    reranker = get_reranker()
    assert isinstance(reranker, HttpReranker)
    assert reranker.rerank("q", ["t"]) == [0.5]


def test_factories_reject_bad_settings(settings, tmp_path):
    settings.ENGRAM_EMBEDDER = "word2vec"
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_EMBEDDER"):
        get_embedder()
    settings.ENGRAM_EMBEDDER = "minilm"
    settings.ENGRAM_EMBEDDER_RUNTIME = "cuda"
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_EMBEDDER_RUNTIME"):
        get_embedder()
    settings.ENGRAM_EMBEDDER_RUNTIME = "numpy"
    clear_cache()
    assert get_embedder().runtime == "numpy"
    clear_cache()
    settings.ENGRAM_RERANKER = "cross-encoder"
    settings.ENGRAM_RERANKER_PATH = ""
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_RERANKER_PATH"):
        get_reranker()
    clear_cache()
    settings.ENGRAM_RERANKER_PATH = str(tmp_path / "nowhere")
    with pytest.raises(ImproperlyConfigured, match="cannot read model config"):
        get_reranker()
    clear_cache()
    write_tiny_cross_encoder(tmp_path / "ce")
    settings.ENGRAM_RERANKER_PATH = str(tmp_path / "ce")
    assert isinstance(get_reranker(), CrossEncoderReranker)
    clear_cache()
    settings.ENGRAM_RERANKER = "http"
    settings.ENGRAM_RERANKER_URL = ""
    with pytest.raises(ImproperlyConfigured, match="needs a url"):
        get_reranker()


def test_warm_up_loads_local_models_and_leaves_hosted_ones_alone(settings, tmp_path, server):
    # The entry points (wsgi.py, asgi.py) call warm_up, so a server's first request does not wait
    # for the ONNX graph to build (13-20 s on a busy 2-core machine: a CI failure's cause).
    settings.ENGRAM_EMBEDDER = "minilm"
    write_tiny_cross_encoder(tmp_path / "ce")
    settings.ENGRAM_RERANKER, settings.ENGRAM_RERANKER_PATH = "cross-encoder", str(tmp_path / "ce")
    settings.ENGRAM_WARM_UP = False
    assert warm_up() == [] and not get_embedder().is_loaded and not get_reranker().is_loaded
    settings.ENGRAM_WARM_UP = True
    assert warm_up() == ["MiniLMEmbedder", "CrossEncoderReranker"]
    assert get_embedder().is_loaded and get_reranker().is_loaded
    clear_cache()
    settings.ENGRAM_EMBEDDER, settings.ENGRAM_RERANKER = "openai", "none"
    settings.ENGRAM_OPENAI_EMBEDDINGS_URL = server.url
    calls: list[str] = []
    server.respond = lambda path, body: (calls.append(path), (500, {}))[1]
    assert warm_up() == [] and calls == []  # nothing sent to a hosted provider
