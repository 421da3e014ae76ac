"""Scale curve: Engram's latency, import rate and footprint at 1k, 10k and 100k memories, over
100 tenants x 4 end-users plus one heavy end-user, at service level and over HTTP.

Run through ``scripts/bench --scale [--quick]`` (its own Elasticsearch, Redis and scratch
database; the index prefix is dropped at the end). The corpus grows in place: load the first
size, measure, import the difference up to the next size, measure again (benchmarks/scale_data.py
says what each size holds). Episodes arrive by bulk import through ``write_submit`` (the path of
``POST .../episodes/import``); facts, playbooks and catalog entries one by one through the write
services, from a few threads. Per size, one after the other on one thread:

- recall (k=10, every type + catalog, use-count bumps off) for ordinary end-users and for the heavy
  one, each with new questions (the query-vector cache cleared before every call) and repeated
  ones (the same questions again, vectors cached), after one untimed pass that warms
  Elasticsearch's caches and the end-users' keys;
- a turn (``turn_submit``: store the verbatim turn + pre-recall, as ``POST .../turns``), and a
  fact write superseding one of the end-user's facts (``write_submit``), at random intervals;
- bulk import rate (episodes imported at that step / wall time of the import), index size
  (``_stats/store``), this process's RSS, Elasticsearch heap used (``_nodes/stats``).

At the largest size, the ASGI server (``ENGRAM_WEB_WORKERS`` processes) under 1/2/4/8 concurrent
HTTP clients (benchmarks/http_load.py: a third turns, the rest recalls, over every ordinary
end-user of every tenant). Writes ``scale.md``, ``scale.json``, ``scale_latency.png`` and
``scale_throughput.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_latency import percentiles, recall_samples, timed  # noqa: E402  (sets Django up)

import http_load  # noqa: E402
import scale_data  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from engram_core.es.client import admin_client  # noqa: E402
from memory_app.config.serving import UVICORN_FLAGS  # noqa: E402
from memory_app.embeddings import get_embedder  # noqa: E402
from engram_core.es.schema import all_aliases, drop_indices  # noqa: E402
from memory_app.outbox import turn_submit, write_submit  # noqa: E402
from memory_app.services.facts import catalog_entry_write  # noqa: E402
from memory_app.services.imports import episodes_assign_ids  # noqa: E402
from memory_app.usage import usage_flush  # noqa: E402
from tenants.models import AgentToken, Subject, Tenant  # noqa: E402
from tenants.services.subjects import subject_get_or_create  # noqa: E402
from tenants.services.tokens import agent_token_create  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2024, 1, 1, tzinfo=UTC)
HEAVY_IMPORT_CHUNK = 5000
LARGE_IMPORT = 1000  # an import call this large is timed on its own too (per-call costs amortised)


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def import_call(synth: scale_data.Synth, tenant: Tenant, external_id: str, start: int, stop: int) -> tuple[int, float]:
    """One import call of the end-user's synthetic episodes ``start`` to ``stop`` as ``POST
    .../episodes/import`` makes it; (episodes, seconds of the call, not of making its text)."""
    episodes = [synth.episode(external_id, n, start=START) for n in range(start, stop)]
    request_id = f"{external_id}-{start}"
    payload = {"episodes": episodes_assign_ids(tenant_id=tenant.pk, external_id=external_id,
                                               episodes=episodes, prefix=request_id)}
    started = time.perf_counter()
    submitted = write_submit(tenant=tenant, external_id=external_id, operation="import", payload=payload,
                             actor="bench")
    assert not submitted.queued, "the import was queued (Elasticsearch unavailable?)"
    return len(submitted.result["ids"]), time.perf_counter() - started


class Corpus:
    """The tenants, end-users and what has been loaded so far."""

    def __init__(self, *, synth: scale_data.Synth, tenants: int, users_per_tenant: int, threads: int):
        self.synth, self.n_tenants, self.users_per_tenant, self.threads = synth, tenants, users_per_tenant, threads
        self.tenants: list[Tenant] = []
        self.subjects: dict[str, Subject] = {}
        self.loaded: scale_data.Plan | None = None
        self.facts: dict[str, list[str]] = {}  # external id -> ids of its current (not superseded) facts

    def create(self) -> float:
        started = time.perf_counter()
        for t in range(self.n_tenants):
            self.tenants.append(Tenant.objects.create(slug=f"scale-{t:03d}", name=f"Scale tenant {t}"))
        for (t, external_id) in scale_data.plan(0, tenants=self.n_tenants,
                                                users_per_tenant=self.users_per_tenant).users:
            self.subjects[external_id] = subject_get_or_create(
                tenant=self.tenants[t], external_id=external_id, actor="bench")
        self.loaded = scale_data.plan(0, tenants=self.n_tenants, users_per_tenant=self.users_per_tenant)
        return time.perf_counter() - started

    def grow(self, size: int) -> dict:
        target = scale_data.plan(size, tenants=self.n_tenants, users_per_tenant=self.users_per_tenant)
        before = self.loaded
        imports, singles = [], []
        for key, want in target.users.items():
            have = before.users[key]
            tenant, external_id = self.tenants[key[0]], key[1]
            chunk = HEAVY_IMPORT_CHUNK if external_id == scale_data.HEAVY else want.episodes
            for start in range(have.episodes, want.episodes, max(chunk, 1)):
                imports.append((tenant, external_id, start, min(want.episodes, start + chunk)))
            singles += [("fact", tenant, external_id, n) for n in range(have.facts, want.facts)]
            singles += [("playbook", tenant, external_id, n) for n in range(have.playbooks, want.playbooks)]
        for t, (have, want) in enumerate(zip(before.catalog, target.catalog, strict=True)):
            singles += [("catalog", self.tenants[t], None, n) for n in range(have, want)]

        started = time.perf_counter()
        with ThreadPoolExecutor(self.threads) as pool:
            calls = list(pool.map(lambda job: import_call(self.synth, *job), imports))
        import_s = time.perf_counter() - started
        imported = sum(n for n, _ in calls)
        large = [(n, s) for n, s in calls if n >= LARGE_IMPORT]
        started = time.perf_counter()
        # Each single write waits for a refresh (250 ms), so these threads mostly wait; 32 of them
        # fit in the client's connections (ES_CONNECTIONS_PER_NODE) and are in flight at once.
        with ThreadPoolExecutor(16 * self.threads) as pool:
            list(pool.map(lambda job: self._single(*job), singles))
        singles_s = time.perf_counter() - started
        self.loaded = target
        return {"episodes_imported": imported, "import_s": import_s, "singles": len(singles), "singles_s": singles_s,
                "import_eps": imported / import_s if import_s else None,
                "import_eps_large": sum(n for n, _ in large) / sum(s for _, s in large) if large else None}

    def _single(self, kind: str, tenant: Tenant, external_id: str | None, n: int) -> None:
        if kind == "catalog":
            title, text = self.synth.catalog(tenant.slug, n)
            catalog_entry_write(tenant=tenant, title=title, text=text)
        elif kind == "fact":
            submitted = write_submit(tenant=tenant, external_id=external_id, operation="fact",
                                     payload={"text": self.synth.fact(external_id, n)}, actor="bench")
            self.facts.setdefault(external_id, []).append(submitted.memory_id)
        else:
            trigger, steps = self.synth.playbook(external_id, n)
            write_submit(tenant=tenant, external_id=external_id, operation="playbook",
                         payload={"trigger": trigger, "steps": steps}, actor="bench")

    def tenant_of(self, external_id: str) -> Tenant:
        return self.subjects[external_id].tenant


def measure(corpus: Corpus, *, queries: int, writes: int, rng: random.Random, questions: list[str]) -> dict:
    normal = [s for e, s in corpus.subjects.items() if e != scale_data.HEAVY]
    heavy = corpus.subjects[scale_data.HEAVY]

    def recall(plan: list[tuple[Subject, str]], *, new: bool) -> list[float]:
        return recall_samples(plan, record_use=False, clear_cache=new)

    result = {}
    for key, plan in [("recall", [(rng.choice(normal), rng.choice(questions)) for _ in range(queries)]),
                      ("heavy", [(heavy, rng.choice(questions)) for _ in range(max(20, queries // 2))])]:
        recall(plan, new=False)  # warm-up: keys, connections, Elasticsearch's caches
        result[f"{key}_new"] = percentiles(recall(plan, new=True))
        recall(plan, new=False)  # every vector cached again
        result[f"{key}_repeated"] = percentiles(recall(plan, new=False))
    log("timed recalls")

    turns = []
    for n in range(writes):
        # Independent arrivals: back-to-back writes fall into step with the refresh cycle.
        time.sleep(rng.uniform(0, 0.5))
        subject = rng.choice(normal)
        turns.append(timed(turn_submit, tenant=subject.tenant, external_id=subject.external_id,
                           text=corpus.synth.episode(f"turn-{subject.external_id}", n, start=START)["text"]))
    supersede = []
    with_facts = sorted(e for e, ids in corpus.facts.items() if ids and e != scale_data.HEAVY)
    for n in range(writes if with_facts else 0):
        time.sleep(rng.uniform(0, 0.5))
        external_id = rng.choice(with_facts)
        old = corpus.facts[external_id].pop()
        started = time.perf_counter()
        submitted = write_submit(tenant=corpus.tenant_of(external_id), external_id=external_id, operation="fact",
                                 payload={"text": corpus.synth.fact(f"new-{external_id}", n), "supersedes": [old],
                                          "contradiction": "natural"}, actor="bench")
        supersede.append((time.perf_counter() - started) * 1000)
        corpus.facts[external_id].append(submitted.memory_id)
    result["turn"] = percentiles(turns)
    result["fact_supersede"] = percentiles(supersede) if len(supersede) > 1 else None
    log("timed writes")
    usage_flush()

    es = admin_client()
    store = es.indices.stats(index=",".join(all_aliases(prefix=settings.ES_INDEX_PREFIX)), metric="store")
    jvm = next(iter(es.nodes.stats(metric="jvm")["nodes"].values()))["jvm"]["mem"]
    result.update(store_mb=round(store["_all"]["primaries"]["store"]["size_in_bytes"] / 1e6, 1),
                  heap=f"{jvm['heap_used_in_bytes'] / 2**20:.0f} / {jvm['heap_max_in_bytes'] / 2**20:.0f}",
                  rss_mb=round(rss_mb(), 1),
                  peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
    return result


def http_curve(corpus: Corpus, *, clients: list[int], seconds: float, texts: list[str]) -> tuple[list[dict], dict]:
    """The ASGI server on the loaded corpus under 1..n concurrent clients."""
    port = int(os.environ.get("ENGRAM_BENCH_WEB_PORT", "8290"))
    url = f"http://127.0.0.1:{port}"
    targets = []
    for tenant in corpus.tenants:
        _, token = agent_token_create(tenant=tenant, name="scale", scopes=AgentToken.Scope.values,
                                      actor="bench")
        targets += [(token, s.external_id) for s in corpus.subjects.values()
                    if s.tenant_id == tenant.pk and s.external_id != scale_data.HEAVY]
    workers = os.environ.get("ENGRAM_WEB_WORKERS", "2")
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "memory_app.config.asgi:application", "--host",
                               "127.0.0.1", "--port", str(port), "--log-level", "error", *UVICORN_FLAGS, "--workers", workers],
                              cwd=ROOT)
    try:
        for _ in range(120):
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            raise RuntimeError("the ASGI server did not come up")
        # Warm-up: the workers load the model and each end-user's key once.
        http_load.run(url=url, token="", clients=2, seconds=max(5.0, seconds / 3), subjects=0, targets=targets,
                      texts=texts)
        results = []
        for c in clients:
            results.append(http_load.run(url=url, token="", clients=c, seconds=seconds, subjects=0,
                                         targets=targets, texts=texts))
            log(f"HTTP, {c} clients: {results[-1]['throughput_rps']} req/s")
        children = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == server.pid]
        footprint = {"workers": int(workers),
                     "worker_rss_mb": [round(rss_mb(p.name), 1) for p in children]}
    finally:
        server.terminate()
        server.wait(30)
    return results, footprint


def _ppid(proc: Path) -> int | None:
    fields = scale_data.proc_stat(proc.name)
    return int(fields[1]) if fields else None


def machine_record(synth: scale_data.Synth) -> dict:
    """What the run ran on: the CPU (model and vector instruction sets) and a speed probe taken
    before anything else runs, the configured embedder's throughput on a fixed batch of 64 of the
    corpus's sentences (median of 3). The same VM type has measured 2x apart within a day, so
    runs are compared with this figure beside them, not by their date."""
    try:
        cpu = scale_data.cpu_description(Path("/proc/cpuinfo").read_text())
    except OSError:
        cpu = "unknown CPU"
    texts = [synth.episode("speed-probe", n, start=START)["text"] for n in range(64)]
    embedder = get_embedder()
    embedder.embed_documents(texts[:8])  # first use builds the runtime's graph: not part of the probe
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        embedder.embed_documents(texts)
        rates.append(len(texts) / (time.perf_counter() - started))
    return {"cpu": cpu, "embed_sentences_per_s": round(statistics.median(rates), 1),
            "embedder_runtime": getattr(embedder, "runtime", type(embedder).__name__)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k and 5k, fewer samples, 5 s HTTP steps")
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--users-per-tenant", type=int, default=4)
    parser.add_argument("--queries", type=int, help="recalls per kind per size (heavy end-user: half)")
    parser.add_argument("--writes", type=int, help="turns and fact supersessions per size")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--http-seconds", type=float)
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--threads", type=int, default=2, help="import threads (facts etc.: 16x as many)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sizes = args.sizes or ([1000, 5000] if args.quick else [1000, 10000, 100000])
    queries = args.queries or (40 if args.quick else 300)
    writes = args.writes or (10 if args.quick else 60)
    http_seconds = args.http_seconds or (5 if args.quick else 30)
    out = args.out or ROOT / "docs" / "bench" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    began, load_before = datetime.now(UTC), os.getloadavg()
    rng = random.Random(args.seed)
    synth = scale_data.Synth(args.seed)
    questions = [synth.question(n) for n in range(2000)]

    machine = machine_record(synth)
    log(f"machine: {machine['cpu']}; embedder {machine['embed_sentences_per_s']:.0f} sentences/s at the start")
    call_command("migrate", verbosity=0)
    call_command("es_setup", verbosity=0)
    corpus = Corpus(synth=synth, tenants=args.tenants, users_per_tenant=args.users_per_tenant, threads=args.threads)
    rows: list[dict] = []
    run = {"began": began, "load_before": load_before, "created_s": 0.0, "queries": queries, "writes": writes,
           "http_seconds": http_seconds, "sizes": sizes, "machine": machine}
    try:
        run["created_s"] = corpus.create()
        log(f"{len(corpus.subjects)} end-users in {args.tenants} tenants created (keys minted) "
            f"in {run['created_s']:.0f}s")
        for size in sizes:
            grown = corpus.grow(size)
            log(f"{size}: imported {grown['episodes_imported']} episodes in {grown['import_s']:.1f}s, "
                f"{grown['singles']} facts/playbooks/catalog in {grown['singles_s']:.1f}s")
            rows.append({"memories": corpus.loaded.total,
                         "heavy_memories": corpus.loaded.users[(0, scale_data.HEAVY)].total,
                         **grown,
                         **measure(corpus, queries=queries, writes=writes, rng=rng, questions=questions)})
            report(rows, [], {}, run=run, args=args, out=out)  # what is done so far survives a cut-off
        if not args.no_http:
            http, footprint = http_curve(corpus, clients=args.clients, seconds=http_seconds, texts=questions)
            report(rows, http, footprint, run=run, args=args, out=out)
    finally:
        drop_indices(es=admin_client(), prefix=settings.ES_INDEX_PREFIX)


def report(rows: list[dict], http: list[dict], footprint: dict, *, run: dict, args: argparse.Namespace,
           out: Path) -> None:
    began, load_before, load_now = run["began"], run["load_before"], os.getloadavg()
    # The load during the run is the benchmark's own (Elasticsearch, imports, the HTTP clients), and
    # the 1-minute load before it includes its Elasticsearch booting (about 1): only a load well
    # above that at the start means other jobs shared the cores.
    contended = load_before[0] > 2.0
    threads = ", ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if k in os.environ)
    label = (f"{'contended, ' if contended else ''}{began:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores"
             f"{', quick mode' if args.quick else ''}{', ' + threads if threads else ''}")
    top = run["sizes"][-1]
    text = [f"Scale curve, {label}: load average {load_before[0]:.1f} at the start "
            f"({'other jobs shared the cores' if contended else 'machine otherwise idle'}), {load_now[0]:.1f} now "
            f"(this benchmark's own load); "
            f"{(datetime.now(UTC) - began).total_seconds() / 60:.1f} min so far. {args.tenants} tenants x "
            f"{args.users_per_tenant} end-users + 1 heavy end-user (20% of each size: "
            f"{scale_data.plan(top).users[(0, scale_data.HEAVY)].total:,} memories at {top:,}); "
            f"{run['created_s']:.0f}s to create the end-users (keys minted). Recall samples per size: "
            f"{run['queries']} (heavy end-user: {max(20, run['queries'] // 2)}); writes: {run['writes']} turns, "
            f"{run['writes']} supersessions. Machine: {run['machine']['cpu']}; the embedder "
            f"({run['machine']['embedder_runtime']}) embedded {run['machine']['embed_sentences_per_s']:.0f} "
            f"sentences/s at the start.", "", scale_data.markdown_table(rows)]
    if http:
        text += ["", f"HTTP at {rows[-1]['memories']:,} memories, {footprint['workers']} ASGI workers (RSS of the "
                 f"server's child processes: {', '.join(f'{m:.0f}' for m in footprint['worker_rss_mb'])} MB), "
                 f"{run['http_seconds']:.0f}s per step, a third turns and the rest recalls over "
                 f"{args.tenants * args.users_per_tenant} end-users:", "", http_load.markdown(http)]
    markdown = "\n".join(text)
    print("\n" + markdown, flush=True)
    (out / "scale.md").write_text(markdown + "\n")
    (out / "scale.json").write_text(json.dumps({"label": label, "rows": rows, "http": http, "footprint": footprint,
                                                "load_average": [load_before, load_now], "machine": run["machine"],
                                                "minutes": round((datetime.now(UTC) - began).total_seconds() / 60, 1)},
                                               indent=2) + "\n")
    scale_data.plots(rows, http, out=out, label=label)
    log(f"wrote {out}/scale.md, scale.json and the plots")


if __name__ == "__main__":
    main()
