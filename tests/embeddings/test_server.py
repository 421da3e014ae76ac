"""The OpenAI-compatible embeddings endpoint (embeddings/server.py), over real HTTP,
serving the real all-MiniLM-L6-v2 weights. No Elasticsearch or database needed."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from embeddings.minilm import MiniLMEmbedder
from embeddings.openai import OpenAIEmbedder
from embeddings.server import MAX_INPUTS, EmbeddingsServer

TEXTS = ["Caroline went to the LGBTQ support group on 7 May.", "Melanie painted a sunrise.", "ok"]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(batch_size=4, query_cache_size=0)


@pytest.fixture(scope="module")
def server(minilm) -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer(minilm) as running:
        yield running


@pytest.fixture
def http(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def test_protocol_shape_and_vectors_equal_the_embedders(http, minilm):
    response = http.post("/embeddings", json={"model": "all-MiniLM-L6-v2", "input": TEXTS})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "list"
    assert body["model"] == "all-MiniLM-L6-v2"
    assert [item["index"] for item in body["data"]] == [0, 1, 2]
    assert {item["object"] for item in body["data"]} == {"embedding"}
    assert body["usage"] == {"prompt_tokens": 15, "total_tokens": 15}  # words, as documented
    served = np.asarray([item["embedding"] for item in body["data"]], dtype=np.float32)
    direct = np.asarray(minilm.embed_documents(TEXTS), dtype=np.float32)
    assert served.shape == (3, 384)
    np.testing.assert_allclose(served, direct, atol=1e-6)  # JSON floats round-trip float32 exactly enough


def test_single_string_input_and_default_model_name(http, minilm):
    body = http.post("/embeddings", json={"input": "Melanie painted a sunrise."}).json()
    assert body["model"] == minilm.name
    assert len(body["data"]) == 1
    np.testing.assert_allclose(body["data"][0]["embedding"], minilm.embed_documents(["Melanie painted a sunrise."])[0],
                               atol=1e-6)


def test_base64_encoding_is_little_endian_float32(http, minilm):
    body = http.post("/embeddings", json={"model": "m", "input": TEXTS[:2], "encoding_format": "base64"}).json()
    decoded = [np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4") for item in body["data"]]
    np.testing.assert_array_equal(np.stack(decoded), np.asarray(minilm.embed_documents(TEXTS[:2]), dtype=np.float32))


def test_dimensions_must_match_the_model(http):
    ok = http.post("/embeddings", json={"model": "m", "input": "x y", "dimensions": 384})
    assert ok.status_code == 200
    bad = http.post("/embeddings", json={"model": "m", "input": "x y", "dimensions": 1536})
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "dimensions"
    assert bad.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("body, param", [
    ({"model": "m"}, "input"),
    ({"model": "m", "input": []}, "input"),
    ({"model": "m", "input": [[101, 2023]]}, "input"),
    ({"model": "m", "input": ["a", ""]}, "input"),
    ({"model": "m", "input": ["a"] * (MAX_INPUTS + 1)}, "input"),
    ({"model": "m", "input": "a", "encoding_format": "int8"}, "encoding_format"),
    (["not", "an", "object"], None),
])
def test_bad_requests_get_openai_style_400s(http, body, param):
    response = http.post("/embeddings", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert error["message"]


def test_non_json_body_is_a_400(http):
    response = http.post("/embeddings", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "not JSON" in response.json()["error"]["message"]


def test_every_call_is_counted_and_other_routes_are_404(server, http):
    before = server.calls_snapshot()
    chat = http.post("/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 404
    assert chat.json()["error"]["code"] == "not_found"
    models = http.get("/models").json()
    assert models["data"][0]["id"] == server.model
    http.post("/embeddings", json={"input": "one more"})
    after = server.calls_snapshot()
    assert after.get("POST /v1/chat/completions", 0) - before.get("POST /v1/chat/completions", 0) == 1
    assert after["GET /v1/models"] - before.get("GET /v1/models", 0) == 1
    assert after["POST /v1/embeddings"] - before.get("POST /v1/embeddings", 0) == 1


def test_engrams_own_openai_embedder_reads_it(server, minilm):
    """The served vectors drop into ENGRAM_EMBEDDER=openai unchanged (same model, same numbers)."""
    client = OpenAIEmbedder(url=server.url, model=minilm.name, dims=384, batch_size=2, query_cache_size=0)
    try:
        np.testing.assert_allclose(client.embed_documents(TEXTS), minilm.embed_documents(TEXTS), atol=1e-6)
        np.testing.assert_allclose(client.embed_query(TEXTS[0]), minilm.embed_query(TEXTS[0]), atol=1e-6)
    finally:
        client.close()
