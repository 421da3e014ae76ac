"""Engram deployed as in production on the multi-node cluster ``scripts/test`` starts: two web
processes (uvicorn) and two Celery workers (one running beat) on production settings, Redis as
broker and shared cache, a PostgreSQL database of its own (SQLite when the run has no PostgreSQL),
and the cluster's nodes in ``ES_URL`` over TLS. The tests drive it over HTTP only."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_PORT = "ENGRAM_TEST_CLUSTER_ES_PORT"
INSTANCE = os.environ.get("ENGRAM_TEST_CLUSTER_INSTANCE", "test-cluster")

_CREATE_TOKEN = """
from tenants.models import AgentToken, Tenant
from tenants.services.tokens import agent_token_create
tenant, _ = Tenant.objects.get_or_create(slug="{slug}", defaults={{"name": "{slug}"}})
print(agent_token_create(tenant=tenant, name="cluster", scopes=AgentToken.Scope.values, actor="tests")[1])
"""


def stack(action: str, *extra: str, instance: str = INSTANCE, port: str | None = None) -> str:
    """``scripts/stack.py <action>`` on the test cluster; its output."""
    # A node starting on a machine busy with the load takes minutes: give it time.
    env = {**os.environ, "ENGRAM_ES_START_TIMEOUT": os.environ.get("ENGRAM_ES_START_TIMEOUT", "600")}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "stack.py"), action, "--instance", instance,
                             "--es-port", port or os.environ[CLUSTER_PORT], *extra],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode:
        raise RuntimeError(f"stack.py {action} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def cluster_env(instance: str = INSTANCE, port: str | None = None) -> dict[str, str]:
    """What ``scripts/stack.py env`` exports for the cluster: its nodes' URLs, CA and credentials."""
    env = {}
    for line in stack("env", instance=instance, port=port).splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    return env


def es_http(es: dict[str, str], *, user: str = "ADMIN", **kwargs) -> httpx.Client:
    """An HTTP client for the cluster's nodes with one of Engram's credentials (ADMIN, MONITOR)."""
    ca = es.get("ES_CA_CERTS")
    return httpx.Client(verify=ssl.create_default_context(cafile=ca) if ca else True,
                        auth=(es[f"ES_{user}_USERNAME"], es[f"ES_{user}_PASSWORD"]), **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database(workdir: Path) -> tuple[str, str | None]:
    """A database of this deployment's own: a new one on the run's PostgreSQL server (its name, to
    drop), or a SQLite file when the run has none."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return f"sqlite:///{workdir / 'db.sqlite3'}", None
    import psycopg

    name = f"engram_cluster_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}")), name


def _drop_database(name: str) -> None:
    import psycopg

    parts = urlsplit(os.environ["DATABASE_URL"])
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Deployment:
    """The processes of one deployment, started by ``start`` and stopped by ``stop``."""

    def __init__(self, workdir: Path, *, es: dict[str, str], redis_db: int, web: int = 2, workers: int = 2,
                 database_url: str | None = None, **settings: str):
        self.workdir = workdir
        self.prefix = f"engram-test-cluster-{uuid.uuid4().hex[:8]}"
        broker = os.environ.get("CELERY_BROKER_URL", "")
        if not broker.startswith("redis://"):
            raise RuntimeError("a deployment of several processes needs the Redis scripts/test starts")
        redis = broker.rsplit("/", 1)[0]
        # Another deployment's database (database_url) stays that deployment's to drop.
        self.database_url, self.database = (database_url, None) if database_url else _database(workdir)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("ES_", "PYTEST", "DJANGO_"))},
            **es,
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DJANGO_SECRET_KEY": uuid.uuid4().hex * 2,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            # Plain HTTP on loopback: in production a TLS-terminating proxy sits in front of the web tier.
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "ENGRAM_STATE_DIR": str(workdir),
            "DATABASE_URL": self.database_url,
            "ES_INDEX_PREFIX": self.prefix,
            "ENGRAM_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
            # What the tests present to /healthz for the whole report (the outbox backlog).
            "ENGRAM_MONITOR_TOKEN": uuid.uuid4().hex,
            "CELERY_BROKER_URL": f"{redis}/{redis_db}",
            "ENGRAM_CACHE_URL": f"{redis}/{redis_db + 1}",
            "ENGRAM_API_RATE": "1000000/minute",
            "LOG_LEVEL": "WARNING",
            **settings,
        }
        self.web_ports = [free_port() for _ in range(web)]
        self.workers = workers
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def monitor_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.env['ENGRAM_MONITOR_TOKEN']}"}

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.web_ports]

    def manage(self, *args: str, timeout: float = 300) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                                text=True, timeout=timeout)
        if result.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def setup(self) -> None:
        """What a deploy runs: migrate, then es_setup."""
        self.manage("migrate", "-v", "0")
        self.manage("es_setup")

    def token(self, tenant: str) -> str:
        return self.manage("shell", "-c", _CREATE_TOKEN.format(slug=tenant)).strip().splitlines()[-1]

    def _spawn(self, name: str, command: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "ab")
        self.processes[name] = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def start(self) -> None:
        for n, port in enumerate(self.web_ports, 1):
            self._spawn(f"web{n}", [sys.executable, "-m", "uvicorn", "config.asgi:application",
                                    "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                                    "--loop", "uvloop", "--http", "httptools", "--workers", "1"])
        for n in range(1, self.workers + 1):
            beat = ["--beat", "--schedule", str(self.workdir / "beat-schedule")] if n == 1 else []
            self._spawn(f"worker{n}", [sys.executable, "-m", "celery", "-A", "config", "worker",
                                       "-n", f"worker{n}@%h", "--pool", "solo", "--loglevel", "INFO", *beat])
        deadline = time.monotonic() + 240
        for name, url in zip([f"web{n}" for n in range(1, len(self.urls) + 1)], self.urls, strict=True):
            while True:
                if self.processes[name].poll() is not None:
                    raise RuntimeError(f"{name} exited:\n{self.log(name)[-3000:]}")
                try:
                    if httpx.get(f"{url}/healthz", timeout=5).status_code in (200, 503):
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not come up:\n{self.log(name)[-3000:]}")
                time.sleep(0.5)

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def rss_mb(self) -> dict[str, float]:
        """Each running process's resident memory, MB."""
        out = {}
        for name, process in self.processes.items():
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
            except OSError:
                continue
            out[name] = round(int(next(line.split()[1] for line in status.splitlines()
                                       if line.startswith("VmRSS:"))) / 1024)
        return out

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def cleanup(self) -> None:
        """Invalidate the keys minted, drop the indices and the database."""
        try:
            self.manage("shell", "-c", _CLEANUP.format(prefix=self.prefix))
        finally:
            if self.database:
                _drop_database(self.database)


_CLEANUP = """
from engram_core.es.client import admin_client
from engram_core.es.schema import drop_indices
from tenants.es_keys import invalidate_keys
from tenants.models import SubjectKey, WriterKey
ids = list(SubjectKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
ids += list(WriterKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
invalidate_keys(key_ids=ids)
drop_indices(es=admin_client(), prefix="{prefix}")
"""
