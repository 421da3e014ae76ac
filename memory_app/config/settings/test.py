"""Tests: the real Elasticsearch started by scripts/test, an isolated index prefix per run."""

import os
import uuid

from cryptography.fernet import Fernet

from .base import *  # noqa: F403
from .base import env

SECRET_KEY = "test-only-key"
DATABASES = {"default": env.db("DATABASE_URL", default="sqlite:///:memory:")}
# Each run (and each xdist worker) gets its own prefix so runs never see each other's data.
ES_INDEX_PREFIX = f"engram-test-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')}-{uuid.uuid4().hex[:8]}"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
# A fresh encryption key per run: stored secrets never outlive the test database.
ENGRAM_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]

# Every /healthz call in a test sees the state the test just set up.
ENGRAM_HEALTH_CACHE_SECONDS = 0
