"""Engram refuses to serve memory when the cluster cannot enforce document-level security.

The node is a trial licence; declaring only platinum/enterprise DLS-capable makes the real
probe of the real cluster answer "no DLS", with nothing mocked.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from engram_core.errors import ServiceUnavailable
from tenants.services.clients import subject_es_client, writer_es_client
from tenants.services.guard import _capabilities, require_dls
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes

NO_DLS = ("platinum", "enterprise")


def test_dls_available_on_the_trial_node(es_admin):
    caps = require_dls()
    assert caps.dls and caps.licence == "trial"


def test_the_probe_is_cached_between_calls(es_admin):
    assert _capabilities() is _capabilities()


def test_engram_refuses_to_serve_memory_without_dls(tenant, es_prefix, settings, client, monitor_headers):
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    settings.ES_DLS_LICENCES = NO_DLS

    with pytest.raises(ServiceUnavailable) as error:
        require_dls()
    assert (error.value.status, error.value.code) == (503, "isolation_unavailable")
    assert "document-level security" in error.value.message
    assert error.value.details["licence"] == "trial"
    with pytest.raises(ServiceUnavailable):
        subject_es_client(subject=subject)
    with pytest.raises(ServiceUnavailable):
        writer_es_client()
    with pytest.raises(ServiceUnavailable):
        subject_get_or_create(tenant=tenant, external_id="bob", lifetimes=KeyLifetimes.from_settings())
    response = client.get("/healthz", headers=monitor_headers)
    assert response.status_code == 503
    assert response.json()["elasticsearch"]["document_level_security"] is False
    assert client.get("/healthz").json() == {"status": "unavailable"}  # no details for anyone else


def test_the_insecure_development_setting_serves_but_logs_every_time(tenant, es_prefix, settings, caplog):
    settings.ES_DLS_LICENCES = NO_DLS
    settings.ENGRAM_ALLOW_INSECURE_NO_DLS = True

    with caplog.at_level(logging.WARNING, logger="tenants.services.guard"):
        assert require_dls().dls is False
        require_dls()

    insecure = [r for r in caplog.records if r.levelno >= logging.ERROR and "INSECURE" in r.getMessage()]
    assert len(insecure) == 2
    # Security is still on, so reads still go through the subject's own key.
    subject = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    assert subject_es_client(subject=subject).security.authenticate()["api_key"]["name"].startswith("engram-subject")


def test_production_refuses_the_insecure_development_setting():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production",
           "DJANGO_SECRET_KEY": "x" * 50, "ES_ADMIN_USERNAME": "engram-admin", "ES_ADMIN_PASSWORD": "secret",
           "ENGRAM_ENCRYPTION_KEYS": Fernet.generate_key().decode(), "ENGRAM_ALLOW_INSECURE_NO_DLS": "true",
           "ENGRAM_AUDIT_KEYS": "a" * 43, "ENGRAM_AUDIT_SIGNING_KEYS": "b" * 43, "ES_AUDIT_USERNAME": "engram-audit",
           "ES_AUDIT_PASSWORD": "secret"}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=Path(__file__).resolve().parents[3], env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "ENGRAM_ALLOW_INSECURE_NO_DLS is a development setting" in result.stderr
