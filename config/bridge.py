"""Django's WSGI handler under the ASGI server with one hand-off between threads per request: the
body is read on the event loop, Django runs start to end on a pool thread, and the whole response
is written from the loop. Streaming responses, and bodies without a declared length or over
Django's limit, go through a2wsgi unchanged."""

from __future__ import annotations

import asyncio
import contextvars
import io
import itertools
from collections.abc import Iterable

from a2wsgi import WSGIMiddleware
from a2wsgi.wsgi import build_environ


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
        answer = await loop.run_in_executor(self.executor, context.run, self.respond, environ, loop, send)
        if answer is not None:  # None: a streaming response, already sent from the thread
            start, body = answer
            await send(start)
            await send({"type": "http.response.body", "body": body})

    def respond(self, environ: dict, loop: asyncio.AbstractEventLoop, send) -> tuple[dict, bytes] | None:
        """Runs on a pool thread: the app's response start and whole body, or, for a streaming
        response, None once this thread has sent it chunk by chunk (each send awaited on the loop).
        A streaming response is iterated and closed on the thread that made it, as under a WSGI
        server: its generator may read through this thread's database connection (the
        inspector's exports iterate a queryset)."""
        started: list = []
        body: list[bytes] = []

        def start_response(status: str, headers: list, exc_info=None):
            if exc_info is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [status, headers]
            return body.append

        iterable: Iterable[bytes] = self.app(environ, start_response)
        try:
            if not getattr(iterable, "streaming", False):
                body.extend(iterable)
                return _start(*started), b"".join(body)

            def sent(message: dict) -> None:
                asyncio.run_coroutine_threadsafe(send(message), loop).result()

            if not started:
                raise RuntimeError("the WSGI app returned a streaming response before starting it")
            sent(_start(*started))
            for chunk in itertools.chain(body, iterable):
                sent({"type": "http.response.body", "body": chunk, "more_body": True})
            sent({"type": "http.response.body", "body": b""})
            return None
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()


def _start(status: str, headers: list[tuple[str, str]]) -> dict:
    return {"type": "http.response.start", "status": int(status.split(" ", 1)[0]),
            "headers": [(name.strip().encode("latin1").lower(), value.strip().encode("latin1"))
                        for name, value in headers]}
