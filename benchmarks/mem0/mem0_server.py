"""Mem0 OSS over HTTP for ``scripts/bench http --mem0``: a minimal HTTP wrapper of its ``Memory``
class, run in Mem0's own virtualenv. The REST server Mem0's repository documents (``server/``, a
FastAPI application around one ``Memory``) is not on the package registries; this serves the two
routes the load uses with the same request shapes, the same way (FastAPI's synchronous handlers on
its thread pool, under uvicorn):

- ``POST /memories`` ``{"messages": [{"role", "content"}], "user_id", "metadata"}`` -> ``Memory.add``,
  with ``infer=False`` (no LLM here: the text is stored verbatim, as Engram stores a turn);
- ``POST /search`` ``{"query", "user_id", "top_k"}`` -> ``Memory.search`` with the user's filter.

Configured from the environment (``MEM0_BENCH_*``: the Elasticsearch node, the collection, the
OpenAI-compatible embeddings endpoint). Imports nothing from Engram.

    uvicorn mem0_server:app --workers 2     # from benchmarks/mem0, in Mem0's virtualenv
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"  # before mem0 is imported: it reads this at import time

from fastapi import FastAPI
from pydantic import BaseModel


def _memory():
    from mem0 import Memory

    env = os.environ
    # One history database per worker process: Mem0's is a SQLite file.
    home = tempfile.mkdtemp(prefix="mem0-server-")
    return Memory.from_config({
        "vector_store": {"provider": "elasticsearch", "config": {
            "collection_name": env["MEM0_BENCH_COLLECTION"], "host": env["MEM0_BENCH_ES_HOST"],
            "port": int(env["MEM0_BENCH_ES_PORT"]), "user": env["MEM0_BENCH_ES_USER"],
            "password": env["MEM0_BENCH_ES_PASSWORD"], "embedding_model_dims": int(env["MEM0_BENCH_DIMS"]),
            "verify_certs": False}},
        "embedder": {"provider": "openai", "config": {
            "model": env["MEM0_BENCH_MODEL"], "api_key": "unused-local", "openai_base_url": env["MEM0_BENCH_EMBED_URL"],
            "embedding_dims": int(env["MEM0_BENCH_DIMS"])}},
        # Memory() builds an LLM client even when nothing calls it: the local endpoint counts any use.
        "llm": {"provider": "openai", "config": {
            "model": "no-llm", "api_key": "unused-local", "openai_base_url": env["MEM0_BENCH_EMBED_URL"]}},
        "history_db_path": os.path.join(home, "history.db"),
    })


try:
    MEMORY = _memory()
except Exception as exc:  # the other worker created the index first: use it
    if "resource_already_exists" not in str(exc):
        raise
    MEMORY = _memory()
app = FastAPI(title="Mem0 (minimal HTTP wrapper of Memory)")


class Message(BaseModel):
    role: str
    content: str


class MemoryCreate(BaseModel):
    messages: list[Message]
    user_id: str
    metadata: dict[str, Any] | None = None


class SearchRequest(BaseModel):
    query: str
    user_id: str
    top_k: int = 10


@app.post("/memories")
def add_memory(body: MemoryCreate) -> dict[str, Any]:
    return MEMORY.add([m.model_dump() for m in body.messages], user_id=body.user_id, metadata=body.metadata,
                      infer=False)


@app.post("/search")
def search_memories(body: SearchRequest) -> dict[str, Any]:
    return MEMORY.search(body.query, top_k=body.top_k, filters={"user_id": body.user_id})
