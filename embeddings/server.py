"""Serve an Engram embedder on an OpenAI-compatible ``POST /v1/embeddings`` endpoint, so tools that
speak that protocol (Mem0, LiteLLM) use the same vectors. Standard-library server, loopback, no
authentication: a benchmark and integration aid, not a production service.

    python -m embeddings.server --port 8391"""

from __future__ import annotations

import argparse
import base64
import json
import threading
from collections import Counter
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from .base import Embedder, EmbeddingError

MAX_INPUTS = 2048  # OpenAI's limit on inputs per request
MAX_BODY_BYTES = 16 * 1024 * 1024


class _RequestError(Exception):
    def __init__(self, status: HTTPStatus, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def _inputs(body: Any) -> list[str]:
    if not isinstance(body, dict):
        raise _RequestError(HTTPStatus.BAD_REQUEST, "the request body must be a JSON object")
    raw = body.get("input")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise _RequestError(HTTPStatus.BAD_REQUEST, "'input' must be a non-empty string or list of strings",
                            param="input", code="invalid_input")
    if len(raw) > MAX_INPUTS:
        raise _RequestError(HTTPStatus.BAD_REQUEST, f"'input' holds at most {MAX_INPUTS} items",
                            param="input", code="invalid_input")
    if not all(isinstance(t, str) for t in raw):
        # OpenAI also takes token-id arrays; they only make sense with OpenAI's own tokenizer.
        raise _RequestError(HTTPStatus.BAD_REQUEST, "'input' items must be strings (token arrays are not supported)",
                            param="input", code="invalid_input")
    if any(not t for t in raw):
        raise _RequestError(HTTPStatus.BAD_REQUEST, "'input' items must not be empty strings",
                            param="input", code="invalid_input")
    return raw


def embeddings_response(embedder: Embedder, body: Any, *, model: str) -> dict[str, Any]:
    """The OpenAI-protocol answer to one ``/embeddings`` request body (raises _RequestError on bad input)."""
    texts = _inputs(body)
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise _RequestError(HTTPStatus.BAD_REQUEST, "'encoding_format' must be 'float' or 'base64'",
                            param="encoding_format")
    dimensions = body.get("dimensions")
    if dimensions is not None and dimensions != embedder.dims:
        raise _RequestError(HTTPStatus.BAD_REQUEST,
                            f"this model returns {embedder.dims} dimensions; 'dimensions' must be {embedder.dims}",
                            param="dimensions")
    vectors = embedder.embed_documents(texts)
    data = []
    for i, vector in enumerate(vectors):
        value: Any = vector
        if encoding == "base64":
            value = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
        data.append({"object": "embedding", "index": i, "embedding": value})
    words = sum(len(t.split()) for t in texts)
    return {"object": "list", "data": data, "model": body.get("model") or model,
            "usage": {"prompt_tokens": words, "total_tokens": words}}


class EmbeddingsServer:
    """An OpenAI-compatible embeddings endpoint for ``embedder``, served from a background thread.

    ``url`` is the base URL to configure clients with (``http://host:port/v1``). Use as a
    context manager, or ``start()``/``stop()``. ``calls`` counts requests as
    ``"POST /v1/embeddings"`` etc. (thread-safe reads through ``calls_snapshot()``).
    """

    def __init__(self, embedder: Embedder, *, host: str = "127.0.0.1", port: int = 0,
                 model: str | None = None) -> None:
        self.embedder = embedder
        self.model = model or embedder.name
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}/v1"

    def calls_snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.calls)

    def _count(self, key: str) -> None:
        with self._lock:
            self.calls[key] += 1

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the openai/httpx clients expect

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
                pass

            def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, exc: _RequestError) -> None:
                kind = "invalid_request_error" if exc.status < 500 else "server_error"
                self._send(exc.status, {"error": {"message": exc.message, "type": kind, "param": exc.param,
                                                  "code": exc.code}})

            def _path(self) -> str:
                return self.path.split("?", 1)[0].rstrip("/")

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                path = self._path()
                server._count(f"GET {path}")
                if path in ("/v1/models", "/models"):
                    self._send(HTTPStatus.OK, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "owned_by": "engram"}]})
                else:
                    self._error(_RequestError(HTTPStatus.NOT_FOUND, f"no route GET {path}", code="not_found"))

            def do_POST(self) -> None:  # noqa: N802
                path = self._path()
                server._count(f"POST {path}")
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    if length > MAX_BODY_BYTES:
                        raise _RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
                    raw = self.rfile.read(length)  # read even for a 404, so keep-alive stays in step
                    if path not in ("/v1/embeddings", "/embeddings"):
                        raise _RequestError(HTTPStatus.NOT_FOUND, f"no route POST {path}", code="not_found")
                    try:
                        body = json.loads(raw or b"null")
                    except ValueError as exc:
                        raise _RequestError(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}") from exc
                    try:
                        payload = embeddings_response(server.embedder, body, model=server.model)
                    except EmbeddingError as exc:
                        raise _RequestError(HTTPStatus.INTERNAL_SERVER_ERROR, f"embedding failed: {exc}") from exc
                except _RequestError as exc:
                    self._error(exc)
                    return
                self._send(HTTPStatus.OK, payload)

        return Handler

    def start(self) -> EmbeddingsServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="embeddings-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> EmbeddingsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve Engram's MiniLM embedder on an OpenAI-compatible endpoint.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8391)
    parser.add_argument("--runtime", default="onnx-int8", help="MiniLM's runtime: onnx-int8 (Engram's default), "
                                                                 "onnx or numpy")
    args = parser.parse_args(argv)
    from .minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder(query_cache_size=0, runtime=args.runtime)
    embedder.embed_documents(["warm-up"])  # load the weights before the first client waits on them
    server = EmbeddingsServer(embedder, host=args.host, port=args.port)
    print(f"serving {server.model} ({embedder.dims} dims) at {server.url}/embeddings", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
