"""A local server speaking the OpenAI chat-completions protocol, for the llm extractor's contract
tests and the eval's: it answers POST /v1/chat/completions from a script, or from ``respond``
(a function of the request body) when the script is empty."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLlm:
    """Answers POST /v1/chat/completions from a script: each item is (status, body | None, delay);
    with the script empty, ``respond(body)`` answers 200 with the completion it returns."""

    def __init__(self):
        self.script: list[tuple[int, object, float]] = []
        self.respond: Callable[[dict], dict] | None = None
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if fake.script:
                    status, answer, delay = fake.script.pop(0)
                elif fake.respond is not None:
                    status, answer, delay = 200, fake.respond(body), 0
                else:
                    status, answer, delay = 500, {"error": "no script"}, 0
                time.sleep(delay)
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    if status == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out first

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def completion(self, content: str | None, *, prompt_tokens: int = 100, completion_tokens: int = 20,
                   finish_reason: str = "stop", refusal: str | None = None):
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": "test-model",
                "choices": [{"index": 0, "finish_reason": finish_reason,
                             "message": {"role": "assistant", "content": content,
                                         **({"refusal": refusal} if refusal else {})}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}
