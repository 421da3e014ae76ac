"""Backup and restore as the deployment guide says to do them: the isolation probe's world (three
tenants, one in dedicated indices) is seeded on the multi-node cluster and snapshotted, with the
security feature state (the end-users' API keys), into the shared ``fs`` repository; the cluster
is then lost to Engram (its keys invalidated, the indices dropped); a fresh cluster restores the
snapshot, and every probe of the isolation probe passes against the restored world, read with the
keys the database holds."""

from __future__ import annotations

import json
import logging
import os
import ssl
import uuid

import httpx
import pytest

from tests.cluster.deployment import CLUSTER_PORT, INSTANCE, Deployment, cluster_env, stack

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CLUSTER_PORT not in os.environ, reason="needs the multi-node cluster of scripts/test")]

logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
FRESH = os.environ.get("ENGRAM_TEST_RESTORE_INSTANCE", "test-restore")


def _superuser(instance: str, port: str, es: dict[str, str]) -> httpx.Client:
    """The ``elastic`` superuser of an instance: snapshots and restores are the operator's, not Engram's."""
    password = stack("secret", "--name", f"es-{instance}-elastic-password", instance=instance, port=port).strip()
    ca = es.get("ES_CA_CERTS")
    return httpx.Client(base_url=es["ES_URL"].split(",")[0], auth=("elastic", password), timeout=300,
                        verify=ssl.create_default_context(cafile=ca) if ca else True)


def _ok(response: httpx.Response) -> dict:
    assert response.status_code < 300, response.text
    return response.json()


def test_a_snapshot_restored_into_a_fresh_cluster_passes_the_isolation_probe(tmp_path):
    source = cluster_env()
    fresh_port = os.environ.get("ENGRAM_TEST_RESTORE_ES_PORT", str(int(os.environ[CLUSTER_PORT]) + 3))
    deployment = Deployment(tmp_path, es=source, redis_db=8, web=0, workers=0)
    deployment.setup()
    prefix, world = f"{deployment.prefix}-backup", tmp_path / "world.pickle"
    run = uuid.uuid4().hex[:8]
    repository, snapshot = f"engram-test-{run}", f"nightly-{run}"
    tests = "from tests.cluster import restore_world as r; r."
    started_fresh = False
    try:
        seeded = json.loads(deployment.manage("shell", "-c", f"{tests}seed(prefix={prefix!r}, out={str(world)!r})")
                            .strip().splitlines()[-1])
        with _superuser(INSTANCE, os.environ[CLUSTER_PORT], source) as es:
            # A relative location is under the node's path.repo, which every instance of the stack shares.
            _ok(es.put(f"/_snapshot/{repository}", json={"type": "fs", "settings": {"location": repository}}))
            taken = _ok(es.put(f"/_snapshot/{repository}/{snapshot}", params={"wait_for_completion": "true"},
                               json={"indices": f"{prefix}*", "include_global_state": False,
                                     "feature_states": ["security"]}))["snapshot"]
            assert taken["state"] == "SUCCESS" and taken["shards"]["failed"] == 0, taken
            assert set(seeded["indices"]) <= set(taken["indices"]), (seeded, taken["indices"])
        deployment.manage("shell", "-c", f"{tests}lose(prefix={prefix!r})")

        started_fresh = True
        stack("up", instance=FRESH, port=fresh_port)
        fresh = cluster_env(instance=FRESH, port=fresh_port)
        with _superuser(FRESH, fresh_port, fresh) as es:
            _ok(es.put(f"/_snapshot/{repository}", json={"type": "fs", "settings": {"location": repository,
                                                                                   "readonly": True}}))
            restored = _ok(es.post(f"/_snapshot/{repository}/{snapshot}/_restore",
                                   params={"wait_for_completion": "true"},
                                   json={"indices": f"{prefix}*", "include_global_state": False,
                                         "feature_states": ["security"]}))["snapshot"]
            assert restored["shards"]["failed"] == 0, restored
            _ok(es.get("/_cluster/health", params={"wait_for_status": "green", "timeout": "120s"}))
            count = _ok(es.get(f"/{prefix}*/_count", params={"expand_wildcards": "open"}))["count"]
            assert count == seeded["documents"]
            _ok(es.delete(f"/_snapshot/{repository}"))
        # Engram pointed at the fresh cluster with the credentials it had: the restored security
        # state holds its users and every key it minted.
        restored_env = {**source, "ES_URL": fresh["ES_URL"]}
        restored_env.pop("ES_CA_CERTS", None)
        probe = Deployment(tmp_path, es=restored_env, redis_db=8, web=0, workers=0,
                           database_url=deployment.database_url,
                           ENGRAM_ENCRYPTION_KEYS=deployment.env["ENGRAM_ENCRYPTION_KEYS"])
        report = json.loads(probe.manage("shell", "-c", f"{tests}probe(world_file={str(world)!r})", timeout=900)
                            .strip().splitlines()[-1])
        print("isolation probe on the restored cluster:", report["summary"])
        assert report["leaks"] == 0 and report["failures"] == 0 and report["probes"] > 500, report
    finally:
        if started_fresh:
            stack("destroy", instance=FRESH, port=fresh_port)
        with _superuser(INSTANCE, os.environ[CLUSTER_PORT], source) as es:
            es.delete(f"/_snapshot/{repository}/{snapshot}")
            es.delete(f"/_snapshot/{repository}")
        deployment.cleanup()
