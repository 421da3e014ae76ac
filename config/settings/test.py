"""Tests: the real Elasticsearch started by scripts/test, an isolated index prefix per run."""

import os
import secrets
import uuid

from cryptography.fernet import Fernet

from .base import *  # noqa: F403
from .base import env

SECRET_KEY = "test-only-key"
DATABASES = {"default": env.db("DATABASE_URL", default="sqlite:///:memory:")}
# Connections are not kept between requests here (CONN_MAX_AGE 0, Django's default): a pool thread
# holding one would keep the test database from being dropped. The servers tests start (the MCP
# end-to-end test) run the development settings, which keep them as production does.
# Each run (and each xdist worker) gets its own prefix so runs never see each other's data.
ES_INDEX_PREFIX = f"engram-test-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')}-{uuid.uuid4().hex[:8]}"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
# A fresh encryption key per run: stored secrets never outlive the test database.
ENGRAM_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
# The audit keys scripts/test exports (processes a test starts inherit them), else fresh ones.
ENGRAM_AUDIT_KEYS = env.list("ENGRAM_AUDIT_KEYS", default=[secrets.token_urlsafe(32)])
ENGRAM_AUDIT_SIGNING_KEYS = env.list("ENGRAM_AUDIT_SIGNING_KEYS", default=[secrets.token_urlsafe(32)])

# What a monitor presents to /healthz for the whole report (tests: the `monitor_headers` fixture).
ENGRAM_MONITOR_TOKEN = env.str("ENGRAM_MONITOR_TOKEN", default="test-monitor-token")
# Every /healthz call in a test sees the state the test just set up.
ENGRAM_HEALTH_CACHE_SECONDS = 0
# Per-tenant usage is written when a test asks (memory_app.metering.usage_flush), inside its transaction.
ENGRAM_USAGE_FLUSH_SECONDS = 3600.0
