"""The keyed audit chain: appended, verified, a tampered event pointed at, keys rotated, and
checkpoints that are forged or fork named."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tenants import audit_chain
from tenants.crypto import audit_keyring
from tenants.models import AuditEvent
from tenants.selectors import audit_chain_verify, audit_export_record
from tenants.services.audit import audit_record

KEY = "k" * 40


def test_events_chain_per_tenant_under_the_signing_key(tenant, other_tenant, checkpoint_store):
    a1 = audit_record(actor="x", action="one", tenant=tenant)
    b1 = audit_record(actor="x", action="one", tenant=other_tenant)
    a2 = audit_record(actor="x", action="two", tenant=tenant, details={"n": 2})
    assert (a1.seq, a2.seq, b1.seq) == (1, 2, 1)
    assert a1.prev_hash == audit_chain.GENESIS and a2.prev_hash == a1.hash and b1.prev_hash == audit_chain.GENESIS
    assert a1.key_id == audit_keyring().primary
    assert a1.hash != audit_chain.link_hash(prev_hash=a1.prev_hash, fields=a1.chain_fields() | {"key_id": ""})
    report = audit_chain_verify(chain="acme")
    assert report.ok and report.checked == 2 and report.latest is None


@pytest.mark.parametrize("tamper, reason, seq", [
    ("UPDATE tenants_auditevent SET actor = 'mallory' WHERE id = %s", "was changed", 3),
    ("UPDATE tenants_auditevent SET details = '{\"reason\": \"nothing\"}' WHERE id = %s", "was changed", 3),
    ("DELETE FROM tenants_auditevent WHERE id = %s", "event 3 is missing", 3),
])
def test_tampering_is_found_at_the_first_broken_link(tenant, tamper, reason, seq, as_dba, checkpoint_store):
    events = [audit_record(actor="alice", action=f"a{n}", tenant=tenant, details={"reason": "ok"}) for n in range(5)]
    as_dba(tamper, [events[2].pk])
    report = audit_chain_verify(chain="acme")
    assert not report.ok and report.checked == 2 and reason in report.reason and report.broken_seq == seq
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--tenant", "acme", stdout=out)
    assert f"seq {seq}" in out.getvalue()


def test_export_lines_verify_offline_and_detect_edits(tenant):
    for n in range(4):
        audit_record(actor="alice", action=f"a{n}", tenant=tenant, details={"n": n})
    lines = [json.dumps(audit_export_record(e)) for e in AuditEvent.objects.filter(chain="acme").order_by("seq")]
    assert audit_chain.verify_export(lines, keyring=audit_keyring()).ok
    assert not audit_chain.verify_export(lines, keyring=None).ok  # keyed events need the keys
    lines[1] = json.dumps(json.loads(lines[1]) | {"action": "nothing.happened"})
    [report] = audit_chain.verify_export(lines, keyring=audit_keyring()).chains
    assert not report.ok and report.broken_seq == 2


def test_rotated_keys_verify_old_events_until_dropped(tenant, settings, checkpoint_store):
    old = audit_record(actor="alice", action="before", tenant=tenant)
    settings.ENGRAM_AUDIT_KEYS = [KEY, *settings.ENGRAM_AUDIT_KEYS]  # a new key first: it signs from now on
    new = audit_record(actor="alice", action="after", tenant=tenant)
    assert new.key_id == audit_chain.key_id(KEY) != old.key_id
    assert audit_chain_verify(chain="acme").ok
    settings.ENGRAM_AUDIT_KEYS = [KEY]  # the old key dropped too early
    report = audit_chain_verify(chain="acme")
    assert not report.ok and report.broken_seq == 1 and "does not hold" in report.reason


def test_forged_and_forked_checkpoints_are_named():
    keyring = audit_chain.Keyring.from_secrets([KEY])
    events, prev = [], audit_chain.GENESIS
    for seq in (1, 2, 3):
        fields = {"chain": "acme", "seq": seq, "created_at": f"2026-01-0{seq}T00:00:00+00:00", "actor_type": "system",
                  "actor": "x", "action": "a", "tenant_slug": "acme", "subject_ref": "", "target_id": "",
                  "details": {}, "key_id": keyring.primary}
        digest = audit_chain.link_hash(prev_hash=prev, fields=fields, keyring=keyring)
        events.append({**fields, "prev_hash": prev, "hash": digest})
        prev = digest
    first = audit_chain.checkpoint_sign(chain="acme", seq=2, head_hash=events[1]["hash"], created_at="t1",
                                        previous=None, keyring=keyring)
    second = audit_chain.checkpoint_sign(chain="acme", seq=3, head_hash=events[2]["hash"], created_at="t2",
                                         previous=first, keyring=keyring)
    assert audit_chain.verify_chain(events, [first, second], chain="acme", keyring=keyring).ok
    forged = {**second, "seq": 2}  # re-pointed at an earlier length to hide a truncation
    report = audit_chain.verify_chain(events[:2], [first, forged], chain="acme", keyring=keyring)
    assert not report.ok and "is not signed by its key: forged" in report.reason
    stranger = audit_chain.checkpoint_sign(chain="acme", seq=3, head_hash=events[2]["hash"], created_at="t3",
                                           previous=None, keyring=keyring)  # a second successor of nothing
    report = audit_chain.verify_chain(events, [first, stranger], chain="acme", keyring=keyring)
    assert not report.ok and "does not follow the one before it" in report.reason


def test_a_short_or_missing_key_is_refused():
    with pytest.raises(audit_chain.KeyringError, match="empty"):
        audit_chain.Keyring.from_secrets(["", " "])
    with pytest.raises(audit_chain.KeyringError, match="shorter than 32"):
        audit_chain.Keyring.from_secrets(["short"])


def test_command_reports_each_chain_and_what_it_rests_on(tenant, checkpoint_store):
    audit_record(actor="alice", action="a", tenant=tenant)
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "acme: OK, 1 events; no checkpoint yet" in out.getvalue()
    assert "database: refuses UPDATE and DELETE of audit events" in out.getvalue()
    call_command("audit_checkpoint", stdout=io.StringIO())
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "acme: OK, 1 events, 1 checkpoint read; the latest checkpoint" in out.getvalue()


# ---------------------------------------------------------------- properties of the canonical form (no service)

from hypothesis import given, strategies as st  # noqa: E402

from tests.strategies import long_numbers  # noqa: E402

_text = st.text(max_size=40) | long_numbers | st.sampled_from(["josé", "Zoë", "日本", "\u2028", "\\u0000", '"}{'])
_details = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                        max_leaves=10)
_fields = st.fixed_dictionaries({
    "chain": _text, "seq": st.integers(0, 2**63), "created_at": _text, "actor_type": _text, "actor": _text,
    "action": _text, "tenant_slug": _text, "subject_ref": _text, "target_id": _text,
    "details": st.dictionaries(_text, _details, max_size=4), "key_id": st.sampled_from(["", "k1"])})


@pytest.mark.properties
@given(fields=_fields, order=st.randoms())
def test_the_canonical_form_is_the_fields_as_json_whatever_their_order_or_text(fields, order):
    for names in (audit_chain.LEGACY_FIELDS, audit_chain.KEYED_FIELDS):
        form = audit_chain.canonical(fields, names)
        shuffled = list(fields.items())
        order.shuffle(shuffled)
        assert audit_chain.canonical(dict(shuffled), names) == form
        assert json.loads(form) == {k: fields[k] for k in names}  # loss-free: two events never share one


@pytest.mark.properties
@given(fields=_fields, other=_fields, prev=st.sampled_from([audit_chain.GENESIS, "f" * 64]))
def test_an_events_hash_follows_its_canonical_form(fields, other, prev):
    keyring = audit_chain.Keyring.from_secrets([KEY])
    keyed = {**fields, "key_id": keyring.primary}
    for event in (fields | {"key_id": ""}, keyed):
        assert audit_chain.link_hash(prev_hash=prev, fields=event, keyring=keyring) == \
            audit_chain.link_hash(prev_hash=prev, fields=dict(reversed(list(event.items()))), keyring=keyring)
    names = audit_chain.KEYED_FIELDS
    changed = {**other, "key_id": keyring.primary}
    same = audit_chain.canonical(keyed, names) == audit_chain.canonical(changed, names)
    assert same is (audit_chain.link_hash(prev_hash=prev, fields=keyed, keyring=keyring)
                    == audit_chain.link_hash(prev_hash=prev, fields=changed, keyring=keyring))
