"""Embedders and rerankers: the real all-MiniLM-L6-v2 weights, real local HTTP servers, a tiny real BERT.

None of these tests needs Elasticsearch or the database.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from embeddings.base import Embedder, EmbeddingError, QueryCache, Reranker
from embeddings.minilm import MiniLMEmbedder
from embeddings.openai import OpenAIEmbedder
from embeddings.rerankers import CrossEncoderReranker, HttpReranker
from engram_eval.corpora import EVAL_CORPUS
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors


@pytest.fixture(scope="module", params=["numpy", "onnx"])
def minilm(request) -> MiniLMEmbedder:
    return MiniLMEmbedder(batch_size=4, query_cache_size=8, runtime=request.param)


@pytest.fixture(scope="module")
def real_sentences() -> list[str]:
    corpus = json.loads(EVAL_CORPUS.read_text())
    texts = [m["text"] for s in corpus["subjects"] for m in s["episodic"] + s["semantic"]]
    return texts + [q["question"] for q in corpus["questions"]]


@pytest.fixture(scope="module")
def numpy_vectors(real_sentences) -> np.ndarray:
    return MiniLMEmbedder(runtime="numpy").embed_array(real_sentences)


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


# ---------------------------------------------------------------- MiniLM


def test_dims_and_name_are_known_without_loading_weights():
    embedder = MiniLMEmbedder()
    assert embedder.dims == 384
    assert embedder.name == "all-MiniLM-L6-v2"
    assert embedder.max_seq_length == 256
    assert not embedder.is_loaded
    assert isinstance(embedder, Embedder)


def test_matches_published_sentence_transformers_outputs(minilm):
    # First components of sentence-transformers' own all-MiniLM-L6-v2 vectors (float32, torch).
    sentences = ["This is an example sentence", "Each sentence is converted.", "", "Café déjà vu — 東京"]
    expected_prefix = np.array([
        [0.06765693, 0.06349593, 0.04871314, 0.07930495, 0.03744806, 0.00265273],
        [0.07853645, 0.08856265, -0.00209270, -0.00717247, -0.01252624, 0.01881747],
        [-0.11883835, 0.04829856, -0.00254805, -0.01101118, 0.05195070, 0.01029179],
        [0.05083271, 0.00967685, 0.09635572, -0.00997369, -0.01987603, 0.01692343],
    ])  # fmt: skip
    vectors = np.array(minilm.embed_documents(sentences))
    assert np.abs(vectors[:, :6] - expected_prefix).max() < 1e-5
    # The similarity matrix printed in the sentence-transformers quickstart for this model.
    docs = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    v = np.array(minilm.embed_documents(docs))
    expected = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    assert np.abs(v @ v.T - expected).max() < 1e-4


def test_vectors_are_unit_length_floats(minilm):
    texts = ["short", "", "a somewhat longer sentence about the user's favourite editor, which is vim", "x " * 600]
    vectors = minilm.embed_documents(texts)
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == 384
        assert all(isinstance(x, float) for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-5)
    assert minilm.embed_documents([]) == []


def test_long_texts_are_truncated_to_256_tokens(minilm):
    long_text = " ".join(f"word{i}" for i in range(400))
    a, b = minilm.embed_documents([long_text, long_text + " and then something completely different"])
    assert np.abs(np.array(a) - np.array(b)).max() < 1e-6


def test_semantic_ordering(minilm):
    query = minilm.embed_query("How is the weather today?")
    close, far = minilm.embed_documents(["What is the weather like today?", "He drove to the stadium."])
    assert cos(query, close) > 0.7 > 0.2 > cos(query, far)
    prefs = minilm.embed_documents(["The user prefers dark mode in every editor.", "The user's cat is called Miso."])
    q = minilm.embed_query("which colour theme does the user like?")
    assert cos(q, prefs[0]) > cos(q, prefs[1])


def test_batched_equals_one_by_one_and_keeps_input_order(minilm):
    texts = [
        "one",
        "a much longer text that will need several more tokens than the others in this batch",
        "",
        "medium length text here",
        "two words",
        "Café déjà vu — 東京",
        "the last one, of middling length",
    ]
    batched = np.array(minilm.embed_documents(texts))  # batch_size=4: two padded batches, reordered by length
    alone = np.array([minilm.embed_documents([t])[0] for t in texts])
    assert np.abs(batched - alone).max() < 1e-5


def test_onnx_runtime_gives_the_numpy_vectors_on_real_sentences(real_sentences, numpy_vectors):
    embedder = MiniLMEmbedder(runtime="onnx", batch_size=16)
    assert not embedder.is_loaded
    vectors = embedder.embed_array(real_sentences)
    assert embedder.is_loaded and vectors.shape == numpy_vectors.shape == (len(real_sentences), 384)
    assert len(real_sentences) > 300
    # The same float32 weights and operations: equal up to summation order.
    assert np.abs(vectors - numpy_vectors).max() < 1e-5
    assert (vectors * numpy_vectors).sum(axis=1).min() > 0.99999
    assert embedder.embed_query(real_sentences[0]) == pytest.approx(numpy_vectors[0].tolist(), abs=1e-5)


def test_onnx_int8_runtime_stays_close_to_the_float_vectors(real_sentences, numpy_vectors):
    embedder = MiniLMEmbedder(runtime="onnx-int8")
    vectors = embedder.embed_array(real_sentences)
    cosines = (vectors * numpy_vectors).sum(axis=1)
    assert np.abs(np.linalg.norm(vectors, axis=1) - 1.0).max() < 1e-5
    # Integer MatMuls move every vector a little (measured: mean 0.9989, worst 0.998 on short
    # sentences; ORT's per-batch dynamic quantisation measured mean 0.992, worst 0.986).
    assert cosines.mean() > 0.998 and cosines.min() > 0.99
    assert (cosines < 0.99999).mean() > 0.5  # it really is the integer graph, not the float one
    # Nearest neighbours survive: each question's closest sentence is mostly the same one.
    n = len(real_sentences) - len(json.loads(EVAL_CORPUS.read_text())["questions"])
    questions_f, questions_q = numpy_vectors[n:], vectors[n:]
    same = (np.argmax(questions_f @ numpy_vectors[:n].T, axis=1) == np.argmax(questions_q @ vectors[:n].T, axis=1))
    assert same.mean() > 0.9


@pytest.mark.parametrize("signed", [False, True])
def test_int8_weights_as_uint8_or_int8_give_the_same_vectors_where_the_cpu_is_exact(
        signed, real_sentences, numpy_vectors, monkeypatch):
    """Where onnxruntime's uint8 × int8 kernel saturates (x86 without VNNI: cosine 0.96 mean on
    these sentences with int8 weights), the graph takes its weights as uint8 around 128: the
    same integers, through a kernel that does not. Forced to uint8 the vectors stay close on every
    CPU; int8 weights are only chosen where they give exactly those vectors."""
    from embeddings import _onnx

    if signed and not _onnx.exact_signed_int8():
        pytest.skip("this CPU has no VNNI: onnxruntime's uint8 x int8 kernel saturates here, so it is never chosen")
    monkeypatch.setattr(_onnx, "exact_signed_int8", lambda: signed)
    vectors = MiniLMEmbedder(runtime="onnx-int8").embed_array(real_sentences)
    cosines = (vectors * numpy_vectors).sum(axis=1)
    assert cosines.mean() > 0.998 and cosines.min() > 0.99
    if signed:
        monkeypatch.setattr(_onnx, "exact_signed_int8", lambda: False)
        assert np.abs(vectors - MiniLMEmbedder(runtime="onnx-int8").embed_array(real_sentences)).max() < 1e-6


@pytest.mark.parametrize(("flags", "exact"), [
    ("fpu sse avx2 fma bmi2", False),  # AVX2 only (the AMD EPYC where int8 weights saturated)
    ("fpu avx2 avx512f avx512bw avx512vl", False),  # AVX512 before VNNI: vpmaddubsw as well
    ("fpu avx2 avx512f avx512_vnni", True),
    ("fpu avx2 avx_vnni", True),
])
def test_int8_weights_are_signed_only_on_a_cpu_with_vnni(flags, exact, tmp_path):
    from embeddings import _onnx

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert _onnx.exact_signed_int8(str(cpuinfo)) is exact
    assert _onnx.exact_signed_int8(str(tmp_path / "absent")) is False


def test_onnx_int8_vectors_do_not_depend_on_the_batch(real_sentences):
    """Activations are quantised per token, so a text gets the same vector alone, with short or
    long batch-mates (whose padding and ranges once set one scale for the whole batch)."""
    embedder = MiniLMEmbedder(runtime="onnx-int8", batch_size=64)
    texts = real_sentences[:64]
    batched = embedder.embed_array(texts)
    alone = np.stack([embedder.embed_array([t])[0] for t in texts])
    mixed = embedder.embed_array([texts[0], "x " * 200, "ok"])[0]
    assert np.abs(batched - alone).max() < 1e-5
    assert np.abs(mixed - alone[0]).max() < 1e-5


def test_a_call_of_several_batches_runs_them_on_the_embedders_pool(real_sentences):
    """One onnxruntime thread per batch, and the batches of a large call spread over a pool
    (workers); the vectors and their order are those of one batch at a time."""
    texts = real_sentences[:100]
    expected = MiniLMEmbedder(runtime="onnx-int8", batch_size=16, workers=1).embed_array(texts)
    pooled = MiniLMEmbedder(runtime="onnx-int8", batch_size=16, workers=3)
    assert pooled.threads == 1 and pooled.workers == 3
    pooled.load()
    ran_on, forward = [], pooled._forward

    def spy(*arrays):
        ran_on.append(threading.current_thread().name)
        return forward(*arrays)

    pooled._forward = spy
    assert np.abs(pooled.embed_array(texts) - expected).max() < 1e-6
    assert len(ran_on) == 7 and all(name.startswith("engram-embed") for name in ran_on)
    ran_on.clear()
    pooled.embed_query("a question runs in the caller's thread")
    assert ran_on == [threading.current_thread().name]
    assert MiniLMEmbedder(runtime="numpy", workers=3).workers == 1  # numpy's BLAS has its own threads


def test_a_forked_process_makes_its_own_batch_pool(monkeypatch):
    # A pool inherited through fork() has no threads behind it; the child must not wait on it.
    embedder = MiniLMEmbedder(runtime="onnx-int8", workers=2)
    parents = embedder._batch_pool()
    assert embedder._batch_pool() is parents
    monkeypatch.setattr(os, "getpid", lambda: -1)
    assert embedder._batch_pool() is not parents


def test_unknown_runtime_is_refused():
    with pytest.raises(EmbeddingError, match="unknown MiniLM runtime"):
        MiniLMEmbedder(runtime="tensorrt")


def test_query_cache_hits_and_is_safe_to_mutate():
    embedder = MiniLMEmbedder(query_cache_size=2)
    first = embedder.embed_query("what is my favourite food?")
    assert (embedder.query_cache.hits, embedder.query_cache.misses) == (0, 1)
    first[0] = 123.0  # a caller mutating its list must not poison the cache
    second = embedder.embed_query("what is my favourite food?")
    assert embedder.query_cache.hits == 1
    assert second[0] != 123.0
    assert np.abs(np.array(second) - np.array(embedder.embed_documents(["what is my favourite food?"])[0])).max() < 1e-6
    embedder.embed_query("b")
    embedder.embed_query("c")  # evicts the oldest entry
    assert len(embedder.query_cache) == 2
    embedder.embed_query("what is my favourite food?")
    assert embedder.query_cache.misses == 4


def test_query_cache_holds_digests_not_texts_and_entries_expire():
    now = [100.0]
    cache = QueryCache(8, ttl=60.0, clock=lambda: now[0])
    computed: list[str] = []

    def compute(text: str) -> list[float]:
        computed.append(text)
        return [float(len(text))]

    cache.get_or_compute("My locker code is zanzibar.", compute)
    assert "My locker code is zanzibar." in cache
    held = repr(cache._data)  # what the process keeps
    assert "zanzibar" not in held and all(isinstance(k, bytes) and len(k) == 32 for k in cache._data)
    now[0] += 59.0
    cache.get_or_compute("My locker code is zanzibar.", compute)
    assert computed == ["My locker code is zanzibar."]  # still fresh: a hit
    now[0] += 2.0
    assert len(cache) == 0 and "My locker code is zanzibar." not in cache  # expired entries are dropped
    cache.get_or_compute("My locker code is zanzibar.", compute)
    assert len(computed) == 2  # expired: computed again
    cache.clear()
    assert len(cache) == 0 and "My locker code is zanzibar." not in cache


def test_an_idle_process_drops_expired_vectors_too():
    cache = QueryCache(8, ttl=2.0)  # its sweeper wakes every second
    cache.get_or_compute("My locker code is zanzibar.", lambda t: [1.0])
    deadline = time.monotonic() + 10
    while cache._data and time.monotonic() < deadline:  # nothing calls the cache meanwhile
        time.sleep(0.25)
    assert not cache._data


def test_concurrent_first_use_loads_once_and_agrees():
    embedder = MiniLMEmbedder(query_cache_size=0)
    results: list[list[float]] = []
    threads = [threading.Thread(target=lambda: results.append(embedder.embed_query("same text"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4
    assert all(np.abs(np.array(r) - np.array(results[0])).max() < 1e-6 for r in results)


# ---------------------------------------------------------------- a real local HTTP server


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


Responder = Callable[[str, Any], tuple[int, Any]]


@dataclass
class LocalServer:
    """A JSON-over-HTTP server on 127.0.0.1 whose answers come from ``respond(path, body)``."""

    url: str
    requests: list[Recorded] = field(default_factory=list)
    respond: Responder = lambda path, body: (404, {"error": "no responder"})


@pytest.fixture
def server() -> Iterator[LocalServer]:
    state = LocalServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw)
            state.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status, payload = state.respond(self.path, body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client already gave up (the timeout test)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic, deliberately unnormalised vector per text."""
    rng = np.random.default_rng(abs(hash(text)) % 2**32)
    return (rng.standard_normal(dims) * 7).tolist()


def openai_responder(dims: int, reverse: bool = True) -> Responder:
    def respond(path: str, body: Any) -> tuple[int, Any]:
        inputs = body["input"]
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dims)} for i, t in enumerate(inputs)]
        if reverse:
            data.reverse()  # the API documents `index`, not list order
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1}}

    return respond


# ---------------------------------------------------------------- OpenAI-compatible embedder


def test_openai_orders_by_index_normalises_and_batches(server):
    server.respond = openai_responder(dims=8)
    embedder = OpenAIEmbedder(url=server.url + "/v1/", model="m", dims=8, api_key="sk-test", batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vectors = embedder.embed_documents(texts)
    assert [r.path for r in server.requests] == ["/v1/embeddings"] * 3
    assert [r.body["input"] for r in server.requests] == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert all(r.body["model"] == "m" for r in server.requests)
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    for text, vector in zip(texts, vectors, strict=True):
        expected = np.array(fake_vector(text, 8))
        assert np.abs(np.array(vector) - expected / np.linalg.norm(expected)).max() < 1e-6
    assert embedder.name == "openai:m" and embedder.dims == 8


def test_openai_query_cache_avoids_a_second_request(server):
    server.respond = openai_responder(dims=4)
    embedder = OpenAIEmbedder(url=server.url, model="m", dims=4)
    assert embedder.embed_query("q") == embedder.embed_query("q")
    assert len(server.requests) == 1
    assert "authorization" not in server.requests[0].headers


def test_openai_http_500_raises_a_clear_error(server):
    server.respond = lambda path, body: (500, '{"error": {"message": "upstream model overloaded"}}')
    embedder = OpenAIEmbedder(url=server.url, model="m", dims=4)
    with pytest.raises(EmbeddingError, match=r"HTTP 500.*upstream model overloaded") as info:
        embedder.embed_documents(["x"])
    assert info.value.status_code == 500
    assert server.url in str(info.value)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}, r"shape \(1, 2\), expected \(1, 4\)"),
        ({"data": [{"index": 5, "embedding": [1.0, 2.0, 3.0, 4.0]}]}, "indices"),
        ({"nothing": []}, "unexpected response"),
        ("not json", "non-JSON"),
    ],
)
def test_openai_malformed_responses_raise(server, payload, message):
    server.respond = lambda path, body: (200, payload)
    with pytest.raises(EmbeddingError, match=message):
        OpenAIEmbedder(url=server.url, model="m", dims=4).embed_documents(["x"])


def test_openai_timeout_and_refused_connection_raise(server):
    def slow(path: str, body: Any) -> tuple[int, Any]:
        time.sleep(1.0)
        return openai_responder(4)(path, body)

    server.respond = slow
    with pytest.raises(EmbeddingError, match="Timeout"):
        OpenAIEmbedder(url=server.url, model="m", dims=4, timeout=0.2).embed_documents(["x"])
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    with pytest.raises(EmbeddingError, match="ConnectError"):
        OpenAIEmbedder(url=f"http://127.0.0.1:{free_port}", model="m", dims=4, timeout=2).embed_documents(["x"])


# ---------------------------------------------------------------- HTTP reranker


def relevance(query: str, text: str) -> float:
    return float(len(set(query.split()) & set(text.split())))


def test_http_reranker_cohere_shape(server):
    def respond(path: str, body: Any) -> tuple[int, Any]:
        query = body["query"]
        scored = [{"index": i, "relevance_score": relevance(query, d)} for i, d in enumerate(body["documents"])]
        scored.sort(key=lambda r: -r["relevance_score"])  # the API returns best first
        return 200, {"id": "r", "results": scored[: body["top_n"]]}

    server.respond = respond
    reranker = HttpReranker(url=server.url + "/v1/rerank", model="jina-reranker-v2", api_key="k", batch_size=3)
    texts = ["red fox", "the quick brown fox", "nothing", "quick brown", "fox"]
    scores = reranker.rerank("the quick brown fox", texts)
    assert scores == [1.0, 4.0, 0.0, 2.0, 1.0]
    assert isinstance(reranker, Reranker)
    first = server.requests[0]
    assert first.path == "/v1/rerank"
    assert first.body == {
        "model": "jina-reranker-v2",
        "query": "the quick brown fox",
        "documents": texts[:3],
        "top_n": 3,
    }
    assert first.headers["authorization"] == "Bearer k"
    assert len(server.requests) == 2
    assert reranker.rerank("q", []) == []


def test_http_reranker_tei_shape(server):
    def respond(path: str, body: Any) -> tuple[int, Any]:
        scored = [{"index": i, "score": relevance(body["query"], t)} for i, t in enumerate(body["texts"])]
        return 200, sorted(scored, key=lambda r: -r["score"])

    server.respond = respond
    reranker = HttpReranker(url=server.url + "/rerank", api="tei")
    assert reranker.rerank("brown fox", ["fox", "brown fox", "cat"]) == [1.0, 2.0, 0.0]
    assert server.requests[0].body == {"query": "brown fox", "texts": ["fox", "brown fox", "cat"]}


def test_http_reranker_errors(server):
    server.respond = lambda path, body: (500, "model crashed")
    with pytest.raises(EmbeddingError, match=r"rerank service at .* returned HTTP 500: model crashed"):
        HttpReranker(url=server.url + "/rerank").rerank("q", ["a"])
    server.respond = lambda path, body: (200, {"results": [{"index": 0, "relevance_score": 1.0}]})
    with pytest.raises(EmbeddingError, match=r"no score for texts \[1\]"):
        HttpReranker(url=server.url + "/rerank").rerank("q", ["a", "b"])


# ---------------------------------------------------------------- local cross-encoder on a tiny random BERT

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat", "on", "mat", "a", "run", "##s",
              "fast", "user", "likes", "tea", "coffee", "what", "does", "drink", "?", ".", ","]  # fmt: skip
TINY_CONFIG = {
    "architectures": ["BertForSequenceClassification"],
    "hidden_act": "gelu",
    "hidden_size": 16,
    "intermediate_size": 32,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 24,
    "model_type": "bert",
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "type_vocab_size": 2,
    "vocab_size": len(TINY_VOCAB),
    "id2label": {"0": "LABEL_0"},
}


def write_tiny_cross_encoder(
    directory: Path, *, config: dict[str, Any] = TINY_CONFIG, classifier: bool = True
) -> dict[str, np.ndarray]:
    """A randomly initialised BertForSequenceClassification export: config, safetensors, tokenizer.json."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    h, inter = config["hidden_size"], config["intermediate_size"]

    def w(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {
        "bert.embeddings.word_embeddings.weight": w(len(TINY_VOCAB), h, scale=1.0),
        "bert.embeddings.position_embeddings.weight": w(config["max_position_embeddings"], h),
        "bert.embeddings.token_type_embeddings.weight": w(2, h),
        "bert.embeddings.LayerNorm.weight": 1 + w(h, scale=0.1),
        "bert.embeddings.LayerNorm.bias": w(h, scale=0.1),
        "bert.pooler.dense.weight": w(h, h),
        "bert.pooler.dense.bias": w(h),
    }
    for i in range(config["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t[f"{p}attention.self.{name}.weight"], t[f"{p}attention.self.{name}.bias"] = w(h, h), w(h)
        t[f"{p}attention.output.dense.weight"], t[f"{p}attention.output.dense.bias"] = w(h, h), w(h)
        t[f"{p}intermediate.dense.weight"], t[f"{p}intermediate.dense.bias"] = w(inter, h), w(inter)
        t[f"{p}output.dense.weight"], t[f"{p}output.dense.bias"] = w(h, inter), w(h)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[f"{p}{ln}.weight"], t[f"{p}{ln}.bias"] = 1 + w(h, scale=0.1), w(h, scale=0.1)
    if classifier:
        t["classifier.weight"], t["classifier.bias"] = w(1, h, scale=1.0), w(1)
    save_file(t, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(config))

    tokenizer = Tokenizer(models.WordPiece({tok: i for i, tok in enumerate(TINY_VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.enable_padding(length=20)  # like many shipped tokenizer.json files; the loader must undo it
    tokenizer.save(str(directory / "tokenizer.json"))
    return t


def reference_score(t: dict[str, np.ndarray], ids: list[int], types: list[int]) -> float:
    """A plain float64, one-sequence, head-by-head BertForSequenceClassification forward pass."""
    g = {k.removeprefix("bert."): v.astype(np.float64) for k, v in t.items()}
    heads, eps = TINY_CONFIG["num_attention_heads"], TINY_CONFIG["layer_norm_eps"]

    def ln(x: np.ndarray, name: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g[name + ".weight"] + g[name + ".bias"]

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return x @ g[name + ".weight"].T + g[name + ".bias"]

    x = g["embeddings.word_embeddings.weight"][ids] + g["embeddings.position_embeddings.weight"][: len(ids)]
    x = ln(x + g["embeddings.token_type_embeddings.weight"][types], "embeddings.LayerNorm")
    for i in range(TINY_CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (dense(x, f"{p}attention.self.{n}") for n in ("query", "key", "value"))
        d = x.shape[1] // heads
        context = np.zeros_like(x)
        for hd in range(heads):
            s = slice(hd * d, (hd + 1) * d)
            scores = q[:, s] @ k[:, s].T / math.sqrt(d)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            context[:, s] = (probs / probs.sum(-1, keepdims=True)) @ v[:, s]
        x = ln(dense(context, f"{p}attention.output.dense") + x, f"{p}attention.output.LayerNorm")
        inner = dense(x, f"{p}intermediate.dense")
        inner = 0.5 * inner * (1 + np.vectorize(math.erf)(inner / math.sqrt(2)))
        x = ln(dense(inner, f"{p}output.dense") + x, f"{p}output.LayerNorm")
    pooled = np.tanh(dense(x[0], "pooler.dense"))
    return float(pooled @ g["classifier.weight"][0] + g["classifier.bias"][0])


def test_cross_encoder_matches_a_plain_reference_forward_pass(tmp_path):
    weights = write_tiny_cross_encoder(tmp_path / "ce")
    reranker = CrossEncoderReranker(tmp_path / "ce", batch_size=2)
    assert not reranker.is_loaded
    query = "what does the user drink?"
    texts = ["the user likes tea.", "a cat sat on the mat", "coffee", "", "dogs run fast , the cat runs , unknownword"]
    scores = reranker.rerank(query, texts)
    assert reranker.is_loaded
    assert len(scores) == len(texts) and all(math.isfinite(s) for s in scores)
    raw = Tokenizer.from_file(str(tmp_path / "ce" / "tokenizer.json"))
    raw.no_padding()
    for text, score in zip(texts, scores, strict=True):
        enc = raw.encode(query, text)
        assert abs(score - reference_score(weights, enc.ids, enc.type_ids)) < 1e-4
    assert reranker.rerank(query, [texts[2]])[0] == pytest.approx(scores[2], abs=1e-5)
    assert reranker.rerank(query, []) == []


def test_cross_encoder_truncates_to_max_positions(tmp_path):
    write_tiny_cross_encoder(tmp_path / "ce")
    reranker = CrossEncoderReranker(tmp_path / "ce")
    assert reranker.max_length == 24
    long_text = "the cat sat on the mat " * 20
    a, b = reranker.rerank("tea", [long_text, long_text + " coffee coffee"])
    assert math.isfinite(a) and a == pytest.approx(b, abs=1e-6)


def test_cross_encoder_rejects_unusable_models(tmp_path):
    write_tiny_cross_encoder(tmp_path / "no-head", classifier=False)
    with pytest.raises(EmbeddingError, match="no classifier head"):
        CrossEncoderReranker(tmp_path / "no-head").rerank("q", ["t"])
    write_tiny_cross_encoder(tmp_path / "two", config={**TINY_CONFIG, "id2label": {"0": "no", "1": "yes"}})
    with pytest.raises(EmbeddingError, match="one output label"):
        CrossEncoderReranker(tmp_path / "two")
    with pytest.raises(EmbeddingError, match="cannot read model config"):
        CrossEncoderReranker(tmp_path / "missing")














def test_the_word_table_is_mapped_from_the_weights_file_and_the_graph_holds_none():
    """The onnx runtimes look the word embeddings up in a table mapped from the weights file (the
    session would keep the model's largest tensor twice): the same values, so the same vectors."""
    from embeddings._bert import BertEncoder, word_embeddings_mapped
    from embeddings._onnx import build_bert_graph
    from embeddings.minilm import bundled_model_dir

    model_dir = bundled_model_dir()
    encoder = BertEncoder(model_dir)
    mapped = word_embeddings_mapped(model_dir)
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
    np.testing.assert_array_equal(mapped, encoder.word_emb)
    graph = build_bert_graph(encoder, int8=True).graph
    assert "word_emb" not in {init.name for init in graph.initializer}
    assert [i.name for i in graph.input] == ["word_embeddings", "token_type_ids", "attention_mask"]
