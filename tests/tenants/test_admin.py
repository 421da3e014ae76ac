"""The Django admin, scoped by staff role: each role sees and does only what it may."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tenants.models import AgentToken, AuditEvent, Membership, Subject, SubjectKey
from tenants.services.subjects import subject_get_or_create
from tenants.services.tokens import agent_token_authenticate, agent_token_create
from tenants.services.keys import KeyLifetimes

ADMIN, COMPLIANCE, SUPPORT = Membership.Role.TENANT_ADMIN, Membership.Role.COMPLIANCE, Membership.Role.SUPPORT


@pytest.fixture
def world(tenant, other_tenant, es_prefix):
    alice = subject_get_or_create(tenant=tenant, external_id="alice", lifetimes=KeyLifetimes.from_settings())
    mallory = subject_get_or_create(tenant=other_tenant, external_id="mallory", lifetimes=KeyLifetimes.from_settings())
    token, _ = agent_token_create(tenant=tenant, name="acme bot", scopes=["memory:read"], actor="test")
    other_token, _ = agent_token_create(tenant=other_tenant, name="globex bot", scopes=["memory:read"], actor="test")
    return {"alice": alice, "mallory": mallory, "token": token, "other_token": other_token,
            "alice_key": SubjectKey.objects.get(subject=alice), "mallory_key": SubjectKey.objects.get(subject=mallory)}


def _url(model, view="changelist", *args):
    return reverse(f"admin:tenants_{model}_{view}", args=args)


def _login(client, user):
    client.force_login(user)
    return client


def test_tenant_admin_sees_and_acts_on_their_own_tenant_only(client, world, make_staff, tenant, other_tenant):
    ada = make_staff("ada", (tenant, ADMIN))
    _login(client, ada)

    subjects = client.get(_url("subject")).content.decode()
    assert "alice" in subjects and "mallory" not in subjects
    assert client.get(_url("subject", "change", world["mallory"].pk)).status_code == 302  # "doesn't exist" redirect
    keys = client.get(_url("subjectkey")).content.decode()
    assert world["alice_key"].es_key_id in keys and world["mallory_key"].es_key_id not in keys
    assert "acme bot" in client.get(_url("agenttoken")).content.decode()
    assert "globex bot" not in client.get(_url("agenttoken")).content.decode()

    # Acting on another tenant's key by forging the selection does nothing to it.
    client.post(_url("subject"), {"action": "rotate_key", "_selected_action": [world["alice"].pk,
                                                                               world["mallory"].pk]})
    assert SubjectKey.objects.filter(subject=world["alice"]).count() == 2
    assert SubjectKey.objects.filter(subject=world["mallory"]).count() == 1
    rotated = AuditEvent.objects.get(action="subject_key.rotated")
    assert (rotated.actor, rotated.subject) == ("ada", world["alice"])

    client.post(_url("agenttoken"), {"action": "revoke_token", "_selected_action": [world["token"].pk,
                                                                                    world["other_token"].pk]})
    assert AgentToken.objects.get(pk=world["token"].pk).revoked_at is not None
    assert AgentToken.objects.get(pk=world["other_token"].pk).revoked_at is None
    assert AuditEvent.objects.get(action="agent_token.revoked").actor == "ada"


def test_tenant_admin_creates_a_token_and_sees_its_plaintext_once(client, world, make_staff, tenant, other_tenant):
    _login(client, make_staff("ada", (tenant, ADMIN)))

    form = client.get(_url("agenttoken", "add")).content.decode()
    assert "acme" in form.lower() and "globex" not in form.lower()  # only tenants they administer
    response = client.post(_url("agenttoken", "add"), {"tenant": tenant.pk, "name": "new bot",
                                                        "scopes": ["memory:read", "memory:write"]}, follow=True)

    page = response.content.decode()
    raw = re.search(r"eng_[0-9a-f]{12}_[A-Za-z0-9_-]{43}", page).group(0)
    token = agent_token_authenticate(raw=raw)
    assert (token.name, token.tenant, token.scopes) == ("new bot", tenant, ["memory:read", "memory:write"])
    assert raw not in client.get(_url("agenttoken", "change", token.pk)).content.decode()
    assert token.secret_hash not in client.get(_url("agenttoken", "change", token.pk)).content.decode()
    assert raw not in client.get(_url("agenttoken")).content.decode()  # shown once
    # Shown in the response to the form and kept nowhere: no session, no message cookie (issue 67).
    from django.contrib.sessions.models import Session

    assert all(raw not in str(s.get_decoded()) for s in Session.objects.all())
    assert raw not in str(client.cookies) and "no-store" in response["Cache-Control"]
    assert response.redirect_chain == []  # the page itself, not a redirect carrying a message
    assert AuditEvent.objects.get(action="agent_token.created", target_id=token.prefix).actor == "ada"
    assert (token.created_by.username, token.created_by_name) == ("ada", "staff:ada")
    # A forged post for another tenant is rejected by the form.
    client.post(_url("agenttoken", "add"), {"tenant": other_tenant.pk, "name": "sneaky", "scopes": ["memory:read"]})
    assert not AgentToken.objects.filter(name="sneaky").exists()


def test_tenant_admin_adds_an_end_user_with_a_key(client, world, make_staff, tenant):
    _login(client, make_staff("ada", (tenant, ADMIN)))

    client.post(_url("subject", "add"), {"tenant": tenant.pk, "external_id": "bob", "display_name": "Bob"})

    bob = Subject.objects.get(tenant=tenant, external_id="bob")
    assert SubjectKey.objects.active().filter(subject=bob).exists()
    assert set(AuditEvent.objects.filter(subject=bob).values_list("action", "actor")) == {
        ("subject.created", "ada"), ("subject_key.minted", "ada")}
    client.post(_url("subject", "change", bob.pk), {"display_name": "Robert"})
    assert Subject.objects.get(pk=bob.pk).display_name == "Robert"
    assert AuditEvent.objects.get(action="subject.changed", subject=bob).details == {"fields": ["display_name"]}


def test_compliance_is_read_only(client, world, make_staff, tenant):
    _login(client, make_staff("cora", (tenant, COMPLIANCE)))

    keys = client.get(_url("subjectkey"))
    assert keys.status_code == 200 and world["alice_key"].es_key_id in keys.content.decode()
    assert world["mallory_key"].es_key_id not in keys.content.decode()
    assert "rotate_key" not in keys.content.decode()  # no actions offered
    assert client.get(_url("agenttoken")).status_code == 200
    audit = client.get(_url("auditevent")).content.decode()
    assert "subject_key.minted" in audit and "globex" not in audit
    assert client.get(_url("subject", "change", world["alice"].pk)).status_code == 200
    assert client.post(_url("subject", "change", world["alice"].pk), {"display_name": "x"}).status_code == 403
    assert client.get(_url("agenttoken", "add")).status_code == 403
    client.post(_url("subject"), {"action": "rotate_key", "_selected_action": [world["alice"].pk]})
    client.post(_url("subjectkey"), {"action": "revoke_key", "_selected_action": [world["alice_key"].pk]})
    assert SubjectKey.objects.filter(subject=world["alice"]).count() == 1
    assert SubjectKey.objects.get(pk=world["alice_key"].pk).revoked_at is None


def test_support_sees_end_users_but_not_keys_or_tokens(client, world, make_staff, tenant):
    _login(client, make_staff("sam", (tenant, SUPPORT)))

    subjects = client.get(_url("subject")).content.decode()
    assert "alice" in subjects and "mallory" not in subjects
    for model in ("subjectkey", "agenttoken", "auditevent", "membership"):
        assert client.get(_url(model)).status_code == 403, model
    assert client.get(_url("subjectkey", "change", world["alice_key"].pk)).status_code == 403


def test_staff_without_membership_see_nothing(client, world, make_staff):
    _login(client, make_staff("nobody"))

    assert "tenants" not in client.get(reverse("admin:index")).content.decode().lower()
    for model in ("tenant", "subject", "subjectkey", "agenttoken", "auditevent", "membership"):
        assert client.get(_url(model)).status_code == 403, model


def test_superuser_sees_everything_but_secrets_and_cannot_edit_the_audit_log(client, world, make_staff):
    _login(client, make_staff("root", superuser=True))

    keys = client.get(_url("subjectkey")).content.decode()
    assert world["alice_key"].es_key_id in keys and world["mallory_key"].es_key_id in keys
    key_page = client.get(_url("subjectkey", "change", world["alice_key"].pk)).content.decode()
    assert world["alice_key"].secret_encrypted not in key_page
    event = AuditEvent.objects.first()
    assert client.get(_url("auditevent", "change", event.pk)).status_code == 200
    assert client.post(_url("auditevent", "change", event.pk), {"action": "x"}).status_code == 403
    assert client.get(_url("auditevent", "delete", event.pk)).status_code == 403
    assert client.get(_url("auditevent", "add")).status_code == 403
    assert client.get(_url("subject", "delete", world["alice"].pk)).status_code == 403  # erasure is a service


def test_the_admin_log_never_holds_an_external_id(client, world, make_staff, tenant):
    from django.contrib.admin.models import LogEntry

    from memory_app.services.forget import subject_erase

    ada = make_staff("ada", (tenant, ADMIN))
    _login(client, ada)
    client.post(_url("subject", "add"), {"tenant": tenant.pk, "external_id": "pia.personal@example.com",
                                         "display_name": "Pia"})
    pia = Subject.objects.get(external_id="pia.personal@example.com")
    client.post(_url("subject", "change", pia.pk), {"display_name": "Pia Personal"})
    client.post(_url("subject"), {"action": "rotate_key", "_selected_action": [pia.pk]})
    entries = LogEntry.objects.all()
    assert entries.count() >= 2
    assert not [e.object_repr for e in entries if "pia" in e.object_repr.lower()]
    subject_erase(subject=pia, actor="test")
    assert not [e for e in LogEntry.objects.all() if "pia" in f"{e.object_repr} {e.change_message}".lower()]


def test_the_admin_follows_the_role_matrix_audit_log_and_tenant_filters(client, world, make_staff, tenant):
    _login(client, make_staff("ada", (tenant, ADMIN)))
    assert client.get(_url("auditevent")).status_code == 403  # the audit log is compliance's (audit.view)
    for model in ("subject", "subjectkey", "agenttoken"):
        page = client.get(_url(model)).content.decode()
        assert "Globex" not in page, model  # the tenant filter offers their tenants only
    client.logout()
    _login(client, make_staff("cora", (tenant, COMPLIANCE)))
    audit = client.get(_url("auditevent")).content.decode()
    assert audit.count("Globex") == 0 and "subject_key.minted" in audit
