"""Concurrent HTTP load on a running Engram: N agent clients, a third of requests turns, the rest
recalls, for a fixed time; per kind p50/p95/p99 latency, throughput and errors.

Run through ``scripts/bench --http`` (which starts Elasticsearch, a scratch database and the ASGI
server with its worker processes), or against any server:

    python benchmarks/http_load.py --url http://127.0.0.1:8000 --token <agent token> \\
        [--clients 8 32] [--seconds 40] [--subjects 40] [--varied] [--turn-share 0.33] \\
        [--warmup SECONDS] [--warmup-turn-share 0.33] [--turn-types catalog]

By default turns and recalls say one of a dozen fixed sentences (so after a few requests every
query vector is cached, and turns carry no session). ``--varied`` is an agent's conversation
instead: every turn a new synthetic sentence, in sessions of six turns per client and end-user
(so each gets its derived context), and every recall a new synthetic question (no cached vector).

Text is seeded (``--seed``, 7): each measured step has a seed of its own, so no step repeats
what an earlier one said (whose query vectors would be cached). ``--warmup SECONDS`` first runs
the load that long at the largest client count on text of its own, counting none of it: the
node's JIT compiler and the servers' caches (entity mention counts) reach a running server's
state without any measured question having been asked before. (In a flight recording the JIT
compiler had 30% of the node's Java threads' CPU in the first minute after start-up, but two
minutes of warm-up measured no different: docs/performance.md, "Is the 8-client figure a cold
node's?".) ``scripts/bench --http`` runs its own short warm-up with another ``--seed`` for the
same reason.

``--cpu-split`` also reports where each step's CPU went on this machine: CPU seconds of the
Elasticsearch node, of the ASGI server's processes, of Redis and of this load generator (from
``/proc``, Linux only), each per request, and, when ``ES_URL`` and ``ES_MONITOR_USERNAME`` /
``ES_MONITOR_PASSWORD`` are set (``scripts/bench`` sets them), what the node did per request
(``_nodes/stats``: shard-level query and fetch phases, documents indexed, refreshes), and the
machine's own speed just before and just after the step (``machine_speed.py``: a fixed workload's
CPU time, which on this machine drifts by 1.7 times within minutes on its own).

When the server sends ``Server-Timing`` (ENGRAM_SERVER_TIMING, which ``scripts/bench --http``
sets; memory_app.timing), each kind also gets its phases' p50 / p95 (``refresh``, ``embed``,
``search``, a turn's ``write``, ``app``: the whole request inside Django) and the share of
requests that made or waited for a forced refresh, with their latency against the others'.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from machine_speed import probe as machine_probe
from scale_data import Synth, proc_stat

SENTENCES = [
    "my router keeps dropping the wifi in the evening", "I moved to Hamburg last spring",
    "the heating does not turn on in the morning", "please remind me about the invoice",
    "my daughter uses the tablet for school", "the smart plug stopped responding yesterday",
    "I prefer to be called in the afternoon", "can you check my last order", "the thermostat shows 30 degrees",
    "I changed my email address last week", "which plan am I on", "the camera app crashes on start",
]


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------- where the CPU went (--cpu-split)

_CLASSES = ("elasticsearch", "engram server", "redis", "load generator")


def _proc_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of every process, by class: the Elasticsearch node, the ASGI
    server and its worker processes (any process with a uvicorn ancestor), Redis, this process."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (fields := proc_stat(entry)) is None:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        procs[int(entry)] = (int(fields[1]), cmd, (int(fields[11]) + int(fields[12])) / tick)

    def klass(pid: int) -> str:
        cmd = procs[pid][1]
        if pid == os.getpid():
            return "load generator"
        if "org.elasticsearch" in cmd:
            return "elasticsearch"
        if "redis-server" in cmd:
            return "redis"
        while pid in procs:
            if "uvicorn" in procs[pid][1]:
                return "engram server"
            pid = procs[pid][0]
        return "other"

    return {pid: (klass(pid), cpu) for pid, (_, _, cpu) in procs.items()}


def _jit_cpu(cpu: dict[int, tuple[str, float]]) -> float | None:
    """CPU seconds of the Elasticsearch node's JIT compiler threads (named "C1 CompilerThre…" and
    "C2 CompilerThre…" in ``/proc``; the node's other threads all carry its own name); None
    without a node on this machine."""
    nodes = [pid for pid, (klass, _) in cpu.items() if klass == "elasticsearch"]
    if not nodes:
        return None
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in nodes:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/comm") as f:
                    if "CompilerThre" not in f.read():
                        continue
            except OSError:
                continue
            if (fields := proc_stat(f"{pid}/task/{task}")) is not None:
                total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _readings() -> tuple:
    """What ``cpu_split`` compares: CPU by process, the node's statistics, its compiler's CPU."""
    cpu = _proc_cpu()
    return cpu, _node_stats(), _jit_cpu(cpu)


def _node_stats() -> dict[str, float] | None:
    url, user = os.environ.get("ES_URL"), os.environ.get("ES_MONITOR_USERNAME")
    if not url or not user:
        return None
    response = httpx.get(f"{url.rstrip('/')}/_nodes/_local/stats/indices,jvm",
                         auth=(user, os.environ.get("ES_MONITOR_PASSWORD", "")), timeout=10,
                         params={"filter_path": ",".join([*(f"nodes.*.indices.{part}"
                                                            for part in ("search", "indexing", "refresh")),
                                                          "nodes.*.jvm.gc"])},
                         verify=os.environ.get("ES_CA_CERTS") or True)
    node = next(iter(response.json()["nodes"].values()))
    indices, collectors = node["indices"], node["jvm"]["gc"]["collectors"].values()
    return {"query phases": indices["search"]["query_total"], "fetch phases": indices["search"]["fetch_total"],
            "documents indexed": indices["indexing"]["index_total"], "refreshes": indices["refresh"]["external_total"],
            # The JVM's garbage collection: wall time of its pauses and concurrent cycles, in ms.
            "gc ms": sum(c["collection_time_in_millis"] for c in collectors)}


def cpu_split(before: tuple, after: tuple, *, requests: int, wall: float) -> dict:
    """CPU ms per request by process class and the node's work per request, between two
    ``_readings()``: (``_proc_cpu()``, ``_node_stats()``, ``_jit_cpu()``)."""
    (cpu0, node0, jit0), (cpu1, node1, jit1) = before, after
    spent = dict.fromkeys((*_CLASSES, "other"), 0.0)
    for pid, (klass, cpu) in cpu1.items():
        if pid in cpu0:
            spent[klass] += cpu - cpu0[pid][1]
    per = max(requests, 1)
    out = {"cpu_ms_per_request": {k: round(v * 1000 / per, 1) for k, v in spent.items()},
           "cores_busy": {k: round(v / wall, 2) for k, v in spent.items()}}
    if node0 and node1:
        out["node_per_request"] = {k: round((node1[k] - node0[k]) / per, 2) for k in node1}
    if jit0 is not None and jit1 is not None:
        # A node started minutes ago still compiles its hot code: this much of its CPU per request.
        out.setdefault("node_per_request", {})["jit ms"] = round((jit1 - jit0) * 1000 / per, 1)
    return out


def prepare(*, url: str, token: str, subjects: int) -> None:
    """One turn per end-user, one after the other: creating an end-user mints its key (slow by
    design, once), which is not what the load measures."""
    with httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=120,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        for n in range(subjects):
            http.post(f"subjects/load-user-{n}/turns", json={"text": SENTENCES[n % len(SENTENCES)]}).raise_for_status()


def run(*, url: str, token: str, clients: int, seconds: float, subjects: int, seed: int = 7,
        targets: list[tuple[str, str]] | None = None, texts: list[str] | None = None,
        varied: bool = False, measure_cpu: bool = False, turn_share: float = 1 / 3,
        turn_types: list[str] | None = None) -> dict:
    """``targets``: (agent token, external id) pairs to spread the load over (end-users of several
    tenants); by default ``subjects`` end-users ``load-user-<n>`` under ``token``. ``texts``: what
    turns and recalls say (by default a dozen fixed sentences, soon all cached query vectors).
    ``varied``: new synthetic text for every request, turns in sessions (see the module doc).
    ``turn_share``: the share of requests that are turns (the rest recalls). ``turn_types``: the
    memory types a turn's own recall searches (``turn_body``)."""
    texts = texts or SENTENCES
    targets = targets or [(token, f"load-user-{n}") for n in range(subjects)]
    latencies: dict[str, list[float]] = {"turn": [], "recall": []}
    timings: dict[str, list[tuple[float, dict[str, float], set[str]]]] = {"turn": [], "recall": []}
    errors: dict[str, int] = {"turn": 0, "recall": 0}
    error_kinds: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    synth, origin = Synth(seed=seed), datetime.now(UTC)

    def client(n: int) -> None:
        rng = random.Random(seed + n)
        said: dict[str, int] = {}  # turns this client sent per end-user: sessions of six
        with httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=30) as http:
            while time.monotonic() < stop_at:
                bearer, who = rng.choice(targets)
                http.headers["Authorization"] = f"Bearer {bearer}"
                kind = "turn" if rng.random() < turn_share else "recall"
                text, turn = rng.choice(texts), {}
                if varied and kind == "turn":
                    said[who] = count = said.get(who, 0) + 1
                    turn = {"session_id": f"load-{seed}-{n}-{who}-{count // 6}"}
                    text = synth.episode(f"{seed}-{n}-{who}", count, start=origin)["text"]
                elif varied:
                    text = synth.question(rng.randrange(10**9))
                started = time.monotonic()
                try:
                    if kind == "turn":
                        response = http.post(f"subjects/{who}/turns", json=turn_body(text, turn, turn_types),
                                             headers={"Idempotency-Key": f"{n}-{time.monotonic_ns()}"})
                    else:
                        response = http.post(f"subjects/{who}/recall", json={"query": text, "k": 10})
                    ok = response.status_code < 300 or (kind == "recall" and response.status_code == 404)
                    label = str(response.status_code)
                    header = response.headers.get("server-timing")
                    phases = server_timing(header) if header is not None else None
                except httpx.HTTPError as exc:
                    ok, label, phases = False, type(exc).__name__, None
                elapsed = (time.monotonic() - started) * 1000
                with lock:
                    if ok:
                        latencies[kind].append(elapsed)
                        if phases is not None:
                            timings[kind].append((elapsed, *phases))
                    else:
                        errors[kind] += 1
                        error_kinds[label] = error_kinds.get(label, 0) + 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    # The machine's own speed just before and just after (machine_speed.py): its drift, not the code's.
    speed_before = machine_probe() if measure_cpu else None
    before = _readings() if measure_cpu else None
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - began
    requests = sum(len(v) for v in latencies.values()) + sum(errors.values())
    result = {"clients": clients, "seconds": round(wall, 1), "errors": sum(errors.values()), "error_kinds": error_kinds,
              "throughput_rps": round(requests / wall, 1)}
    for kind, values in latencies.items():
        result[kind] = {"count": len(values), **{f"p{p}_ms": round(v) if (v := _pct(values, p)) is not None else None
                                                 for p in (50, 95, 99)},
                        "mean_ms": round(statistics.fmean(values)) if values else None}
        if timings[kind]:
            result[kind]["server_timing"] = timing_summary(timings[kind])
    if before is not None:
        result["cpu"] = cpu_split(before, _readings(), requests=requests, wall=wall)
        result["machine_probe_ms"] = {"before": speed_before, "after": machine_probe()}
    return result


def server_timing(header: str) -> tuple[dict[str, float], set[str]]:
    """A ``Server-Timing`` value as (phase -> ms, flags): ``name;dur=ms`` parts and bare names."""
    durations: dict[str, float] = {}
    flags: set[str] = set()
    for part in filter(None, (p.strip() for p in header.split(","))):
        name, *params = [p.strip() for p in part.split(";")]
        dur = next((p.split("=", 1)[1] for p in params if p.startswith("dur=")), None)
        if dur is None:
            flags.add(name)
        else:
            durations[name] = durations.get(name, 0.0) + float(dur)
    return durations, flags


TIMED_PHASES = ("refresh", "embed", "search", "write", "app")


def timing_summary(rows: list[tuple[float, dict[str, float], set[str]]]) -> dict:
    """Per phase its p50 / p95 over every request (a phase a request did not record counts 0), and
    the requests that made or waited for a forced refresh (``refreshed``): their share and
    latency p50 / p95 against the others'."""
    def pcts(values: list[float]) -> dict:
        return {f"p{p}_ms": round(v, 1) if (v := _pct(values, p)) is not None else None for p in (50, 95)}

    refreshed = [elapsed for elapsed, _, flags in rows if "refreshed" in flags]
    others = [elapsed for elapsed, _, flags in rows if "refreshed" not in flags]
    seen = [p for p in TIMED_PHASES if any(p in durations for _, durations, _ in rows)]
    return {"requests": len(rows), "refreshed_share": round(len(refreshed) / len(rows), 3),
            "refreshed": pcts(refreshed), "others": pcts(others),
            "phases": {p: pcts([durations.get(p, 0.0) for _, durations, _ in rows]) for p in seen}}


def turn_body(text: str, session: dict, types: list[str] | None) -> dict:
    """A turn's request: its text, its session (``--varied``) and, when given, the memory types its
    recall searches (``--turn-types catalog`` leaves the turn's write path with a recall of the
    tenant's few catalog entries: what a turn costs beside its recall)."""
    return {"text": text, "k": 5, **session, **({"types": types} if types else {})}


@dataclass(frozen=True)
class Seeds:
    steps: list[int]
    warmup: int


def step_seeds(steps: int, *, seed: int = 7) -> Seeds:
    """A seed per measured step (the first one ``seed``, as every step had before warm-ups
    existed, so a first step's text is what it was) and one for the warm-up, all different: no
    step says what another step or the warm-up said."""
    return Seeds(steps=[seed + 1000 * i for i in range(steps)], warmup=seed + 1000 * steps)


def markdown(results: list[dict]) -> str:
    lines = ["| clients | kind | requests | p50 ms | p95 ms | p99 ms | throughput (all) req/s | errors |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for kind in ("turn", "recall"):
            k = r[kind]
            lines.append(f"| {r['clients']} | {kind} | {k['count']} | {k['p50_ms']} | {k['p95_ms']} | {k['p99_ms']} "
                         f"| {r['throughput_rps']} | {r['errors']} |")
    lines += [f"errors at {r['clients']} clients: {r['error_kinds']}" for r in results if r["errors"]]
    timed = [(r, kind) for r in results for kind in ("turn", "recall") if "server_timing" in r[kind]]
    if timed:
        lines += ["", "Where the time went (Server-Timing), ms p50 / p95", "",
                  "| clients | kind | refreshed | latency, refreshed | latency, others | "
                  + " | ".join(TIMED_PHASES) + " |",
                  "|---:|---|---:|---|---|" + "---|" * len(TIMED_PHASES)]
        for r, kind in timed:
            t = r[kind]["server_timing"]
            cells = [f"{t['phases'][p]['p50_ms']} / {t['phases'][p]['p95_ms']}" if p in t["phases"] else "n/a"
                     for p in TIMED_PHASES]
            lines.append(f"| {r['clients']} | {kind} | {100 * t['refreshed_share']:.1f}% "
                         f"| {t['refreshed']['p50_ms']} / {t['refreshed']['p95_ms']} "
                         f"| {t['others']['p50_ms']} / {t['others']['p95_ms']} | " + " | ".join(cells) + " |")
    split = [r for r in results if "cpu" in r]
    if split:
        classes = [*_CLASSES, "other"]
        lines += ["", "CPU per request, ms (cores busy)", "",
                  "| clients | " + " | ".join(classes) + " | Elasticsearch per request |",
                  "|---:|" + "---:|" * len(classes) + "---|"]
        for r in split:
            cpu = r["cpu"]
            node = ", ".join(f"{k} {v}" for k, v in cpu.get("node_per_request", {}).items()) or "n/a"
            lines.append(f"| {r['clients']} | " + " | ".join(f"{cpu['cpu_ms_per_request'][k]} ({cpu['cores_busy'][k]})"
                                                             for k in classes) + f" | {node} |")
        lines += [f"the machine's speed at {r['clients']} clients (machine_speed.py's fixed workload, ms of CPU, "
                  f"lower is faster): {r['machine_probe_ms']['before']} before, {r['machine_probe_ms']['after']} after"
                  for r in split if "machine_probe_ms" in r]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--subjects", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--prepare", action="store_true", help="first create every end-user (one turn each)")
    parser.add_argument("--varied", action="store_true", help="new text for every request, turns in sessions")
    parser.add_argument("--cpu-split", action="store_true", help="CPU per request by process, and the node's work")
    parser.add_argument("--turn-share", type=float, default=1 / 3,
                        help="the share of requests that are turns (default a third; 0: recalls only)")
    parser.add_argument("--seed", type=int, default=7, help="the first step's text (other steps, the warm-up differ)")
    parser.add_argument("--warmup", type=float, default=0, metavar="SECONDS",
                        help="first run the load this long on other text, not counted (see the module doc)")
    parser.add_argument("--warmup-turn-share", type=float, default=None, metavar="SHARE",
                        help="the warm-up's share of turns (default --turn-share's): e.g. recalls measured "
                             "after a mix has given every end-user memories to search")
    parser.add_argument("--turn-types", type=lambda v: [t.strip() for t in v.split(",") if t.strip()], default=None,
                        metavar="TYPES", help="comma-separated memory types a turn's recall searches (default all; "
                                              "catalog: a turn's write path beside a near-empty recall)")
    args = parser.parse_args()
    if args.prepare:
        prepare(url=args.url, token=args.token, subjects=args.subjects)
    seeds = step_seeds(len(args.clients), seed=args.seed)
    if args.warmup > 0:
        warm = run(url=args.url, token=args.token, clients=max(args.clients), seconds=args.warmup,
                   subjects=args.subjects, varied=args.varied, seed=seeds.warmup, measure_cpu=args.cpu_split,
                   turn_share=args.turn_share if args.warmup_turn_share is None else args.warmup_turn_share,
                   turn_types=args.turn_types)
        node = warm.get("cpu", {}).get("node_per_request", {})
        print(f"warm-up, not counted: {max(args.clients)} clients for {warm['seconds']} s, "
              f"{warm['throughput_rps']} req/s, {warm['errors']} errors"
              + (f", the node's JIT compiler {node['jit ms']} ms per request" if "jit ms" in node else "") + "\n")
    results = [run(url=args.url, token=args.token, clients=c, seconds=args.seconds, subjects=args.subjects,
                   varied=args.varied, measure_cpu=args.cpu_split, seed=seed, turn_share=args.turn_share,
                   turn_types=args.turn_types)
               for c, seed in zip(args.clients, seeds.steps, strict=True)]
    print(json.dumps(results, indent=2) if args.json else markdown(results))


if __name__ == "__main__":
    main()
