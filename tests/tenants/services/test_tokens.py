"""Agent tokens: shown once, stored hashed, scoped, revocable."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from engram_core.errors import AuthenticationFailed, ValidationFailed
from tenants.models import AgentToken, AuditEvent
from tenants.services.tokens import agent_token_authenticate, agent_token_create, agent_token_revoke


def test_token_is_returned_once_and_stored_only_as_a_hash(tenant, make_staff):
    admin = make_staff("ada")
    token, raw = agent_token_create(tenant=tenant, name="support bot", scopes=["memory:write", "memory:read"],
                                    actor=admin)

    assert raw.startswith(f"eng_{token.prefix}_")
    stored = AgentToken.objects.get(pk=token.pk)
    assert stored.secret_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in str(AgentToken.objects.filter(pk=token.pk).values().get())
    assert stored.scopes == ["memory:read", "memory:write"]
    event = AuditEvent.objects.get(action="agent_token.created")
    assert (event.actor, event.tenant, event.target_id) == ("ada", tenant, token.prefix)
    assert raw not in str(event.details)


def test_authenticate_returns_the_token_with_its_tenant_and_records_use(tenant):
    token, raw = agent_token_create(tenant=tenant, name="bot", scopes=["memory:read"], actor="test")

    found = agent_token_authenticate(raw=raw)

    assert found == token and found.tenant == tenant and found.has_scope("memory:read")
    assert not found.has_scope("memory:write")
    assert AgentToken.objects.get(pk=token.pk).last_used_at is not None


def test_last_used_at_is_written_at_most_once_a_minute(tenant):
    token, raw = agent_token_create(tenant=tenant, name="bot", scopes=["memory:read"], actor="test")
    first = agent_token_authenticate(raw=raw).last_used_at
    assert agent_token_authenticate(raw=raw).last_used_at == first
    AgentToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    assert agent_token_authenticate(raw=raw).last_used_at > first


@pytest.mark.parametrize("mangle", [
    lambda raw: raw[:-1] + ("A" if raw[-1] != "A" else "B"),  # wrong secret, right prefix
    lambda raw: raw.replace("eng_", "eng_0"),  # malformed
    lambda raw: "",
    lambda raw: "eng_000000000000_" + raw.rsplit("_", 1)[-1].rjust(43, "x")[:43],  # unknown prefix
])
def test_bad_tokens_all_get_the_same_answer(tenant, mangle):
    _, raw = agent_token_create(tenant=tenant, name="bot", scopes=["memory:read"], actor="test")

    with pytest.raises(AuthenticationFailed) as error:
        agent_token_authenticate(raw=mangle(raw))

    assert (error.value.status, error.value.code, error.value.message) == (
        401, "unauthenticated", "invalid or revoked agent token")


def test_revoked_token_is_refused_and_revocation_is_audited_once(tenant):
    token, raw = agent_token_create(tenant=tenant, name="bot", scopes=["memory:read"], actor="test")

    agent_token_revoke(token=token, actor="test")
    agent_token_revoke(token=token, actor="test")

    assert token.revoked_at is not None
    with pytest.raises(AuthenticationFailed, match="invalid or revoked agent token"):
        agent_token_authenticate(raw=raw)
    assert AuditEvent.objects.filter(action="agent_token.revoked", target_id=token.prefix).count() == 1


@pytest.mark.parametrize("scopes", [[], ["memory:read", "memory:everything"], ["admin"]])
def test_scopes_must_be_known(tenant, scopes):
    with pytest.raises(ValidationFailed) as error:
        agent_token_create(tenant=tenant, name="bot", scopes=scopes, actor="test")
    assert error.value.details["field"] == "scopes"
    assert not AgentToken.objects.exists()


def test_a_token_needs_a_name(tenant):
    with pytest.raises(ValidationFailed):
        agent_token_create(tenant=tenant, name="  ", scopes=["memory:read"], actor="test")


def test_a_token_name_longer_than_its_column_is_refused_and_nothing_is_created(tenant):
    with pytest.raises(ValidationFailed) as error:
        agent_token_create(tenant=tenant, name="b" * 201, scopes=["memory:read"], actor="test")
    assert error.value.details == {"field": "name"} and "200" in error.value.message
    assert not AgentToken.objects.exists()
    agent_token_create(tenant=tenant, name="b" * 200, scopes=["memory:read"], actor="test")
