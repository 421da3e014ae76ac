"""The ASGI server runs on uvloop with httptools wherever Engram starts it (config.serving), and
hands Django its requests through the WSGI bridge (config.bridge)."""

import asyncio
import re
import threading
from pathlib import Path

import pytest
from django.conf import settings
from uvicorn.config import Config

from config.serving import UVICORN_FLAGS

ROOT = Path(settings.BASE_DIR)


@pytest.mark.parametrize("script", ["scripts/dev"])  # the benchmarks: tests/benchmarks/test_http_load.py
def test_the_scripts_serve_with_the_flags(script):
    text = (ROOT / script).read_text()
    commands = re.findall(r"^uvicorn .*?(?<!\\)$", text, flags=re.M | re.S)
    assert commands, f"{script} starts no uvicorn"
    for command in commands:
        assert " ".join(UVICORN_FLAGS) in " ".join(command.replace("\\\n", " ").split())


def test_the_flags_name_an_installed_loop_and_parser():
    """uvicorn resolves both (uvloop and httptools are installed, from uvicorn[standard]); a
    missing one would fail here rather than leave the server on a slower fallback."""
    flags = dict(zip(UVICORN_FLAGS[::2], UVICORN_FLAGS[1::2], strict=True))

    async def app(scope, receive, send):  # uvicorn resolves the flags without loading Engram
        pass

    config = Config(app, loop=flags["--loop"], http=flags["--http"], interface="asgi3", log_config=None)
    config.load()
    assert config.get_loop_factory().__module__.startswith("uvloop")
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"


# ---------------------------------------------------------------- the WSGI bridge (config.bridge)


def _echo(environ, start_response):
    """A WSGI app answering with what it was sent: method, path, content type and body."""
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    start_response("201 Created", [("Content-Type", "text/plain"), ("X-Seen", environ["REQUEST_METHOD"])])
    return [b"%s %s %s|" % (environ["REQUEST_METHOD"].encode(), environ["PATH_INFO"].encode(),
                            environ.get("CONTENT_TYPE", "").encode()), body]


class _Streamed:
    """A streaming response (Django's StreamingHttpResponse and WhiteNoise's files say so)."""

    streaming = True

    def __init__(self, chunks):
        self.chunks, self.closed = chunks, None

    def __iter__(self):
        return iter(self.chunks)

    def close(self):
        self.closed = threading.get_ident()


def _serve(app, *, body: bytes | None = b"", headers=(), max_body_bytes: int = 1024, method: str = "POST"):
    """One request through the bridge, its body in pieces of at most 5 bytes (None: the client
    leaves before sending any); the messages the bridge sent back."""
    from config.bridge import BufferedWSGIMiddleware

    bridge = BufferedWSGIMiddleware(app, workers=2, max_body_bytes=max_body_bytes)
    pieces = [] if body is None else [body[i:i + 5] for i in range(0, len(body), 5)] or [b""]
    incoming = [{"type": "http.request", "body": piece, "more_body": n < len(pieces) - 1}
                for n, piece in enumerate(pieces)]
    sent = []

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": "/api/v1/x", "raw_path": b"/api/v1/x", "query_string": b"", "root_path": "",
             "headers": [(name.encode(), value.encode()) for name, value in headers],
             "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000)}
    asyncio.run(bridge(scope, receive, send))
    return sent


def test_the_bridge_answers_a_request_in_one_message_each_way():
    body = b'{"query": "Where does Alice live?"}'
    sent = _serve(_echo, body=body, headers=[("content-type", "application/json"),
                                             ("content-length", str(len(body)))])

    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 201
    assert sent[0]["headers"] == [(b"content-type", b"text/plain"), (b"x-seen", b"POST")]
    assert sent[1]["body"] == b"POST /api/v1/x application/json|" + body and not sent[1].get("more_body")


def test_the_bridge_streams_a_streaming_response_from_the_thread_that_made_it_and_closes_it():
    """Made, iterated and closed on one thread, as under a WSGI server: a streaming response's
    generator may read through that thread's database connection (the inspector's exports
    iterate a queryset), which Django refuses to share between threads."""
    threads = []

    def chunks():
        for chunk in (b"one\n", b"two\n", b"three\n"):
            threads.append(threading.get_ident())
            yield chunk

    response = _Streamed(chunks())

    def app(environ, start_response):
        threads.append(threading.get_ident())
        start_response("200 OK", [("Content-Type", "application/x-ndjson")])
        return response

    sent = _serve(app, method="GET")

    assert [m["type"] for m in sent] == ["http.response.start", *["http.response.body"] * 4]
    assert [m["body"] for m in sent[1:]] == [b"one\n", b"two\n", b"three\n", b""]
    assert [m.get("more_body", False) for m in sent[1:]] == [True, True, True, False]
    assert len(threads) == 4 and len(set(threads)) == 1 and threads[0] != threading.get_ident()
    assert response.closed == threads[0]


@pytest.mark.parametrize("headers", [
    [("content-length", "40")],  # larger than the bridge reads up front (max_body_bytes below)
    [("transfer-encoding", "chunked")],  # no length declared
])
def test_a_body_the_bridge_does_not_read_up_front_goes_through_a2wsgi(headers):
    body = b"x" * 40

    def app(environ, start_response):
        read = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"%d" % len(read)]

    sent = _serve(app, body=body, headers=headers, max_body_bytes=16)

    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"40"  # a2wsgi streamed the body to the app


def test_an_error_in_the_app_reaches_the_server_and_nothing_is_sent():
    def app(environ, start_response):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _serve(app, body=b"{}", headers=[("content-length", "2")])


def test_a_client_gone_before_its_body_arrived_gets_no_answer():
    calls = []

    def app(environ, start_response):  # pragma: no cover - must not run
        calls.append(environ)
        return []

    sent = _serve(app, body=None, headers=[("content-length", "10")])  # announces 10 bytes, sends none, leaves

    assert sent == [] and calls == []
