"""A load generator: N clients sending turns and recalls for a fixed time through a sender (HTTP
to a running Engram, or anything that makes the same requests), per kind the latency
percentiles, throughput and errors; what the server's ``Server-Timing`` says about where the time
went; and, from ``/proc``, where the machine's CPU went. No Engram code: it loads any server."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from benchmarks.corpus import Synth
from benchmarks.harness import percentiles, proc_stat, rss_mb
from benchmarks.machine import probe as machine_probe

SENTENCES = [
    "my router keeps dropping the wifi in the evening", "I moved to Hamburg last spring",
    "the heating does not turn on in the morning", "please remind me about the invoice",
    "my daughter uses the tablet for school", "the smart plug stopped responding yesterday",
    "I prefer to be called in the afternoon", "can you check my last order", "the thermostat shows 30 degrees",
    "I changed my email address last week", "which plan am I on", "the camera app crashes on start",
]
KINDS = ("turn", "recall")

# A sender makes one request: (kind, agent token, external id, body) -> (ok, label, Server-Timing value).
Send = Callable[[str, str, str, dict], tuple[bool, str, str | None]]


# ---------------------------------------------------------------- servers and senders


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_rss(server: subprocess.Popen) -> dict[str, list[float | None]]:
    """RSS of the server's master process and of each worker, MB (multiprocessing's resource
    tracker, also a child of the master, is none of them)."""
    children = [pid for pid in os.listdir("/proc")
                if pid.isdigit() and (fields := proc_stat(pid)) is not None and int(fields[1]) == server.pid
                and b"resource_tracker" not in _cmdline(pid)]
    return {"master": [rss_mb(server.pid)], "workers": [rss_mb(pid) for pid in children]}


def _cmdline(pid: int | str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


@contextmanager
def http_sender(url: str) -> Iterator[Send]:
    with httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=30) as http:
        def send(kind: str, token: str, who: str, body: dict) -> tuple[bool, str, str | None]:
            headers = {"Authorization": f"Bearer {token}"}
            if kind == "turn":
                headers["Idempotency-Key"] = uuid.uuid4().hex
            try:
                response = http.post(f"subjects/{who}/{'turns' if kind == 'turn' else 'recall'}", json=body,
                                     headers=headers)
            except httpx.HTTPError as exc:
                return False, type(exc).__name__, None
            ok = response.status_code < 300 or (kind == "recall" and response.status_code == 404)
            return ok, str(response.status_code), response.headers.get("server-timing")

        yield send


# ---------------------------------------------------------------- the load


def turn_body(text: str, session: dict, types: list[str] | None) -> dict:
    """A turn's request: its text, its session (``--varied``) and, when given, the memory types its
    recall searches (``--turn-types catalog``: a turn's write path beside a near-empty recall)."""
    return {"text": text, "k": 5, **session, **({"types": types} if types else {})}


def run_load(*, sender: Callable[[], AbstractContextManager[Send]], targets: list[tuple[str, str]], clients: int,
             seconds: float, seed: int = 7, texts: list[str] | None = None, varied: bool = False,
             turn_share: float = 1 / 3, turn_types: list[str] | None = None, measure_cpu: bool = False) -> dict:
    """``clients`` threads sending requests to end-users of ``targets`` ((agent token, external id)
    pairs) for ``seconds``; per kind the latency percentiles, throughput, errors by label and,
    when the server sent it, where the time went."""
    texts = texts or SENTENCES
    latencies: dict[str, list[float]] = {kind: [] for kind in KINDS}
    timings: dict[str, list[tuple[float, dict[str, float], set[str]]]] = {kind: [] for kind in KINDS}
    errors = dict.fromkeys(KINDS, 0)
    error_kinds: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    synth, origin = Synth(seed=seed), datetime.now(UTC)

    def client(n: int) -> None:
        rng = random.Random(seed + n)
        said: dict[str, int] = {}  # turns this client sent per end-user: sessions of six
        with sender() as send:
            while time.monotonic() < stop_at:
                token, who = rng.choice(targets)
                kind = "turn" if rng.random() < turn_share else "recall"
                text, session = rng.choice(texts), {}
                if varied and kind == "turn":
                    said[who] = count = said.get(who, 0) + 1
                    session = {"session_id": f"load-{seed}-{n}-{who}-{count // 6}"}
                    text = synth.episode(f"{seed}-{n}-{who}", count, start=origin)["text"]
                elif varied:
                    text = synth.question(rng.randrange(10**9))
                body = turn_body(text, session, turn_types) if kind == "turn" else {"query": text, "k": 10}
                started = time.monotonic()
                ok, label, header = send(kind, token, who, body)
                elapsed = (time.monotonic() - started) * 1000
                phases = server_timing(header) if header is not None else None
                with lock:
                    if ok:
                        latencies[kind].append(elapsed)
                        if phases is not None:
                            timings[kind].append((elapsed, *phases))
                    else:
                        errors[kind] += 1
                        error_kinds[label] = error_kinds.get(label, 0) + 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    speed_before = machine_probe() if measure_cpu else None
    before = cpu_readings() if measure_cpu else None
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
        result[kind] = percentiles(values) or {"n": 0}
        if timings[kind]:
            result[kind]["server_timing"] = timing_summary(timings[kind])
    if before is not None:
        result["cpu"] = cpu_split(before, cpu_readings(), requests=requests, wall=wall)
        result["machine_probe_ms"] = {"before": speed_before, "after": machine_probe()}
    return result


def prepare(*, url: str, targets: list[tuple[str, str]]) -> None:
    """One turn per end-user, one after the other: creating an end-user mints its key (slow by
    design, once), which is not what the load measures."""
    with httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=120) as http:
        for n, (token, who) in enumerate(targets):
            http.post(f"subjects/{who}/turns", json={"text": SENTENCES[n % len(SENTENCES)]},
                      headers={"Authorization": f"Bearer {token}"}).raise_for_status()


@dataclass(frozen=True)
class Seeds:
    steps: list[int]
    warmup: int
    service: list[int]
    service_warmup: int


def step_seeds(steps: int, *, seed: int = 7) -> Seeds:
    """A seed per measured step (the first one ``seed``) and its warm-up, and the same for the
    service-level steps, all different: no step says what another step or a warm-up said."""
    return Seeds(steps=[seed + 1000 * i for i in range(steps)], warmup=seed + 1000 * steps,
                 service=[seed + 500 + 1000 * i for i in range(steps)], service_warmup=seed + 500 + 1000 * steps)


# ---------------------------------------------------------------- Server-Timing

TIMED_PHASES = ("refresh", "embed", "search", "write", "app")


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


def timing_summary(rows: list[tuple[float, dict[str, float], set[str]]]) -> dict:
    """Per phase its p50 / p95 over every request (a phase a request did not record counts 0), and
    the requests that made or waited for a forced refresh (``refreshed``): their share and
    latency p50 / p95 against the others'."""
    refreshed = [elapsed for elapsed, _, flags in rows if "refreshed" in flags]
    others = [elapsed for elapsed, _, flags in rows if "refreshed" not in flags]
    seen = [p for p in TIMED_PHASES if any(p in durations for _, durations, _ in rows)]
    return {"requests": len(rows), "refreshed_share": round(len(refreshed) / len(rows), 3),
            "refreshed": percentiles(refreshed, (50, 95)), "others": percentiles(others, (50, 95)),
            "phases": {p: percentiles([durations.get(p, 0.0) for _, durations, _ in rows], (50, 95)) for p in seen}}


# ---------------------------------------------------------------- where the CPU went (--cpu-split)

_CLASSES = ("elasticsearch", "engram server", "redis", "load generator")
_EMBEDDING_SERVER = "embeddings.server"


def classify(procs: dict[int, tuple[int, str]], *, me: int, es_pid: int | None) -> dict[int, str]:
    """Each process's class, from its (parent, command line): this process ("load generator"), the
    Elasticsearch node (the one of ``es_pid`` when known: a shared machine runs others), Redis,
    Engram's server (a uvicorn process or its workers, and an embedding server; only the ones this
    process started, when it started one), or "other"."""
    def chain(pid: int) -> list[int]:
        seen = []
        while pid in procs and pid not in seen:
            seen.append(pid)
            pid = procs[pid][0]
        return seen

    # The server this process started, and an embedding server it started for a peer's server.
    served = {pid for pid in procs if me in chain(pid)[1:]
              and any("uvicorn" in procs[p][1] or _EMBEDDING_SERVER in procs[p][1] for p in chain(pid))}

    def klass(pid: int) -> str:
        cmd = procs[pid][1]
        if pid == me:
            return "load generator"
        if "org.elasticsearch" in cmd:
            return "elasticsearch" if es_pid in (None, pid) else "other"
        if "redis-server" in cmd:
            return "redis"
        if pid in served or (not served and any("uvicorn" in procs[p][1] for p in chain(pid))):
            return "engram server"
        return "other"

    return {pid: klass(pid) for pid in procs}


def _es_pid() -> int | None:
    """The node's pid, from the pidfile ``scripts/stack.py env`` names (ENGRAM_ES_PIDFILE)."""
    try:
        return int(Path(os.environ["ENGRAM_ES_PIDFILE"]).read_text())
    except (KeyError, OSError, ValueError):
        return None


def _proc_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of every process, by class (``classify``)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (fields := proc_stat(entry)) is None:
            continue
        cmd = _cmdline(entry).replace(b"\0", b" ").decode(errors="replace")
        procs[int(entry)] = (int(fields[1]), cmd, (int(fields[11]) + int(fields[12])) / tick)
    classes = classify({pid: (ppid, cmd) for pid, (ppid, cmd, _) in procs.items()}, me=os.getpid(), es_pid=_es_pid())
    return {pid: (classes[pid], cpu) for pid, (_, _, cpu) in procs.items()}


def _jit_cpu(cpu: dict[int, tuple[str, float]]) -> float | None:
    """CPU seconds of the Elasticsearch node's JIT compiler threads ("C1/C2 CompilerThre…" in
    ``/proc``); None without a node on this machine."""
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
            "gc ms": sum(c["collection_time_in_millis"] for c in collectors)}


def cpu_readings() -> tuple:
    """What ``cpu_split`` compares: CPU by process, the node's statistics, its compiler's CPU."""
    cpu = _proc_cpu()
    return cpu, _node_stats(), _jit_cpu(cpu)


def cpu_split(before: tuple, after: tuple, *, requests: int, wall: float) -> dict:
    """CPU ms per request by process class and the node's work per request, between two
    ``cpu_readings()``: (``_proc_cpu()``, ``_node_stats()``, ``_jit_cpu()``)."""
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


# ---------------------------------------------------------------- report


def _pair(p: dict | None) -> str:
    return f"{p['p50']:.0f} / {p['p95']:.0f}" if p else "n/a"


def steps_table(steps: list[dict]) -> str:
    """Latency, throughput and errors per step; then where the time and the CPU went, when measured."""
    lines = ["| clients | kind | requests | p50 ms | p95 ms | p99 ms | throughput (all) req/s | errors |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in steps:
        for kind in KINDS:
            k = r[kind]
            cells = [f"{k[p]:.0f}" if p in k else "n/a" for p in ("p50", "p95", "p99")]
            lines.append(f"| {r['clients']} | {kind} | {k['n']} | " + " | ".join(cells)
                         + f" | {r['throughput_rps']} | {r['errors']} |")
    lines += [f"errors at {r['clients']} clients: {r['error_kinds']}" for r in steps if r["errors"]]
    timed = [(r, kind) for r in steps for kind in KINDS if "server_timing" in r[kind]]
    if timed:
        lines += ["", "Where the time went (Server-Timing), ms p50 / p95", "",
                  "| clients | kind | refreshed | latency, refreshed | latency, others | "
                  + " | ".join(TIMED_PHASES) + " |", "|---:|---|---:|---|---|" + "---|" * len(TIMED_PHASES)]
        for r, kind in timed:
            t = r[kind]["server_timing"]
            phases = " | ".join(_pair(t["phases"].get(p)) for p in TIMED_PHASES)
            lines.append(f"| {r['clients']} | {kind} | {100 * t['refreshed_share']:.1f}% | {_pair(t['refreshed'])} "
                         f"| {_pair(t['others'])} | {phases} |")
    split = [r for r in steps if "cpu" in r]
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
        lines += [f"the machine's speed at {r['clients']} clients (benchmarks/machine.py's fixed workload, ms of CPU, "
                  f"lower is faster): {r['machine_probe_ms']['before']} before, {r['machine_probe_ms']['after']} after"
                  for r in split if "machine_probe_ms" in r]
    return "\n".join(lines)


def rss_line(rss: dict[str, list[float | None]]) -> str:
    return "RSS, MB: " + "; ".join(f"{kind} {', '.join(f'{v:.0f}' for v in values if v is not None)}"
                                   for kind, values in rss.items() if values)
