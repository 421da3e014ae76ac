"""The writer key's grant on a cluster with replicas: a refresh through a memory alias reaches each
shard copy on the node that holds it, which authorises the shard action on the concrete index. A
single node authorises it under the alias, so only a cluster shows a grant that is too narrow."""

from __future__ import annotations

import os
import uuid

import pytest

from engram_core.es.schema import all_aliases, index_base
from tenants.es_keys import writer_role_descriptors
from tests.cluster.deployment import CLUSTER_PORT, cluster_env, es_http

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CLUSTER_PORT not in os.environ, reason="needs the multi-node cluster of scripts/test")]


def test_the_writer_key_refreshes_the_memory_aliases_through_every_node():
    es = cluster_env()
    nodes = es["ES_URL"].split(",")
    prefix = f"engram-test-writer-{uuid.uuid4().hex[:8]}"
    index, aliases = f"{index_base(prefix=prefix)}-v1", all_aliases(prefix=prefix)
    with es_http(es, timeout=60) as admin, es_http(es, user="KEYS", timeout=60) as keys:
        created = admin.put(f"{nodes[0]}/{index}", json={
            "settings": {"number_of_shards": 2, "number_of_replicas": 1},
            "mappings": {"properties": {"text": {"type": "text"}}},  # as es_setup's: no dynamic mapping
            "aliases": {alias: {} for alias in aliases}})
        assert created.status_code == 200, created.text
        try:
            health = admin.get(f"{nodes[0]}/_cluster/health/{index}",
                               params={"wait_for_status": "green", "timeout": "50s"}).json()
            assert health["status"] == "green", health
            minted = keys.post(f"{nodes[0]}/_security/api_key", json={
                "name": f"{prefix}-writer", "expiration": "1h",
                "role_descriptors": writer_role_descriptors(prefix=prefix)})
            assert minted.status_code == 200, minted.text
            writer = {"Authorization": f"ApiKey {minted.json()['encoded']}"}
            # Each of the writer's actions through the aliases, on whichever node is asked.
            alias = aliases[0]
            for n, node in enumerate(nodes):
                doc = f"{node}/{alias}/_doc/d{n}"
                calls = [admin.put(doc, json={"text": "a turn"}, headers=writer, auth=None),
                         admin.post(f"{node}/{alias}/_update/d{n}", json={"doc": {"text": "b"}}, headers=writer, auth=None),
                         admin.get(doc, headers=writer, auth=None),
                         admin.post(f"{node}/{alias}/_mget", json={"ids": [f"d{n}"]}, headers=writer, auth=None),
                         admin.post(f"{node}/{','.join(aliases)}/_refresh", headers=writer, auth=None),
                         admin.post(f"{node}/{alias}/_search", headers=writer, auth=None),
                         admin.post(f"{node}/_msearch", content=f'{{"index":"{alias}"}}\n{{}}\n',
                                    headers={**writer, "Content-Type": "application/x-ndjson"}, auth=None),
                         admin.delete(doc, headers=writer, auth=None)]
                assert [c.status_code for c in calls] == [201, 200, 200, 200, 200, 200, 200, 200], \
                    (node, [c.text[:300] for c in calls if c.status_code >= 300])
                assert calls[4].json()["_shards"]["failed"] == 0, (node, calls[4].text)
                assert all("error" not in r for r in calls[6].json()["responses"]), calls[6].text
            # The grant on the concrete index is refresh alone: its documents stay out of reach.
            assert admin.post(f"{nodes[0]}/{index}/_search", headers=writer, auth=None).status_code == 403
        finally:
            admin.delete(f"{nodes[0]}/{index}")
