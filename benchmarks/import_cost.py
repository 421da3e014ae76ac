"""Where a bulk import's CPU goes (this process against Elasticsearch), and what the HNSW graph it
builds returns for a large end-user.

Run through ``scripts/bench --import-cost`` (its own Elasticsearch, a fresh node each run);
extra arguments come here:

    scripts/bench --import-cost [--users 4] [--episodes 1000] [--heavy 20000] [--callers 2] [--queries 200]

It imports the scale benchmark's synthetic episodes (``benchmarks/scale_data.py``) through
``write_submit`` (the path of ``POST .../episodes/import``): ``--users`` end-users of
``--episodes`` each in one call, and one heavy end-user of ``--heavy`` in calls of 5,000, from
``--callers`` threads. Reported: episodes per second, this process's CPU (every thread: the
embedder, building and sending the bulk bodies) and Elasticsearch's (``_nodes/stats``, the node's
process CPU, up to the end of the merges the import set off). Then, for ``--queries`` of the scale
benchmark's questions, the heavy end-user's kNN search as a recall sends it (``k`` 80,
``num_candidates`` ENGRAM_RECALL_NUM_CANDIDATES, the end-user's filter) against the exact top 80
by cosine over all of that end-user's vectors (numpy): the mean share of the exact top 10 and top
80 the search returns, and its latency. Settings such as ``ENGRAM_HNSW_EF_CONSTRUCTION``,
``ENGRAM_HNSW_M``, ``ENGRAM_VECTOR_INDEX_TYPE`` or ``ENGRAM_EMBEDDER_THREADS`` are read from the
environment as usual, so variants are separate runs:

    for ef in 0 50; do ENGRAM_HNSW_EF_CONSTRUCTION=$ef scripts/bench --import-cost; done
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Indices of their own: the bench node keeps its data between runs, and each run imports the same ids.
os.environ.setdefault("ES_INDEX_PREFIX", f"engram-import-cost-{int(time.time())}")

from recall_latency import percentiles  # noqa: E402  (sets Django up)

import numpy as np  # noqa: E402
import scale_data  # noqa: E402
from es_cost import node_cpu_ms  # noqa: E402
from scale import import_call  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from elasticsearch import helpers  # noqa: E402

from engram_core.es.client import admin_client  # noqa: E402
from engram_core.es.schema import MemoryType, alias_name  # noqa: E402
from memory_app.embeddings import get_embedder  # noqa: E402
from tenants.models import Tenant  # noqa: E402
from tenants.selectors import memory_scope  # noqa: E402
from tenants.services.subjects import subject_get_or_create  # noqa: E402

HEAVY_CALL = 5000


def merges_running(es) -> int:
    return sum(n["indices"]["merges"]["current"] for n in es.nodes.stats(metric="indices")["nodes"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per ordinary end-user (one call)")
    parser.add_argument("--heavy", type=int, default=20000, help="the heavy end-user's episodes (calls of 5,000)")
    parser.add_argument("--callers", type=int, default=2, help="import calls at once")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    call_command("migrate", verbosity=0)
    call_command("es_setup", verbosity=0)
    es = admin_client()
    synth = scale_data.Synth()
    tenant = Tenant.objects.create(slug=f"import-cost-{int(time.time())}", name="Import cost")
    users = [f"user-{n}" for n in range(args.users)] + ["heavy"]
    subjects = {u: subject_get_or_create(tenant=tenant, external_id=u, actor="bench") for u in users}
    get_embedder().load()

    jobs = [(u, 0, args.episodes) for u in users[:-1]]
    jobs += [("heavy", start, min(start + HEAVY_CALL, args.heavy)) for start in range(0, args.heavy, HEAVY_CALL)]
    cpu, es_before, started = time.process_time(), node_cpu_ms(es), time.perf_counter()
    with ThreadPoolExecutor(args.callers) as pool:
        imported = sum(n for n, _seconds in pool.map(lambda job: import_call(synth, tenant, *job), jobs))
    wall, python_cpu = time.perf_counter() - started, time.process_time() - cpu
    waited = time.perf_counter()
    while merges_running(es) and time.perf_counter() - waited < 60:
        time.sleep(0.5)
    es_used = (node_cpu_ms(es) - es_before) / 1000
    log(f"imported {imported} episodes in {wall:.1f} s")

    index = alias_name(MemoryType.EPISODIC)
    es.indices.refresh(index=index)
    scope = [{"term": {field: value}} for field, value in memory_scope(subject=subjects["heavy"]).items()]
    ids, vectors = [], []
    for hit in helpers.scan(es, index=index, query={"query": {"bool": {"filter": scope}}, "_source": ["embedding"]},
                            size=1000):
        ids.append(hit["_id"])
        vectors.append(hit["_source"]["embedding"])
    matrix = np.asarray(vectors, dtype=np.float32)
    questions = np.asarray(get_embedder().embed_documents([synth.question(n) for n in range(args.queries)]),
                           dtype=np.float32)
    k, top10, top80, latency = 80, [], [], []
    for question in questions:
        exact = [ids[i] for i in np.argsort(-(matrix @ question))[:k]]
        knn = {"field": "embedding", "query_vector": question.tolist(), "k": k,
               "num_candidates": max(k, settings.ENGRAM_RECALL_NUM_CANDIDATES), "filter": scope}
        sent = time.perf_counter()
        found = [h["_id"] for h in es.search(index=index, knn=knn, size=k, source=False)["hits"]["hits"]]
        latency.append((time.perf_counter() - sent) * 1000)
        top10.append(len(set(found[:10]) & set(exact[:10])) / 10)
        top80.append(len(set(found) & set(exact)) / k)
    segments = es.indices.segments(index=index)["indices"]
    count = sum(len(copy["segments"]) for i in segments.values() for shard in i["shards"].values() for copy in shard)
    p = percentiles(latency)
    # (getattr: this script also measures releases without these settings and embedder workers)
    options = {"type": settings.ENGRAM_VECTOR_INDEX_TYPE, "m": getattr(settings, "ENGRAM_HNSW_M", 0) or "16 (default)",
               "ef_construction": getattr(settings, "ENGRAM_HNSW_EF_CONSTRUCTION", 0) or "100 (default)",
               "embedder threads x workers": f"{getattr(get_embedder(), 'threads', '?')} x "
                                             f"{getattr(get_embedder(), 'workers', 1)}"}
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          + ", ".join(f"{key} {value}" for key, value in options.items()) + "\n")
    print("| episodes | episodes/s | this process CPU s | Elasticsearch CPU s | heavy end-user's vectors "
          "| kNN vs exact: top-10 / top-80 share | kNN p50 / p95 ms | episodic segments |")
    print("|---:|---:|---:|---:|---:|---|---|---:|")
    print(f"| {imported} | {imported / wall:.0f} | {python_cpu:.1f} | {es_used:.1f} | {len(ids)} "
          f"| {statistics.fmean(top10):.4f} / {statistics.fmean(top80):.4f} | {p['p50']:.1f} / {p['p95']:.1f} "
          f"| {count} |")


if __name__ == "__main__":
    main()
