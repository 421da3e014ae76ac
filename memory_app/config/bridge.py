"""Django's WSGI handler under the ASGI server, with one hand-off between threads per request.

a2wsgi (``WSGIMiddleware``) runs the WSGI app on a pool thread and streams: the thread reads the
request body through the event loop, and hands the response's start, each body chunk and its end
to the loop, waiting for each (four round trips between the thread and the loop for a JSON
request). Under 8 HTTP clients those hand-offs were about a seventh of the server's Python time
(py-spy, README "Under concurrent HTTP load"). Engram's API and inspector answer with bodies
built in memory, so this bridge reads a request's body on the loop first, runs Django start to
end on a pool thread, and writes the whole response from the loop: one hand-off. A streaming
response (the inspector's exports, WhiteNoise's files) is then sent chunk by chunk, each chunk
pulled on a pool thread. A request whose body has no declared length or is larger than Django
accepts is passed to a2wsgi unchanged, so Django still refuses it without it being read first.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
from collections.abc import Iterable

from a2wsgi import WSGIMiddleware
from a2wsgi.wsgi import build_environ

_END = object()


def declared_length(scope: dict) -> int | None:
    """The request body's length from its headers (0 when it declares none and is not chunked);
    None when it cannot be known up front (chunked transfer, an unreadable Content-Length)."""
    length = 0
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
    return length if length >= 0 else None


class BufferedWSGIMiddleware:
    """ASGI → WSGI for apps whose requests and responses fit in memory (see the module doc)."""

    def __init__(self, app, *, workers: int, max_body_bytes: int) -> None:
        self.app = app
        self.streaming = WSGIMiddleware(app, workers=workers)
        self.executor = self.streaming.executor
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        length = declared_length(scope) if scope["type"] == "http" else None
        if length is None or length > self.max_body_bytes:
            return await self.streaming(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        environ = build_environ(scope, io.BytesIO(b"".join(chunks)))
        loop, context = asyncio.get_running_loop(), contextvars.copy_context()
        status, headers, body, stream = await loop.run_in_executor(self.executor, context.run, self.respond, environ)
        await send({"type": "http.response.start", "status": int(status.split(" ", 1)[0]),
                    "headers": [(name.strip().encode("latin1").lower(), value.strip().encode("latin1"))
                                for name, value in headers]})
        if stream is None:
            await send({"type": "http.response.body", "body": b"".join(body)})
            return
        try:
            for chunk in body:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            chunks = iter(stream)
            while (chunk := await loop.run_in_executor(self.executor, context.run, next, chunks, _END)) is not _END:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await loop.run_in_executor(self.executor, context.run, _close, stream)

    def respond(self, environ: dict) -> tuple[str, list, list[bytes], Iterable[bytes] | None]:
        """Runs on a pool thread: the app's status, headers, the body written so far and, for a
        streaming response, the response itself, to be iterated and closed by the caller."""
        started: list = []
        body: list[bytes] = []

        def start_response(status: str, headers: list, exc_info=None):
            if exc_info is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [status, headers]
            return body.append

        iterable: Iterable[bytes] = self.app(environ, start_response)
        if getattr(iterable, "streaming", False):
            if not started:
                _close(iterable)
                raise RuntimeError("the WSGI app returned a streaming response before starting it")
            return started[0], started[1], body, iterable
        try:
            body.extend(iterable)
        finally:
            _close(iterable)
        return started[0], started[1], body, None


def _close(iterable) -> None:
    close = getattr(iterable, "close", None)
    if close is not None:
        close()
