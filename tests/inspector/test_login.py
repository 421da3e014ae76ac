"""Staff logins are throttled (inspector and admin), sessions last hours, and no page that shows
memory or a token may be kept by a cache."""

from __future__ import annotations

import pytest
from django.test import Client

HX = {"HX-Request": "true"}


@pytest.mark.parametrize("login", ["/login/", "/admin/login/"])
def test_repeated_failed_logins_lock_the_username_out(staff, login, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post(login, {"username": "support", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    assert client.post(login, {"username": "support", "password": "wrong"}).status_code == 429
    locked = client.post(login, {"username": "support", "password": "pw"})  # even the right password now
    assert locked.status_code == 429 and b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    other = Client().post(login, {"username": "tenant_admin", "password": "pw"})
    assert other.status_code == 302  # another account is not locked by it


def test_a_good_login_is_a_session_of_hours(staff, settings):
    client = Client()
    assert client.post("/login/", {"username": "support", "password": "pw"}).status_code == 302
    assert client.session.get_expiry_age() == settings.SESSION_COOKIE_AGE == 8 * 3600


def test_pages_with_memory_or_tokens_are_not_stored_by_caches(staff, subjects):
    alice, _ = subjects
    client = Client()
    client.force_login(staff["superuser"])
    for url in ("/", f"/u/{alice.user_id}/", f"/u/{alice.user_id}/recall/?q=tea", f"/u/{alice.user_id}/export/",
                "/t/acme/keys/", "/t/acme/audit/", "/t/acme/audit/verify/"):
        response = client.get(url)
        assert response.status_code == 200 and "no-store" in response["Cache-Control"], url


def test_a_new_token_starts_with_read_only_ticked(staff, subjects):
    client = Client()
    client.force_login(staff["tenant_admin"])
    page = client.get("/t/acme/keys/").content.decode()
    ticked = [s for s in ("memory:read", "memory:write", "memory:forget", "subject:erase", "tenant:admin")
              if f'value="{s}" checked' in page]
    assert ticked == ["memory:read"]


def _fail(client: Client, login: str, username: str, times: int) -> None:
    for _ in range(times):
        client.post(login, {"username": username, "password": "wrong"})


def test_behind_a_proxy_a_lockout_keys_on_the_client_the_proxy_names(staff, settings):
    """Issue 67: behind a proxy every login came from its address, so five failures from anyone
    locked the user out for everyone. With the proxy's header configured, the lockout keys on the
    client address it recorded; a client naming an address of its own in front of it changes nothing."""
    settings.ENGRAM_CLIENT_IP_HEADER = "HTTP_X_FORWARDED_FOR"
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    attacker = Client(HTTP_X_FORWARDED_FOR="198.51.100.7", **proxy)
    _fail(attacker, "/login/", "support", settings.AXES_FAILURE_LIMIT)
    assert attacker.post("/login/", {"username": "support", "password": "pw"}).status_code == 429
    # The attacker forging addresses to the left of the one the proxy appended stays locked.
    forger = Client(HTTP_X_FORWARDED_FOR="203.0.113.1, 198.51.100.7", **proxy)
    assert forger.post("/login/", {"username": "support", "password": "pw"}).status_code == 429
    owner = Client(HTTP_X_FORWARDED_FOR="192.0.2.44", **proxy)
    assert owner.post("/login/", {"username": "support", "password": "pw"}).status_code == 302


def test_without_a_configured_proxy_header_a_forwarded_address_is_not_believed(staff, settings):
    assert settings.ENGRAM_CLIENT_IP_HEADER == ""
    _fail(Client(HTTP_X_FORWARDED_FOR="198.51.100.7"), "/login/", "support", settings.AXES_FAILURE_LIMIT)
    dodging = Client(HTTP_X_FORWARDED_FOR="192.0.2.44")  # same peer, another claimed address
    assert dodging.post("/login/", {"username": "support", "password": "pw"}).status_code == 429
