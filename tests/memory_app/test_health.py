import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_healthz_reports_a_healthy_stack(client, db, es_prefix, monitor_headers):
    response = client.get("/healthz", headers=monitor_headers)
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["elasticsearch"]["version"].startswith("9.")
    assert body["elasticsearch"]["licence"] == "trial"
    assert body["elasticsearch"]["document_level_security"] is True
    assert body["indices"] == {"episodic": True, "semantic": True, "procedural": True, "catalog": True}
    assert body["broker"]["reachable"] is True
    assert body["vectors"] == {"embedder": "all-MiniLM-L6-v2 int8 v3",
                               "indices": dict.fromkeys(["episodic", "semantic", "procedural", "catalog"],
                                                        "all-MiniLM-L6-v2 int8 v3")}
    assert body["reasons"] == []
    assert response["Cache-Control"] == "no-store"


def test_healthz_names_indices_written_by_another_embedder(client, db, es_prefix, settings, monitor_headers):
    from memory_app.providers import clear_cache

    settings.ENGRAM_EMBEDDER_RUNTIME = "onnx"  # a process configured unlike the one that set the indices up
    clear_cache()
    try:
        response = client.get("/healthz", headers=monitor_headers)
    finally:
        clear_cache()
    assert response.status_code == 503
    assert response.json()["vectors"]["embedder"] == "all-MiniLM-L6-v2"
    assert response.json()["reasons"] == [
        "indices hold vectors of 'all-MiniLM-L6-v2 int8 v3' and this process embeds with 'all-MiniLM-L6-v2': run "
        "`manage.py es_setup` to compute them again, or configure the embedder that wrote them (ENGRAM_EMBEDDER, "
        "ENGRAM_EMBEDDER_RUNTIME)"]


def test_healthz_names_missing_indices(client, db, es_admin, settings, monitor_headers):
    settings.ES_INDEX_PREFIX = "engram-test-never-created"
    response = client.get("/healthz", headers=monitor_headers)
    assert response.status_code == 503
    assert response.json()["indices"] == {"episodic": False, "semantic": False, "procedural": False, "catalog": False}
    assert any("indices missing: episodic, semantic, procedural, catalog" in r for r in response.json()["reasons"])


def test_healthz_names_an_unreachable_broker(client, db, es_prefix, settings, monitor_headers):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    response = client.get("/healthz", headers=monitor_headers)
    assert response.status_code == 503
    assert response.json()["broker"]["reachable"] is False
    assert any(r.startswith("broker unreachable (redis)") for r in response.json()["reasons"])


def _stack(action: str) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "stack.py"), action,
         "--instance", os.environ["ENGRAM_STACK_INSTANCE"], "--es-port", os.environ["ENGRAM_STACK_ES_PORT"]],
        check=True,
    )


@pytest.mark.slow
@pytest.mark.skipif("ENGRAM_STACK_INSTANCE" not in os.environ, reason="needs the node started by scripts/test")
def test_healthz_with_elasticsearch_stopped(client, db, es_prefix, monitor_headers):
    _stack("es-stop")
    try:
        response = client.get("/healthz", headers=monitor_headers)
        anonymous = client.get("/healthz")
    finally:
        _stack("es-start")
    assert (anonymous.status_code, anonymous.json()) == (503, {"status": "unavailable"})  # no internal address
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unhealthy"
    assert body["elasticsearch"]["reachable"] is False
    assert body["reasons"][0].startswith("elasticsearch unreachable at http://127.0.0.1:")
    assert client.get("/healthz").status_code == 200


def _production_env(**overrides: str) -> dict[str, str]:
    from cryptography.fernet import Fernet

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production",
           "DJANGO_SECRET_KEY": "x" * 50, "ES_URL": "https://es.example.internal:9200",
           "ES_ADMIN_USERNAME": "engram-admin", "ES_ADMIN_PASSWORD": "secret",
           "ENGRAM_ENCRYPTION_KEYS": Fernet.generate_key().decode(), "ENGRAM_AUDIT_KEYS": "a" * 43,
           "ENGRAM_AUDIT_SIGNING_KEYS": "b" * 43, "ES_AUDIT_USERNAME": "engram-audit", "ES_AUDIT_PASSWORD": "secret"}
    env.update(overrides)
    return {k: v for k, v in env.items() if v != ""}


@pytest.mark.parametrize("missing", ["DJANGO_SECRET_KEY", "ES_ADMIN_PASSWORD", "ENGRAM_ENCRYPTION_KEYS",
                                     "ENGRAM_AUDIT_KEYS", "ENGRAM_AUDIT_SIGNING_KEYS", "ES_AUDIT_PASSWORD"])
def test_production_settings_refuse_to_start_without_a_secret(missing):
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=_production_env(**{missing: ""}),
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert f"missing required settings in production: {missing}" in result.stderr


def test_production_settings_start_with_their_secrets():
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=_production_env(),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_healthz_is_cached_and_probes_with_the_monitor_credential(client, settings, es_prefix, db):
    from elasticsearch import AuthorizationException

    from engram_core.es.client import base_client, monitor_client
    from memory_app.health import health_cache_clear

    assert settings.ES_MONITOR_USERNAME and settings.ES_MONITOR_USERNAME != settings.ES_ADMIN_USERNAME
    who = monitor_client().security.authenticate()
    assert who["username"] == settings.ES_MONITOR_USERNAME and who["roles"] == ["engram_monitor"]
    with pytest.raises(AuthorizationException):  # monitor only: it cannot mint keys or write
        monitor_client().security.create_api_key(name="nope")
    settings.ENGRAM_HEALTH_CACHE_SECONDS = 60
    health_cache_clear()
    url = settings.ES_URL
    try:
        first = client.get("/healthz")
        settings.ES_URL = "http://127.0.0.1:9"  # what the cached answer must not probe again
        base_client.cache_clear()
        assert client.get("/healthz").json() == first.json()
        health_cache_clear()
        assert client.get("/healthz").status_code == 503  # and uncached, it does
    finally:
        settings.ES_URL = url
        base_client.cache_clear()
        health_cache_clear()


def test_ci_runs_with_the_least_privileged_admin(settings, es_admin):
    who = es_admin.security.authenticate()
    assert who["username"] == settings.ES_ADMIN_USERNAME != "elastic"
    assert who["roles"] == ["engram_admin"]


def test_healthz_reports_the_shared_cache(client, db, es_prefix, settings, shared_redis_cache, monitor_headers):
    from memory_app.health import cache_status

    settings.CACHES = {"default": {"BACKEND": "config.cache.SharedRedisCache",
                                   "LOCATION": shared_redis_cache._servers[0]}}
    assert cache_status() == ({"backend": "redis", "reachable": True}, None)
    body = client.get("/healthz", headers=monitor_headers).json()
    assert (body["status"], body["cache"], body["degraded"]) == ("ok", {"backend": "redis", "reachable": True}, [])


def test_healthz_tells_anyone_else_only_ok_or_unavailable(client, db, es_prefix, monitor_headers, make_staff_user):
    assert client.get("/healthz").json() == {"status": "ok"}
    wrong = client.get("/healthz", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.json() == {"status": "ok"}
    assert "elasticsearch" in client.get("/healthz", headers=monitor_headers).json()
    # A tenant's staff get no more than anyone: the report spans every tenant (issue 67).
    client.force_login(make_staff_user())
    assert client.get("/healthz").json() == {"status": "ok"}
    superuser = make_staff_user("root")
    superuser.is_superuser = True
    superuser.save()
    client.force_login(superuser)
    assert "elasticsearch" in client.get("/healthz").json()


def _production_settings(*names: str, **env: str) -> dict:
    code = f"import json; from django.conf import settings as s; print(json.dumps({{n: getattr(s, n, None) for n in {list(names)!r}}}))"
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=_production_env(**env),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_is_https_only_with_staff_sessions_of_hours():
    got = _production_settings("SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SESSION_COOKIE_AGE",
                               "SECURE_PROXY_SSL_HEADER", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE")
    assert got == {"SECURE_SSL_REDIRECT": True, "SECURE_HSTS_SECONDS": 365 * 24 * 3600, "SESSION_COOKIE_AGE": 8 * 3600,
                   "SECURE_PROXY_SSL_HEADER": None, "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True}
    behind_proxy = _production_settings("SECURE_PROXY_SSL_HEADER", "SESSION_COOKIE_AGE",
                                        DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO",
                                        ENGRAM_STAFF_SESSION_HOURS="2")
    assert behind_proxy == {"SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"], "SESSION_COOKIE_AGE": 7200}


def test_production_refuses_a_short_audit_key():
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT,
                            env=_production_env(ENGRAM_AUDIT_KEYS="short"), capture_output=True, text=True)
    assert result.returncode != 0 and "shorter than 32 characters" in result.stderr


@pytest.mark.parametrize("token", ["jöse", "Ωmega", "\u2603" * 40, "eng_ab_\u00e9"])
def test_healthz_with_a_token_that_is_not_ascii_answers_as_to_any_wrong_token(client, db, es_prefix, settings, token):
    settings.ENGRAM_MONITOR_TOKEN = "the-monitor-token-0123456789"
    header = f"Bearer {token}".encode().decode("latin-1")  # its UTF-8 bytes, as a server hands them to Django
    response = client.get("/healthz", HTTP_AUTHORIZATION=header)
    assert response.status_code in (200, 503) and response.json() in ({"status": "ok"}, {"status": "unavailable"})
    api_answer = client.get("/api/v1/subjects/alice/export", HTTP_AUTHORIZATION=header)
    assert api_answer.status_code == 401 and api_answer.json()["error"]["code"] == "unauthenticated"


from hypothesis import HealthCheck, example, given, settings as hypothesis_settings, strategies as st  # noqa: E402

from tests.strategies import any_text, query_string, texts  # noqa: E402

# What a server hands Django: the header's bytes read as Latin-1, whatever they were.
_headers = st.one_of(texts, any_text).map(lambda t: t.encode("utf-8", "surrogatepass").decode("latin-1"))


@hypothesis_settings(max_examples=int(os.environ.get("ENGRAM_HEALTHZ_FUZZ_EXAMPLES", "60")),
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(authorization=None, query={"q": "\x00"}, method="GET")
@given(authorization=st.none() | _headers | _headers.map(lambda t: f"Bearer {t}"),
       query=st.dictionaries(texts, texts, max_size=3), method=st.sampled_from(["GET", "GET", "HEAD", "POST"]))
def test_healthz_answers_any_caller_with_its_report_or_its_status(client, db, es_prefix, authorization, query, method):
    from tests.fuzzing import record

    extra = {"HTTP_AUTHORIZATION": authorization} if authorization is not None else {}
    response = client.generic(method, "/healthz", QUERY_STRING=query_string(query), **extra)
    record("fuzz", "healthz", cases=1, server_errors=int(response.status_code >= 500 and response.status_code != 503))
    if any("\x00" in k or "\x00" in v for k, v in query.items()):  # refused before any view (RefuseNulMiddleware)
        assert response.status_code == 400
        if method != "HEAD":  # a HEAD answer carries no body
            assert response.json()["error"]["code"] == "invalid"
    else:
        assert response.status_code in ((200, 503) if method == "GET" else (405,)), response.content[:200]
