"""The Mem0 half of the ``peers`` suite, run in Mem0's own virtualenv (.engram/mem0-venv).

Reads a job (JSON on stdin) prepared by benchmarks/peers.py from Engram's LoCoMo parsing:
the Elasticsearch node and credential, the embeddings endpoint, and per user the turns (text,
date, ids) and questions. Through Mem0's own public API (``mem0.Memory``): adds every turn with
``infer=False`` one call per turn (Mem0 has no bulk add; a list of messages is also embedded and
inserted one by one), then asks every question with ``search`` (top_k, the user's filter), then
tries to reach user A's memories as user B. Writes the timings, the ranked turn ids and what
each isolation attempt returned as JSON on stdout. Imports nothing from Engram.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from importlib.metadata import version
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"  # before mem0 is imported: it reads this at import time


def log(msg: str) -> None:
    print(f"[mem0] {msg}", file=sys.stderr, flush=True)


def build_memory(job: dict[str, Any], home: str):
    os.environ.setdefault("MEM0_DIR", home)
    from mem0 import Memory

    es = job["es"]
    config = {
        "vector_store": {"provider": "elasticsearch", "config": {
            "collection_name": job["collection"], "host": es["host"], "port": es["port"],
            "user": es["user"], "password": es["password"], "embedding_model_dims": job["dims"],
            "verify_certs": False}},
        "embedder": {"provider": "openai", "config": {
            "model": job["model"], "api_key": "unused-local", "openai_base_url": job["embed_url"],
            "embedding_dims": job["dims"]}},
        # Memory() builds an LLM client even when nothing will call it: point it at the local
        # endpoint, which answers chat completions with a 404 and counts every request.
        "llm": {"provider": "openai", "config": {
            "model": "no-llm", "api_key": "unused-local", "openai_base_url": job["embed_url"]}},
        "history_db_path": os.path.join(home, "history.db"),
    }
    return Memory.from_config(config)


def add_all(memory, users: list[dict[str, Any]]) -> tuple[list[float], float, dict[str, str]]:
    """Every turn, one ``add`` call each; returns per-call ms, the wall time, turn id → memory id."""
    add_ms: list[float] = []
    memory_ids: dict[str, str] = {}
    started = time.perf_counter()
    for user in users:
        for turn in user["turns"]:
            t0 = time.perf_counter()
            result = memory.add([{"role": "user", "content": turn["text"]}], user_id=user["user_id"], infer=False,
                                metadata={"turn_id": turn["id"], "dia_id": turn["dia_id"],
                                          "occurred_at": turn["occurred_at"], "session_id": turn["session_id"]})
            add_ms.append((time.perf_counter() - t0) * 1000)
            added = result["results"]
            if len(added) != 1 or added[0].get("event") != "ADD":
                raise RuntimeError(f"Mem0 add of {turn['id']} returned {result!r}")
            memory_ids[turn["id"]] = added[0]["id"]
        log(f"added {len(user['turns'])} turns for {user['user_id']}")
    return add_ms, time.perf_counter() - started, memory_ids


def _turn_ids(results: list[dict[str, Any]]) -> list[str]:
    return [(r.get("metadata") or {}).get("turn_id", f"?{r['id']}") for r in results]


def search_all(memory, users: list[dict[str, Any]], *, k: int) -> tuple[list[float], dict[str, list[str]], int]:
    search_ms: list[float] = []
    ranked: dict[str, list[str]] = {}
    short = 0
    for user in users:
        for q in user["questions"]:
            t0 = time.perf_counter()
            found = memory.search(q["question"], top_k=k, filters={"user_id": user["user_id"]})["results"]
            search_ms.append((time.perf_counter() - t0) * 1000)
            ranked[q["id"]] = _turn_ids(found)
            short += len(found) < k
    return search_ms, ranked, short


def _attempt(name: str, call, judge) -> dict[str, Any]:
    try:
        outcome = judge(call())
    except Exception as exc:  # noqa: BLE001 - the point is to report exactly what Mem0 did
        outcome = {"served_foreign": False, "result": f"raised {type(exc).__name__}: {str(exc)[:200]}"}
    return {"attempt": name, **outcome}


def isolation(memory, job: dict[str, Any], memory_ids: dict[str, str]) -> list[dict[str, Any]]:
    """User B (acting for itself) tries to reach user A's memories through Mem0's public API."""
    a, b = job["users"][0], job["users"][1]
    a_ids = {t["id"] for t in a["turns"]}
    probe = a["turns"][len(a["turns"]) // 2]
    probe_id = memory_ids[probe["id"]]

    def count_a(results):
        n = sum(t in a_ids for t in _turn_ids(results["results"]))
        return {"served_foreign": n > 0, "result": f"{n} of {len(results['results'])} hits are A's memories"}

    def fetched(item):
        if item is None:
            return {"served_foreign": False, "result": "None (not found)"}
        return {"served_foreign": item.get("user_id") == a["user_id"],
                "result": f"A's memory returned (user_id={item.get('user_id')!r}, text {item.get('memory', '')[:40]!r}...)"}

    attempts = [
        _attempt("search A's verbatim turn with filters={'user_id': B}",
                 lambda: memory.search(probe["text"], top_k=10, filters={"user_id": b["user_id"]}), count_a),
        _attempt("search as B but naming filters={'user_id': A}",
                 lambda: memory.search(probe["text"], top_k=10, filters={"user_id": a["user_id"]}), count_a),
        _attempt("get_all(filters={'user_id': A}, top_k=1000) as B",
                 lambda: memory.get_all(filters={"user_id": a["user_id"]}, top_k=1000), count_a),
        _attempt("get(A's memory id) as B", lambda: memory.get(probe_id), fetched),
        _attempt("history(A's memory id) as B", lambda: memory.history(probe_id),
                 lambda h: {"served_foreign": bool(h), "result": f"{len(h)} history rows of A's memory, "
                                                                 f"text {(h[0].get('new_memory') or '')[:40]!r}..."
                            if h else "no rows"}),
        _attempt("search with filters={'user_id': '*'} (documented wildcard)",
                 lambda: memory.search(probe["text"], top_k=10, filters={"user_id": "*"}), count_a),
        _attempt("search with filters={'user_id': B, 'OR': [{'user_id': A}]}",
                 lambda: memory.search(probe["text"], top_k=10,
                                       filters={"user_id": b["user_id"], "OR": [{"user_id": a["user_id"]}]}), count_a),
    ]
    # Writes by id: on a canary memory of A's (the evaluated memories stay untouched).
    canary = memory.add([{"role": "user", "content": "Canary: A's locker code is 4711."}], user_id=a["user_id"],
                        infer=False, metadata={"turn_id": "canary"})["results"][0]["id"]

    def updated(_):
        item = memory.get(canary)
        changed = item is not None and item["memory"].startswith("overwritten by B")
        return {"served_foreign": changed, "result": "A's memory text replaced" if changed else f"unchanged: {item!r}"}

    def deleted(_):
        gone = memory.get(canary) is None
        return {"served_foreign": gone, "result": "A's memory deleted" if gone else "still there"}

    attempts.append(_attempt("update(A's memory id, 'overwritten by B') as B",
                             lambda: memory.update(canary, "overwritten by B"), updated))
    attempts.append(_attempt("delete(A's memory id) as B", lambda: memory.delete(canary), deleted))
    # Underneath: the one Elasticsearch credential Mem0 is configured with reads every user.
    es = memory.vector_store.client
    users_seen = es.search(index=job["collection"], size=0, aggs={
        "users": {"terms": {"field": "metadata.user_id", "size": 10}}})["aggregations"]["users"]["buckets"]
    attempts.append({"attempt": "Mem0's own Elasticsearch credential (vector_store.client), match_all",
                     "served_foreign": len(users_seen) > 1,
                     "result": "sees " + ", ".join(f"{u['key']}: {u['doc_count']}" for u in users_seen)})
    return attempts


def main() -> None:
    job = json.load(sys.stdin)
    with tempfile.TemporaryDirectory(prefix="mem0-home-") as home:
        memory = build_memory(job, home)
        es = memory.vector_store.client
        try:
            for n in range(job["warmup"]):  # embedder connection, ES caches: untimed, not the questions
                memory.add([{"role": "user", "content": f"warm-up turn {n}"}], user_id="warmup", infer=False)
            es.indices.refresh(index=job["collection"])
            for n in range(job["warmup"]):
                memory.search(f"warm-up question {n}?", top_k=job["k"], filters={"user_id": "warmup"})
            # The warm-up memories stay (under their own user_id, outside every search below):
            # delete_all right after adds fails on memories its listing sees but get does not yet.
            add_ms, ingest_s, memory_ids = add_all(memory, job["users"])
            # Mem0's add returns before its document is searchable (index refresh interval 1 s);
            # refresh once, untimed, so every question sees every turn.
            es.indices.refresh(index=job["collection"])
            search_ms, ranked, short = search_all(memory, job["users"], k=job["k"])
            attempts = isolation(memory, job, memory_ids)
        finally:
            if not job.get("keep"):
                es.indices.delete(index=job["collection"], ignore_unavailable=True)
            memory.close()
    json.dump({"mem0ai": version("mem0ai"), "elasticsearch_client": version("elasticsearch"),
               "openai_client": version("openai"), "add_ms": add_ms, "ingest_s": ingest_s, "search_ms": search_ms,
               "ranked": ranked, "short_results": short, "isolation": attempts}, sys.stdout)


if __name__ == "__main__":
    main()
