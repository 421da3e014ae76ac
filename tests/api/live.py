"""A real Engram server process for end-to-end tests: ``manage.py runserver`` (threaded WSGI) on
its own SQLite file database and index prefix, optionally with a Celery worker (+ beat) on a
filesystem broker. Unlike pytest-django's ``live_server``, whose server threads share the test
thread's single in-memory SQLite connection (and its transaction state), every request here has
its own database connection, as in production."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
# What the tests present to a live server's /healthz for its whole report.
MONITOR_TOKEN = secrets.token_urlsafe(16)
MONITOR = {"Authorization": f"Bearer {MONITOR_TOKEN}"}

_CREATE_TOKEN = """
from tenants.models import AgentToken, Tenant
from tenants.services.tokens import agent_token_create
tenant, _ = Tenant.objects.get_or_create(slug="{slug}", defaults={{"name": "{slug}"}})
print(agent_token_create(tenant=tenant, name="e2e", scopes=AgentToken.Scope.values, actor="tests")[1])
"""

_CREATE_TOKENS = """
import json
from tenants.models import Tenant
from tenants.services.tokens import agent_token_create
tenant, _ = Tenant.objects.get_or_create(slug="{slug}", defaults={{"name": "{slug}"}})
print(json.dumps({{name: agent_token_create(tenant=tenant, name=name, scopes=scopes, actor="tests")[1]
                  for name, scopes in {scopes!r}.items()}}))
"""

_INVALIDATE_KEYS = """
from tenants.es_keys import invalidate_keys
from tenants.models import SubjectKey, WriterKey
ids = list(SubjectKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
ids += list(WriterKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
invalidate_keys(key_ids=ids)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveEngram:
    def __init__(self, workdir: Path, **env: str):
        self.workdir = workdir
        from django.conf import settings

        # Under the run's prefix: the run's clean-up drops what this one may not (its audit checkpoints).
        self.prefix = f"{settings.ES_INDEX_PREFIX}-live-{uuid.uuid4().hex[:8]}"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.api.server_settings",
            "ENGRAM_STATE_DIR": str(workdir),
            "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
            "ES_INDEX_PREFIX": self.prefix,
            "ENGRAM_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
            "ENGRAM_AUDIT_KEYS": secrets.token_urlsafe(32),
            "ENGRAM_AUDIT_SIGNING_KEYS": secrets.token_urlsafe(32),
            "ENGRAM_MONITOR_TOKEN": MONITOR_TOKEN,
            "DJANGO_SECRET_KEY": uuid.uuid4().hex * 2,
            "CELERY_BROKER_URL": "filesystem://",
            "ENGRAM_API_RATE": "1000000/minute",
            "ENGRAM_API_IMPORT_RATE": "1000000/minute",
            "LOG_LEVEL": "WARNING",
            **env,
        }
        self.env.pop("PYTEST_XDIST_WORKER", None)
        self.server: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None

    def manage(self, *args: str) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                                text=True, timeout=300)
        if result.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def setup(self) -> None:
        self.manage("migrate", "-v", "0")
        self.manage("es_setup")

    def token(self, tenant: str = "live") -> str:
        return self.manage("shell", "-c", _CREATE_TOKEN.format(slug=tenant)).strip().splitlines()[-1]

    def tokens(self, scopes: dict[str, list[str]], tenant: str = "live") -> dict[str, str]:
        """A token of ``tenant`` per name, with that name's scopes (one process for all)."""
        import json

        out = self.manage("shell", "-c", _CREATE_TOKENS.format(slug=tenant, scopes=scopes))
        return json.loads(out.strip().splitlines()[-1])

    def start(self) -> None:
        self.server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=ROOT, env=self.env, stdout=open(self.workdir / "server.log", "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180  # a loaded two-core machine has taken over 60 s
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"the server exited:\n{(self.workdir / 'server.log').read_text()}")
            try:
                if httpx.get(f"{self.url}/api/v1/schema/", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()  # not left running after the test that needed it
        raise RuntimeError("the server did not come up")

    def start_worker(self) -> None:
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--beat", "--pool", "solo",
             "--loglevel", "INFO", "--schedule", str(self.workdir / "beat-schedule")],
            cwd=ROOT, env=self.env, stdout=open(self.workdir / "worker.log", "ab"), stderr=subprocess.STDOUT)

    def log(self, name: str = "server") -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        for process in (self.worker, self.server):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def cleanup(self, es_admin) -> None:
        from engram_core.es.schema import drop_indices

        try:
            self.manage("shell", "-c", _INVALIDATE_KEYS)
        finally:
            drop_indices(es=es_admin, prefix=self.prefix)
