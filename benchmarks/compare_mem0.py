"""Engram and Mem0 OSS side by side, on one Elasticsearch node, with one embedder and one data set.

Run through ``scripts/compare-mem0 FILE.json ...`` (LoCoMo conversations; it starts the node and
Mem0's virtualenv). In one process (Engram's environment):

1. Engram's all-MiniLM-L6-v2 is served on a local OpenAI-compatible endpoint
   (memory_app/embeddings/server.py); Mem0's ``openai`` embedder points at it (384 dims), so
   both systems index and search with the very same vectors. Every request to it is counted:
   the run fails if Mem0 asked it for anything but embeddings (no LLM is ever called).
2. The same parsing for both (engram_eval.locomo: one conversation = one user, each turn
   verbatim as 'Speaker: text' with its session date; questions of categories 1-4 with their
   evidence turns; R@k = share of a question's evidence turns in the top k).
3. Engram, in throwaway indices: the ``memory_eval --locomo`` path (each conversation through
   the import service in one call, Engram derives each turn's context; questions through
   ``memory_recall`` with the end-user's own key, k=10, episodic); then every turn again, one
   ``episode_write`` per turn (the write half of ``POST /turns``) into fresh end-users, timed
   per call and scored the same way; then user B tries to reach user A's memories.
4. Mem0 (benchmarks/mem0/mem0_side.py, in .engram/mem0-venv): ``Memory.add(..., infer=False)``
   per turn, ``Memory.search(top_k=10, filters={"user_id"})`` per question, then user B tries to
   reach user A's memories through Mem0's own API.
5. ``--runs`` rounds (default 3), alternating which system goes first; medians of the per-run
   figures. Before timing, each system gets the same number of untimed warm-up writes and
   searches on throwaway text (never the questions). Engram's query-vector cache is emptied
   before every question, as Mem0 embeds every question afresh over HTTP.
Prints a Markdown table (the README's) and the isolation attempts; ``--json FILE`` keeps it all.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from engram_core.errors import NotFound  # noqa: E402
from engram_core.es.client import admin_client  # noqa: E402
from engram_core.es.schema import MemoryType, alias_name  # noqa: E402
from memory_app import services  # noqa: E402
from memory_app.embeddings import get_embedder  # noqa: E402
from memory_app.embeddings.minilm import MiniLMEmbedder  # noqa: E402
from memory_app.embeddings.server import EmbeddingsServer  # noqa: E402
from engram_eval.locomo import locomo_episodes, locomo_evidence  # noqa: E402
from engram_eval.retrieval import question_scores  # noqa: E402
from engram_eval.sandbox import sandbox  # noqa: E402
from memory_app.selectors import memory_get, memory_history, memory_recall  # noqa: E402
from memory_app.evaluation import (  # noqa: E402
    _question_scores,
    locomo_episodes,
    locomo_evidence,
    sandbox,
    scratch_slug,
)
from memory_app.recall import memory_recall  # noqa: E402
from memory_app.selectors import memory_get, memory_history  # noqa: E402
from tenants import services as tenant_services  # noqa: E402
from tenants.models import AgentToken, Tenant  # noqa: E402
from tenants.selectors import index_prefix_for  # noqa: E402

MEM0_PYTHON = ROOT / ".engram" / "mem0-venv" / "bin" / "python"
MEM0_SIDE = ROOT / "benchmarks" / "mem0" / "mem0_side.py"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(sorted(samples), n=100, method="inclusive")
    return {"n": len(samples), "p50": q[49], "p95": q[94]}


# ---------------------------------------------------------------- data (Engram's own parsing)


def load(paths: list[Path]) -> list[dict[str, Any]]:
    users = []
    for path in paths:
        data = json.loads(path.read_text())
        conversation = path.stem
        episodes = locomo_episodes(conversation, data)
        questions = []
        for n, q in enumerate(data["qa"]):
            if q.get("category") not in (1, 2, 3, 4):
                continue
            expected = locomo_evidence(conversation, q.get("evidence") or [])
            if expected:
                questions.append({"id": f"{conversation}-q{n}", "question": q["question"], "expected": expected})
        users.append({"conversation": conversation, "user_id": f"conv-{conversation}", "episodes": episodes,
                      "now": max(e["occurred_at"] for e in episodes), "questions": questions})
    return users


def recall_at(users: list[dict[str, Any]], ranked: dict[str, list[str]]) -> dict[str, float]:
    rows = [question_scores(ranked[q["id"]], q["expected"]) for u in users for q in u["questions"]]
    return {m: statistics.fmean(r[m] for r in rows) for m in ("R@5", "R@10")} | {"n": len(rows)}


# ---------------------------------------------------------------- Engram


def engram_run(users: list[dict[str, Any]], *, k: int, warmup: int, writes: int = 0) -> dict[str, Any]:
    embedder = get_embedder()
    embedder.embed_documents(["load the weights"])  # as the embeddings server's model is loaded
    clear_query_cache = getattr(getattr(embedder, "query_cache", None), "clear", lambda: None)
    with sandbox() as box:
        tenant = box.tenant(slug="vs-mem0", name="Engram vs Mem0")
        warm = tenant_services.subject_get_or_create(tenant=tenant, external_id="warmup", actor="compare")
        for n in range(warmup):
            services.episode_write(subject=warm, text=f"warm-up turn {n}", defer_refresh=True)
        for n in range(warmup):
            clear_query_cache()
            memory_recall(subject=warm, query=f"warm-up question {n}?", k=k, types=["episodic"])

        # 1. The memory_eval --locomo path: one import per conversation, then the questions.
        subjects, import_s = {}, 0.0
        for u in users:
            subjects[u["user_id"]] = subject = tenant_services.subject_get_or_create(
                tenant=tenant, external_id=u["user_id"], actor="compare")
            started = time.perf_counter()
            services.episodes_import(subject=subject, episodes=[
                {**e, "occurred_at": e["occurred_at"].isoformat()} for e in u["episodes"]])
            import_s += time.perf_counter() - started
        search_ms, ranked = [], {}
        for u in users:
            for q in u["questions"]:
                clear_query_cache()
                started = time.perf_counter()
                hits = memory_recall(subject=subjects[u["user_id"]], query=q["question"], k=k, types=["episodic"], now=u["now"])
                search_ms.append((time.perf_counter() - started) * 1000)
                ranked[q["id"]] = [h.get("client_id") or h["id"] for h in hits]  # imported: the turn's own id
        log(f"  engram: imported in {import_s:.1f}s, {len(search_ms)} questions")

        # 2. Every turn (or the first ``writes`` of all, shared between the conversations) one write
        # at a time (the write half of POST /turns), into fresh end-users.
        add_ms, by_write, write_s = [], {}, 0.0
        per_user = -(-writes // len(users)) if writes else None
        turn_subjects = {}
        for u in users:
            turn_subjects[u["user_id"]] = subject = tenant_services.subject_get_or_create(
                tenant=tenant, external_id=f"{u['user_id']}-turns", actor="compare")
            started_all = time.perf_counter()
            for e in u["episodes"][:per_user]:
                started = time.perf_counter()
                written = services.episode_write(subject=subject, text=e["text"], occurred_at=e["occurred_at"],
                                                 session_id=e["session_id"], metadata=e["metadata"],
                                                 defer_refresh=True)
                add_ms.append((time.perf_counter() - started) * 1000)
                by_write[written["id"]] = e["id"]
            write_s += time.perf_counter() - started_all
        ranked_writes = {}
        for u in users if per_user is None else []:  # scored only when every turn was written
            for q in u["questions"]:
                hits = memory_recall(subject=turn_subjects[u["user_id"]], query=q["question"], k=k,
                                     types=["episodic"], now=u["now"])
                ranked_writes[q["id"]] = [by_write.get(h["id"], h["id"]) for h in hits]
        log(f"  engram: {len(add_ms)} turn writes in {write_s:.1f}s")
        attempts = engram_isolation(tenant, subjects, users)
    return {"import_s": import_s, "search_ms": search_ms, "ranked": ranked, "add_ms": add_ms, "write_s": write_s,
            "ranked_writes": ranked_writes, "isolation": attempts}


def _attempt(name: str, call, judge) -> dict[str, Any]:
    try:
        outcome = judge(call())
    except NotFound as exc:
        outcome = {"served_foreign": False, "result": f"NotFound ({exc.code}): {exc.message}"}
    return {"attempt": name, **outcome}


def engram_isolation(tenant: Tenant, subjects: dict[str, Any], users: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """End-user B (conversation 2) tries to reach end-user A's (conversation 1) memories."""
    a, b = subjects[users[0]["user_id"]], subjects[users[1]["user_id"]]
    probe = users[0]["episodes"][len(users[0]["episodes"]) // 2]
    probe_id = services.client_memory_id(tenant_id=tenant.pk, external_id=a.external_id, client_id=probe["id"])
    a_ids = {services.client_memory_id(tenant_id=tenant.pk, external_id=a.external_id, client_id=e["id"])
             for e in users[0]["episodes"]}
    assert memory_get(subject=a, memory_id=probe_id)["id"] == probe_id  # the id is right: A reads it

    def count_a(hits):
        n = sum(h["id"] in a_ids for h in hits)
        return {"served_foreign": n > 0, "result": f"{n} of {len(hits)} hits are A's memories"}

    def served(item):
        return {"served_foreign": True, "result": f"served: {str(item)[:80]}"}

    attempts = [
        _attempt("recall A's verbatim turn as B (service, B's key)",
                 lambda: memory_recall(subject=b, query=probe["text"], k=10, include_superseded=True), count_a),
        _attempt("memory_get(A's memory id) as B", lambda: memory_get(subject=b, memory_id=probe_id), served),
        _attempt("memory_history(A's memory id) as B", lambda: memory_history(subject=b, memory_id=probe_id), served),
        _attempt("memory_forget(A's memory id) as B", lambda: services.memory_forget(
            subject=b, memory_id=probe_id, reason="isolation attempt", actor="compare"), served),
    ]
    still = memory_get(subject=a, memory_id=probe_id)["id"] == probe_id
    attempts.append({"attempt": "A's memory after B's forget attempt", "served_foreign": not still,
                     "result": "still there, unchanged" if still else "GONE"})
    # B's own Elasticsearch API key (DLS), asked directly for A's documents.
    es = tenant_services.subject_es_client(subject=b)
    index = alias_name(MemoryType.EPISODIC, prefix=index_prefix_for(tenant=tenant))
    found = es.search(index=index, size=10, query={"bool": {"should": [
        {"term": {"user_id": str(a.user_id)}}, {"ids": {"values": [probe_id]}}]}})["hits"]["total"]["value"]
    attempts.append({"attempt": "B's own ES key: search user_id == A or ids == [A's id]",
                     "served_foreign": found > 0, "result": f"{found} hits"})
    # Over the REST API: an agent token of another tenant naming A; the same request with A's
    # tenant's token as the control (so a 404 is isolation, not a broken request).
    other = Tenant.objects.create(slug=f"vs-mem0-other-{uuid.uuid4().hex[:6]}", name="Other tenant")
    url = reverse("api:memory", kwargs={"external_id": a.external_id, "memory_id": probe_id})
    codes = {}
    for who, t in (("own tenant", tenant), ("other tenant", other)):
        _, token = tenant_services.agent_token_create(tenant=t, name="compare", scopes=AgentToken.Scope.values,
                                                      actor="compare")
        codes[who] = Client().get(url, HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1").status_code
    attempts.append({"attempt": "GET /api/v1/subjects/A/memories/<id> with another tenant's agent token",
                     "served_foreign": codes["other tenant"] != 404,
                     "result": f"HTTP {codes['other tenant']} (A's own tenant's token: HTTP {codes['own tenant']})"})
    return attempts


# ---------------------------------------------------------------- Mem0


def mem0_run(users: list[dict[str, Any]], *, k: int, warmup: int, embed_url: str, model: str) -> dict[str, Any]:
    job = {
        "es": {"host": os.environ["ES_URL"].rsplit(":", 1)[0], "port": int(os.environ["ES_URL"].rsplit(":", 1)[1]),
               # Mem0 takes one credential for all its users; Engram's admin user is the one
               # whose role may create the engram* index Mem0 writes to.
               "user": os.environ["ES_ADMIN_USERNAME"], "password": os.environ["ES_ADMIN_PASSWORD"]},
        "collection": f"engram-vs-mem0-{uuid.uuid4().hex[:8]}", "embed_url": embed_url, "model": model, "dims": 384,
        "k": k, "warmup": warmup,
        "users": [{"user_id": u["user_id"],
                   "turns": [{"id": e["id"], "text": e["text"], "dia_id": e["metadata"]["dia_id"],
                              "occurred_at": e["occurred_at"].isoformat(), "session_id": e["session_id"]}
                             for e in u["episodes"]],
                   "questions": [{"id": q["id"], "question": q["question"]} for q in u["questions"]]}
                  for u in users],
    }
    env = {**os.environ, "MEM0_TELEMETRY": "False"}
    done = subprocess.run([str(MEM0_PYTHON), str(MEM0_SIDE)], input=json.dumps(job), capture_output=True,
                          text=True, env=env)
    sys.stderr.write(done.stderr[-4000:] if done.returncode else "".join(
        line + "\n" for line in done.stderr.splitlines() if line.startswith("[mem0]")))
    if done.returncode:
        raise SystemExit(f"the Mem0 side failed (exit {done.returncode}); its stderr is above")
    return json.loads(done.stdout)


# ---------------------------------------------------------------- report


def med(values: list[float]) -> float:
    return statistics.median(values)


def table(users, engram_runs, mem0_runs) -> str:
    def row(label, e, m, fmt="{:.3f}", better="high"):
        e_v, m_v = med(e), med(m)
        lead = (e_v > m_v) if better == "high" else (e_v < m_v)
        return f"| {label} | {fmt.format(e_v)} | {fmt.format(m_v)} | {'Engram' if lead else 'Mem0'} |"

    er = [recall_at(users, r["ranked"]) for r in engram_runs]
    ew = [recall_at(users, r["ranked_writes"]) for r in engram_runs if r["ranked_writes"]]
    mr = [recall_at(users, r["ranked"]) for r in mem0_runs]
    turns = sum(len(u["episodes"]) for u in users)
    es_ = {k: [pct(r["search_ms"])[k] for r in engram_runs] for k in ("p50", "p95")}
    ms_ = {k: [pct(r["search_ms"])[k] for r in mem0_runs] for k in ("p50", "p95")}
    ea = {k: [pct(r["add_ms"])[k] for r in engram_runs] for k in ("p50", "p95")}
    ma = {k: [pct(r["add_ms"])[k] for r in mem0_runs] for k in ("p50", "p95")}
    lines = [
        f"| {er[0]['n']} questions, {turns} turns, {len(users)} users | Engram | Mem0 OSS | lead |",
        "|---|---:|---:|---|",
        row("R@5 (evidence turns in top 5)", [x["R@5"] for x in er], [x["R@5"] for x in mr]),
        row("R@10", [x["R@10"] for x in er], [x["R@10"] for x in mr]),
        *([f"| R@5 / R@10, Engram's per-turn writes instead of the import | {med([x['R@5'] for x in ew]):.3f} / "
           f"{med([x['R@10'] for x in ew]):.3f} | (as above) | |"] if ew else []),
        row("search p50 ms", es_["p50"], ms_["p50"], "{:.1f}", "low"),
        row("search p95 ms", es_["p95"], ms_["p95"], "{:.1f}", "low"),
        row("add one turn p50 ms (Engram: turn write; Mem0: add)", ea["p50"], ma["p50"], "{:.1f}", "low"),
        row("add one turn p95 ms", ea["p95"], ma["p95"], "{:.1f}", "low"),
        row(f"ingest all {turns} turns, s (Engram: bulk import; Mem0: add per turn)",
            [r["import_s"] for r in engram_runs], [r["ingest_s"] for r in mem0_runs], "{:.1f}", "low"),
        *([row(f"ingest all {turns} turns one call per turn, s", [r["write_s"] for r in engram_runs],
               [r["ingest_s"] for r in mem0_runs], "{:.1f}", "low")] if ew else []),
    ]
    return "\n".join(lines)


def isolation_table(engram: list[dict[str, Any]], mem0: list[dict[str, Any]]) -> str:
    lines = ["| system | B tries to reach A's memories by | result | A's data exposed? |", "|---|---|---|---|"]
    for system, attempts in (("Mem0", mem0), ("Engram", engram)):
        for a in attempts:
            lines.append(f"| {system} | {a['attempt']} | {a['result']} | {'**yes**' if a['served_foreign'] else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="LoCoMo conversation files (the first is user A)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=20, help="untimed writes and searches per system and run")
    parser.add_argument("--first", choices=["engram", "mem0"], default="engram", help="which system runs first")
    parser.add_argument("--writes", type=int, default=0,
                        help="Engram turns written one at a time per run (0: all, and then scored too)")
    parser.add_argument("--json", type=Path, help="write every figure and per-run sample here")
    args = parser.parse_args()
    if len(args.paths) < 2:
        parser.error("give at least two conversations (the isolation attempts need two users)")
    users = load(args.paths)
    es_version = next(iter(admin_client().nodes.info(filter_path="nodes.*.version")["nodes"].values()), {}).get("version")
    started = datetime.now(UTC)
    # Engram's embedder, served; a separate instance with no query cache.
    with EmbeddingsServer(MiniLMEmbedder(query_cache_size=0)) as server:
        server.embedder.embed_documents(["load the weights"])
        engram_runs, mem0_runs = [], []
        for n in range(args.runs):
            order = ("engram", "mem0") if (n % 2 == 0) == (args.first == "engram") else ("mem0", "engram")
            for system in order:
                log(f"run {n + 1}/{args.runs}: {system}")
                if system == "engram":
                    engram_runs.append(result := engram_run(users, k=args.k, warmup=args.warmup, writes=args.writes))
                    ingest = result["import_s"]
                else:
                    mem0_runs.append(result := mem0_run(users, k=args.k, warmup=args.warmup, embed_url=server.url,
                                                        model=server.model))
                    ingest = result["ingest_s"]
                # A summary as each run ends, so a long session that is cut short still shows it.
                r, s_, a = recall_at(users, result["ranked"]), pct(result["search_ms"]), pct(result["add_ms"])
                log(f"  {system}: R@5 {r['R@5']:.3f} R@10 {r['R@10']:.3f}; search p50 {s_['p50']:.1f} "
                    f"p95 {s_['p95']:.1f} ms; add p50 {a['p50']:.1f} p95 {a['p95']:.1f} ms (n={a['n']}); "
                    f"ingest {ingest:.1f} s")
                if args.json:
                    args.json.write_text(json.dumps({"partial": True, "engram": engram_runs, "mem0": mem0_runs},
                                                    default=str))
        calls = server.calls_snapshot()
    other_calls = {path: n for path, n in calls.items() if path != "POST /v1/embeddings"}
    if other_calls:
        raise SystemExit(f"Mem0 asked the local endpoint for more than embeddings: {other_calls}")
    finished = datetime.now(UTC)
    m0 = mem0_runs[0]
    load_avg = os.getloadavg()
    header = (f"Engram vs Mem0 OSS {m0['mem0ai']} (elasticsearch-py {m0['elasticsearch_client']}, "
              f"openai {m0['openai_client']}) on Elasticsearch {es_version}, one node; {args.runs} runs, "
              f"medians; {started:%Y-%m-%d %H:%M}–{finished:%H:%M} UTC; {os.cpu_count()} CPUs, "
              f"load average at the end {load_avg[0]:.1f}; Python {platform.python_version()}.\n"
              f"Embeddings endpoint: {calls.get('POST /v1/embeddings', 0)} embedding requests, "
              f"no other request (no LLM call). Mem0 searches returning fewer than {args.k} results: "
              f"{[r['short_results'] for r in mem0_runs]} per run.")
    print(header)
    print()
    print(table(users, engram_runs, mem0_runs))
    print()
    print(isolation_table(engram_runs[-1]["isolation"], mem0_runs[-1]["isolation"]))
    if args.json:
        args.json.write_text(json.dumps({"header": header, "es_version": es_version, "calls": calls,
                                         "engram": engram_runs, "mem0": mem0_runs,
                                         "recall": {"engram": [recall_at(users, r["ranked"]) for r in engram_runs],
                                                    "engram_writes": [recall_at(users, r["ranked_writes"])
                                                                      for r in engram_runs if r["ranked_writes"]],
                                                    "mem0": [recall_at(users, r["ranked"]) for r in mem0_runs]}},
                                        default=str, indent=1))


if __name__ == "__main__":
    main()
