"""Engram and Mem0 OSS side by side: one Elasticsearch node, one embedder, one data set.

    scripts/bench peers ../shared/data/locomo-dev/26.json ../shared/data/locomo-dev/30.json [--runs 3] [--writes N]

Engram's all-MiniLM-L6-v2 is served on a local OpenAI-compatible endpoint for Mem0's ``openai``
embedder, so both systems index and search the very same vectors; every request to it is
counted and the run fails if Mem0 asked for anything but embeddings (no LLM is ever called).
The conversations are parsed as ``memory_eval --locomo`` parses them (one conversation, one
end-user; R@k: the share of a question's evidence turns in the top k, categories 1-4).

- Engram: each conversation in one bulk import, every question through ``memory_recall`` (k=10,
  episodic, the end-user's own key, the query-vector cache emptied first); then every turn (or
  the first ``--writes``) written one at a time, as a turn writes it, into new end-users, timed
  and scored the same way; then end-user B tries to reach A's memories over the REST API and
  with B's own Elasticsearch key.
- Mem0 (benchmarks/mem0/mem0_side.py in its own virtualenv, which ``scripts/bench peers`` makes):
  ``Memory.add(..., infer=False)`` per turn, ``Memory.search(top_k=10, filters={"user_id"})``
  per question, then B tries to reach A's memories through Mem0's own API.

``--runs`` rounds alternate which system goes first, on emptied indices; figures are medians.
Each system first gets the same untimed writes and searches on throwaway text.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.test import Client

from benchmarks import engram
from benchmarks.harness import ROOT, log, percentiles
from benchmarks.http_load import mem0_python

MEM0_SIDE = ROOT / "benchmarks" / "mem0" / "mem0_side.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, help="LoCoMo conversation files (the first is end-user A)")
    parser.add_argument("--runs", type=int, help="default 3; --quick 1")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--warmup", type=int, help="untimed writes and searches per system and run (default 20)")
    parser.add_argument("--first", choices=["engram", "mem0"], default="engram", help="which system runs first")
    parser.add_argument("--writes", type=int, help="Engram turns written one at a time per run "
                                                   "(default: all, and then scored too; --quick 40)")
    parser.add_argument("--mem0-python", type=Path, default=Path(mem0_python()))


# ---------------------------------------------------------------- data


def load(paths: list[Path]) -> list[dict[str, Any]]:
    users = []
    for path in paths:
        data = json.loads(path.read_text())
        conversation = path.stem
        episodes = engram.locomo_episodes(conversation, data)
        questions = []
        for n, q in enumerate(data["qa"]):
            expected = engram.locomo_evidence(conversation, q.get("evidence") or [])
            if q.get("category") in (1, 2, 3, 4) and expected:
                questions.append({"id": f"{conversation}-q{n}", "question": q["question"], "expected": expected})
        users.append({"conversation": conversation, "user_id": f"conv-{conversation}", "episodes": episodes,
                      "now": max(e["occurred_at"] for e in episodes), "questions": questions})
    return users


def recall_at(users: list[dict[str, Any]], ranked: dict[str, list[str]], ks: tuple[int, ...] = (5, 10)) -> dict:
    """R@k over every question: the mean share of its evidence turns among the first k ranked."""
    shares = {k: [len(set(ranked[q["id"]][:k]) & set(q["expected"])) / len(q["expected"])
                  for u in users for q in u["questions"]] for k in ks}
    return {f"R@{k}": round(statistics.fmean(v), 4) for k, v in shares.items()} | {"n": len(shares[ks[0]])}


# ---------------------------------------------------------------- Engram


def engram_run(users: list[dict[str, Any]], *, k: int, warmup: int, writes: int | None) -> dict[str, Any]:
    tenant = engram.tenant_create(slug=f"peers-{uuid.uuid4().hex[:6]}", name="Engram vs Mem0")
    warm = engram.subject_get_or_create(tenant=tenant, external_id="warmup", actor="bench")
    for n in range(warmup):
        engram.write_submit(tenant=tenant, external_id="warmup", operation="episode", actor="bench",
                            payload={"text": f"warm-up turn {n}"}, defer_refresh=True)
    for n in range(warmup):
        engram.new_question()
        engram.memory_recall(subject=warm, query=f"warm-up question {n}?", k=k, types=["episodic"])

    # 1. The memory_eval --locomo path: one import per conversation, then the questions.
    subjects, import_s, stored = {}, 0.0, {}
    for u in users:
        subjects[u["user_id"]] = engram.subject_get_or_create(tenant=tenant, external_id=u["user_id"], actor="bench")
        started = time.perf_counter()
        submitted = engram.write_submit(tenant=tenant, external_id=u["user_id"], operation="import", actor="bench",
                                        payload={"episodes": [{**e, "occurred_at": e["occurred_at"].isoformat()}
                                                              for e in u["episodes"]]})
        import_s += time.perf_counter() - started
        stored[u["user_id"]] = submitted.result["ids"]
    search_ms, ranked = [], {}
    for u in users:
        for q in u["questions"]:
            engram.new_question()
            started = time.perf_counter()
            hits = engram.memory_recall(subject=subjects[u["user_id"]], query=q["question"], k=k, types=["episodic"],
                                        now=u["now"])
            search_ms.append((time.perf_counter() - started) * 1000)
            ranked[q["id"]] = [h.get("client_id") or h["id"] for h in hits]  # imported: the turn's own id
    log(f"  engram: imported in {import_s:.1f} s, {len(search_ms)} questions")

    # 2. Every turn (or the first ``writes``, shared between the conversations) one write at a
    # time, as POST /turns writes it, into new end-users.
    add_ms, by_write, write_s = [], {}, 0.0
    per_user = -(-writes // len(users)) if writes else None
    for u in users:
        external_id = f"{u['user_id']}-turns"
        started_all = time.perf_counter()
        for e in u["episodes"][:per_user]:
            started = time.perf_counter()
            submitted = engram.write_submit(tenant=tenant, external_id=external_id, operation="episode", actor="bench",
                                            payload={"text": e["text"], "occurred_at": e["occurred_at"].isoformat(),
                                                     "session_id": e["session_id"], "metadata": e["metadata"]},
                                            defer_refresh=True)
            add_ms.append((time.perf_counter() - started) * 1000)
            by_write[submitted.memory_id] = e["id"]
        write_s += time.perf_counter() - started_all
    ranked_writes = {}
    for u in users if per_user is None else []:  # scored only when every turn was written
        written = engram.subject_get(tenant=tenant, external_id=f"{u['user_id']}-turns")
        for q in u["questions"]:
            hits = engram.memory_recall(subject=written, query=q["question"], k=k, types=["episodic"], now=u["now"])
            ranked_writes[q["id"]] = [by_write.get(h["id"], h["id"]) for h in hits]
    log(f"  engram: {len(add_ms)} turn writes in {write_s:.1f} s")
    return {"import_s": import_s, "search_ms": search_ms, "ranked": ranked, "add_ms": add_ms, "write_s": write_s,
            "ranked_writes": ranked_writes, "isolation": engram_isolation(tenant, users, stored)}


def engram_isolation(tenant: engram.Tenant, users: list[dict[str, Any]], stored: dict[str, list[str]]) -> list[dict]:
    """End-user B (the second conversation) tries to reach end-user A's memories, as B's agent."""
    a, b = users[0]["user_id"], users[1]["user_id"]
    probe_n = len(users[0]["episodes"]) // 2
    probe_text, probe_id, a_ids = users[0]["episodes"][probe_n]["text"], stored[a][probe_n], set(stored[a])
    token = engram.token_create(tenant)
    other = engram.tenant_create(slug=f"peers-other-{uuid.uuid4().hex[:6]}", name="Other tenant")
    other_token = engram.token_create(other)
    client = Client(HTTP_HOST="127.0.0.1")
    logging.getLogger("django.request").setLevel(logging.ERROR)  # the 404s below are the point

    def api(method: str, path: str, *, bearer: str = token, **kwargs):
        return getattr(client, method)(f"/api/v1/subjects/{path}", HTTP_AUTHORIZATION=f"Bearer {bearer}", **kwargs)

    def refused(response) -> dict:
        return {"served_foreign": response.status_code < 300, "result": f"HTTP {response.status_code}"}

    assert api("get", f"{a}/memories/{probe_id}").status_code == 200  # the id is right: A's agent reads it
    recalled = api("post", f"{b}/recall", data={"query": probe_text, "k": 10, "include_superseded": True},
                   content_type="application/json").json()["memories"]
    foreign = sum(m["id"] in a_ids for m in recalled)
    attempts = [
        {"attempt": "recall A's verbatim turn as B (REST)", "served_foreign": foreign > 0,
         "result": f"{foreign} of {len(recalled)} hits are A's memories"},
        {"attempt": "GET A's memory id as B (REST)", **refused(api("get", f"{b}/memories/{probe_id}"))},
        {"attempt": "GET the history of A's memory id as B (REST)",
         **refused(api("get", f"{b}/memories/{probe_id}/history"))},
        {"attempt": "DELETE (forget) A's memory id as B (REST)",
         **refused(api("delete", f"{b}/memories/{probe_id}?reason=isolation+attempt"))},
    ]
    still = api("get", f"{a}/memories/{probe_id}").status_code == 200
    attempts.append({"attempt": "A's memory after B's forget attempt", "served_foreign": not still,
                     "result": "still there, unchanged" if still else "GONE"})
    # B's own Elasticsearch API key (DLS), asked directly for A's documents.
    subject_a = engram.subject_get(tenant=tenant, external_id=a)
    subject_b = engram.subject_get(tenant=tenant, external_id=b)
    index = engram.alias_name(engram.MemoryType.EPISODIC, prefix=engram.index_prefix_for(tenant=tenant))
    found = engram.subject_es_client(subject=subject_b).search(index=index, size=10, query={"bool": {"should": [
        {"term": {"user_id": str(subject_a.user_id)}}, {"ids": {"values": [probe_id]}}]}})["hits"]["total"]["value"]
    attempts.append({"attempt": "B's own ES key: search user_id == A or ids == [A's id]",
                     "served_foreign": found > 0, "result": f"{found} hits"})
    # Another tenant's agent token naming A (A's own tenant's token is the control above).
    attempts.append({"attempt": "GET /api/v1/subjects/A/memories/<id> with another tenant's agent token",
                     **refused(api("get", f"{a}/memories/{probe_id}", bearer=other_token))})
    return attempts


# ---------------------------------------------------------------- Mem0


def mem0_run(users: list[dict[str, Any]], *, python: Path, k: int, warmup: int, embed_url: str,
             model: str) -> dict[str, Any]:
    host, port = os.environ["ES_URL"].rsplit(":", 1)
    job = {
        # Mem0 takes one credential for all its users; Engram's admin user is the one whose role
        # may create the engram* index Mem0 writes to.
        "es": {"host": host, "port": int(port), "user": os.environ["ES_ADMIN_USERNAME"],
               "password": os.environ["ES_ADMIN_PASSWORD"]},
        "collection": f"{os.environ['ES_INDEX_PREFIX']}-mem0-{uuid.uuid4().hex[:8]}", "embed_url": embed_url,
        "model": model, "dims": 384, "k": k, "warmup": warmup,
        "users": [{"user_id": u["user_id"],
                   "turns": [{"id": e["id"], "text": e["text"], "dia_id": e["metadata"]["dia_id"],
                              "occurred_at": e["occurred_at"].isoformat(), "session_id": e["session_id"]}
                             for e in u["episodes"]],
                   "questions": [{"id": q["id"], "question": q["question"]} for q in u["questions"]]}
                  for u in users],
    }
    done = subprocess.run([str(python), str(MEM0_SIDE)], input=json.dumps(job), capture_output=True, text=True,
                          env={**os.environ, "MEM0_TELEMETRY": "False"})
    sys.stderr.write(done.stderr[-4000:] if done.returncode else "".join(
        line + "\n" for line in done.stderr.splitlines() if line.startswith("[mem0]")))
    if done.returncode:
        raise SystemExit(f"the Mem0 side failed (exit {done.returncode}); its stderr is above")
    return json.loads(done.stdout)


# ---------------------------------------------------------------- the suite


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    if len(args.paths) < 2:
        raise SystemExit("give at least two conversations (the isolation attempts need two end-users)")
    if not args.mem0_python.exists():
        raise SystemExit(f"no Mem0 virtualenv at {args.mem0_python} (scripts/bench peers makes it)")
    runs = args.runs or (1 if args.quick else 3)
    warmup = args.warmup if args.warmup is not None else (5 if args.quick else 20)
    writes = args.writes if args.writes is not None else (40 if args.quick else 0)
    users = load(args.paths)
    data = {"conversations": [u["conversation"] for u in users], "turns": sum(len(u["episodes"]) for u in users),
            "k": args.k, "engram": [], "mem0": []}
    engram.embedder_load()
    # A separate instance of Engram's embedder, served, with no query cache.
    with engram.EmbeddingsServer(engram.MiniLMEmbedder(query_cache_size=0)) as server:
        server.embedder.embed_documents(["load the weights"])
        for n in range(runs):
            if n:
                engram.indices_reset()
            order = ("engram", "mem0") if (n % 2 == 0) == (args.first == "engram") else ("mem0", "engram")
            for system in order:
                log(f"run {n + 1}/{runs}: {system}")
                if system == "engram":
                    result = engram_run(users, k=args.k, warmup=warmup, writes=writes)
                else:
                    result = mem0_run(users, python=args.mem0_python, k=args.k, warmup=warmup, embed_url=server.url,
                                      model=server.model)
                    data["mem0_versions"] = {key: result[key] for key in ("mem0ai", "elasticsearch_client",
                                                                          "openai_client")}
                result["recall"] = recall_at(users, result.pop("ranked"))
                if result.get("ranked_writes"):
                    result["recall_writes"] = recall_at(users, result["ranked_writes"])
                result.pop("ranked_writes", None)
                result["search"] = percentiles(result.pop("search_ms"), (50, 95))
                result["add"] = percentiles(result.pop("add_ms"), (50, 95))
                data[system].append(result)
                save(data)
        calls = server.calls_snapshot()
    data["embedding_calls"] = calls
    other = {path: n for path, n in calls.items() if path != "POST /v1/embeddings"}
    if other:
        raise SystemExit(f"Mem0 asked the local endpoint for more than embeddings: {other}")
    return data


def markdown(data: dict) -> str:
    e_runs, m_runs = data["engram"], data["mem0"]
    med = statistics.median

    def row(label: str, pick: Callable[[dict], float], fmt: str = "{:.3f}", better: str = "high") -> str:
        e, m = med(pick(r) for r in e_runs), med(pick(r) for r in m_runs)
        lead = "Engram" if (e > m if better == "high" else e < m) else "Mem0"
        return f"| {label} | {fmt.format(e)} | {fmt.format(m)} | {lead} |"

    if not e_runs or not m_runs:
        return "(a run of each system is needed for the table)"
    turns, writes = data["turns"], [r for r in e_runs if "recall_writes" in r]
    versions = data.get("mem0_versions", {})
    runs = f"{len(e_runs)} runs, medians" if len(e_runs) > 1 else "1 run"
    lines = [f"Mem0 OSS {versions.get('mem0ai', '?')} (elasticsearch-py {versions.get('elasticsearch_client', '?')}); "
             f"{runs}; conversations {', '.join(data['conversations'])}; embeddings endpoint: "
             f"{data.get('embedding_calls', {}).get('POST /v1/embeddings', '?')} requests, no other.", "",
             f"| {e_runs[0]['recall']['n']} questions, {turns} turns | Engram | Mem0 OSS | lead |",
             "|---|---:|---:|---|",
             row("R@5 (evidence turns in the top 5)", lambda r: r["recall"]["R@5"]),
             row(f"R@{data['k']}", lambda r: r["recall"][f"R@{data['k']}"])]
    if writes:
        at_k = f"R@{data['k']}"
        lines.append(f"| R@5 / {at_k}, Engram's turns written one by one instead of imported | "
                     f"{med(r['recall_writes']['R@5'] for r in writes):.3f} / "
                     f"{med(r['recall_writes'][at_k] for r in writes):.3f} | (as above) | |")
    lines += [row("search p50 ms", lambda r: r["search"]["p50"], "{:.1f}", "low"),
              row("search p95 ms", lambda r: r["search"]["p95"], "{:.1f}", "low"),
              row("add one turn p50 ms (Engram: a turn's write; Mem0: add)", lambda r: r["add"]["p50"], "{:.1f}",
                  "low"),
              row("add one turn p95 ms", lambda r: r["add"]["p95"], "{:.1f}", "low"),
              row(f"ingest all {turns} turns, s (Engram: bulk import; Mem0: add per turn)",
                  lambda r: r.get("import_s", r.get("ingest_s")), "{:.1f}", "low")]
    if writes:
        lines.append(row(f"ingest all {turns} turns one call per turn, s",
                         lambda r: r.get("write_s", r.get("ingest_s")), "{:.1f}", "low"))
    lines += ["", "| system | B tries to reach A's memories by | result | A's data exposed? |", "|---|---|---|---|"]
    for system, attempts in (("Mem0", m_runs[-1]["isolation"]), ("Engram", e_runs[-1]["isolation"])):
        lines += [f"| {system} | {a['attempt']} | {a['result']} | {'**yes**' if a['served_foreign'] else 'no'} |"
                  for a in attempts]
    return "\n".join(lines)
