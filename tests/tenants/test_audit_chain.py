"""The keyed audit chain: appended, verified, a tampered event pointed at, keys rotated inside their
windows, and checkpoints that are forged, fork or sign outside their key's window named."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tenants import audit_chain
from tenants.crypto import audit_keyring
from tenants.models import AuditEvent
from tenants.selectors import audit_chain_verify, audit_export_record
from tenants.services.audit import audit_record

from . import audit_samples as S

KEY = "k" * 40


def test_events_chain_per_tenant_under_the_signing_key(tenant, other_tenant, checkpoint_store):
    a1 = audit_record(actor="x", action="one", tenant=tenant)
    b1 = audit_record(actor="x", action="one", tenant=other_tenant)
    a2 = audit_record(actor="x", action="two", tenant=tenant, details={"n": 2})
    assert (a1.seq, a2.seq, b1.seq) == (1, 2, 1)
    assert a1.prev_hash == audit_chain.GENESIS and a2.prev_hash == a1.hash and b1.prev_hash == audit_chain.GENESIS
    assert a1.key_id == audit_keyring().primary and a2.created_at >= a1.created_at
    assert a1.hash != audit_chain.link_hash(prev_hash=a1.prev_hash, fields=a1.chain_fields() | {"key_id": ""})
    report = audit_chain_verify(chain="acme")
    # The first event keyed the chain: a checkpoint pinned it when it was written.
    assert report.ok and report.checked == 2 and report.keyed_at == 1
    assert (report.latest["seq"], report.latest["previous_seq"], report.latest["keyed_at"]) == (1, 0, 1)


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


def _iso(moment) -> str:
    return moment.isoformat(timespec="microseconds")


def test_a_rotation_switches_keys_at_its_moment_and_each_verifies_inside_its_window(tenant, settings,
                                                                                   checkpoint_store):
    old_secret = settings.ENGRAM_AUDIT_KEYS[0]
    old = audit_record(actor="alice", action="before", tenant=tenant)
    switch = timezone.now() + timedelta(seconds=1)
    # The operator's rotation: the new key valid from a moment, the old one retired at it. Every
    # process switches at that moment by itself, so a rolling restart signs nothing twice.
    settings.ENGRAM_AUDIT_KEYS = [f"{KEY} from={_iso(switch)}", f"{old_secret} retired={_iso(switch)}"]
    still_old = audit_record(actor="alice", action="during", tenant=tenant)
    assert still_old.key_id == old.key_id
    assert audit_keyring().signer(switch) == audit_chain.key_id(KEY)
    later = audit_keyring().signer(switch + timedelta(hours=1))
    assert later == audit_chain.key_id(KEY) and audit_keyring().signer(switch - timedelta(seconds=1)) == old.key_id
    assert audit_chain_verify(chain="acme").ok
    settings.ENGRAM_AUDIT_KEYS = [KEY]  # the old key dropped: what it signed can no longer be checked
    report = audit_chain_verify(chain="acme")
    assert not report.ok and report.broken_seq == 1 and "not in ENGRAM_AUDIT_KEYS" in report.reason


def test_a_key_list_without_windows_is_refused_once_it_holds_two_keys():
    with pytest.raises(audit_chain.KeyringError, match="more than one key without retired"):
        audit_chain.Keyring.from_secrets([KEY, "o" * 40])
    with pytest.raises(audit_chain.KeyringError, match="from=<time> and retired=<time>"):
        audit_chain.Keyring.from_secrets([f"{KEY} until=2026-01-01"])
    with pytest.raises(audit_chain.KeyringError, match="retired before it is valid"):
        audit_chain.Keyring.from_secrets([f"{KEY} from=2026-02-01T00:00:00Z retired=2026-01-01T00:00:00Z"])
    with pytest.raises(audit_chain.KeyringError, match="empty"):
        audit_chain.Keyring.from_secrets(["", " "])
    with pytest.raises(audit_chain.KeyringError, match="shorter than 32"):
        audit_chain.Keyring.from_secrets(["short"])
    with pytest.raises(audit_chain.KeyringError, match="32 url-safe base64"):
        audit_chain.SigningKeys.from_entries(["not-a-key"])


def test_forged_forked_and_out_of_window_checkpoints_are_named():
    sample = S.sample_chain()
    assert sample.verify().ok
    forged = sample.copy()
    forged.checkpoints[-1] = {**forged.checkpoints[-1], "seq": 9}  # re-pointed to hide a truncation
    forged.events.pop()
    report = forged.verify()
    assert not report.ok and "is not signed by its key" in report.reason and "forged" in report.reason
    fork = sample.copy()  # a second successor of the first checkpoint
    fork.checkpoints[2] = S.make_checkpoint(fork.events, 7, fork.checkpoints[0], made=S.event_time(7))
    report = fork.verify()
    assert not report.ok and "does not follow the one before it" in report.reason
    retired = sample.copy()  # the retired signing key signs a checkpoint after its retirement
    retired.checkpoints[3] = S.make_checkpoint(retired.events, 10, retired.checkpoints[2],
                                               made=S.event_time(10) + timedelta(seconds=1), signing=S.RETIRED_SIGNING)
    report = retired.verify()
    assert not report.ok and "outside that key's window" in report.reason


def test_the_keying_event_must_be_pinned_when_it_is_written():
    sample = S.sample_chain()
    unpinned = S.Sample(sample.events, [])
    assert "not pinned by a checkpoint" in unpinned.verify().reason
    late = sample.copy()  # the first checkpoint written an hour after the keying event
    late.checkpoints = [S.make_checkpoint(late.events, 1, None, made=S.event_time(1) + timedelta(hours=1))]
    assert "was pinned only at" in late.verify().reason
    elsewhere = sample.copy()  # the first checkpoint pins another event than the keying one
    elsewhere.checkpoints = [S.make_checkpoint(elsewhere.events, 4, None, made=S.event_time(4))]
    assert "keyed at seq 1" in elsewhere.verify().reason


def test_a_complete_export_verifies_with_the_public_key_alone():
    lines = S.export_lines(S.sample_chain())
    report = S.verify_export(lines)
    assert report.ok and report.chains[0].checked == S.EVENTS and not report.chains[0].recomputed
    assert not audit_chain.verify_export(lines, public=None).ok  # no key at all: nothing is proved
    assert "no public key" in audit_chain.verify_export(lines, public=None).problems[0]
    other = audit_chain.SigningKeys.from_entries([audit_chain.generate_signing_key()]).public()
    assert "which is not in" in audit_chain.verify_export(lines, public=other).problems[0]


def test_the_command_prints_the_public_keys_an_auditor_needs(settings, tmp_path):
    out = io.StringIO()
    call_command("audit_public_keys", stdout=out)
    path = tmp_path / "keys.json"
    path.write_text(out.getvalue())
    public = audit_chain.PublicKeys.from_file(path)
    signing = audit_chain.SigningKeys.from_entries(settings.ENGRAM_AUDIT_SIGNING_KEYS)
    assert set(public.keys) == set(signing.keys) and all(len(k) == 16 for k in public.keys)
    generated = io.StringIO()
    call_command("audit_public_keys", "--new-signing-key", stdout=generated)
    assert audit_chain.SigningKeys.from_entries([generated.getvalue().strip()]).order


def test_command_reports_each_chain_and_what_it_rests_on(tenant, checkpoint_store):
    audit_record(actor="alice", action="a", tenant=tenant)
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "acme: OK, 1 events, 1 checkpoint read; the latest checkpoint" in out.getvalue()
    assert "database: refuses UPDATE and DELETE of audit events" in out.getvalue()
    audit_record(actor="alice", action="b", tenant=tenant)
    call_command("audit_checkpoint", stdout=io.StringIO())
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "acme: OK, 2 events, 2 checkpoints read; the latest checkpoint" in out.getvalue()


def test_a_chain_without_a_checkpoint_store_is_not_proved(tenant, settings, es_prefix):
    """No checkpoint credential: the event is recorded, and the chain is reported as unproved."""
    settings.ES_AUDIT_USERNAME = ""
    audit_record(actor="alice", action="a", tenant=tenant)
    records = [audit_export_record(e) for e in AuditEvent.objects.filter(chain="acme").order_by("seq")]
    report = audit_chain.verify_chain(records, chain="acme", keyring=audit_keyring(), public=None)
    assert not report.ok and "not pinned by a checkpoint" in report.reason
