"""The audit log as evidence: each attack of someone who can write the database (or an export)
is detected and named, and the database refuses the application's own UPDATE and DELETE.

The attacker holds the database, not ``ENGRAM_AUDIT_KEYS`` and not the checkpoint store."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.utils import timezone

from tenants import audit_chain
from tenants.models import AuditEvent, Membership
from tenants.selectors import audit_export_record
from tenants.services.audit import audit_record

pytestmark = pytest.mark.usefixtures("checkpoint_store")

LEGACY_FIELDS = ("chain", "seq", "created_at", "actor_type", "actor", "action", "tenant_slug", "subject_ref",
                 "target_id", "details")


def _sha256_link(prev_hash: str, record: dict) -> str:
    """The chain's published, unkeyed algorithm: what anyone can recompute."""
    body = json.dumps({k: record[k] for k in LEGACY_FIELDS}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=str)
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def _verify() -> tuple[bool, str]:
    out = io.StringIO()
    try:
        call_command("audit_verify", stdout=out)
    except CommandError as exc:
        return False, out.getvalue() + str(exc)
    return True, out.getvalue()


def _events(tenant, n: int) -> list[AuditEvent]:
    return [audit_record(actor="alice", action=f"demo.{i}", tenant=tenant, details={"n": i}) for i in range(n)]


def test_an_edit_with_every_later_hash_recomputed_is_detected(tenant, as_dba):
    _events(tenant, 5)
    call_command("audit_checkpoint", stdout=io.StringIO())
    rows = list(AuditEvent.objects.filter(chain="acme").order_by("seq"))
    prev = rows[0].hash
    for row in rows[1:]:  # event 2's actor changed; 2..5 re-linked and re-hashed
        record = audit_export_record(row) | {"prev_hash": prev, **({"actor": "mallory"} if row.seq == 2 else {})}
        forged = _sha256_link(prev, record)
        as_dba("UPDATE tenants_auditevent SET actor = %s, prev_hash = %s, hash = %s WHERE id = %s",
               [record["actor"], prev, forged, row.pk])
        prev = forged
    ok, out = _verify()
    assert not ok
    assert "acme: BROKEN" in out and "seq 2" in out and "not signed by its key" in out


def test_a_rehash_under_a_key_the_attacker_guessed_is_detected(tenant, as_dba, settings):
    _events(tenant, 3)
    genuine = settings.ENGRAM_AUDIT_KEYS
    settings.ENGRAM_AUDIT_KEYS = ["a-key-the-attacker-made-up-long-enough-to-pass"]
    try:  # a whole forged chain, re-signed end to end under a key of the attacker's own
        forged = _events(tenant, 2)
    finally:
        settings.ENGRAM_AUDIT_KEYS = genuine
    ok, out = _verify()
    assert not ok and f"seq {forged[0].seq}" in out and "key" in out


def test_tail_truncation_is_detected(tenant, as_dba):
    _events(tenant, 5)
    call_command("audit_checkpoint", stdout=io.StringIO())
    as_dba("DELETE FROM tenants_auditevent WHERE chain = %s AND seq > 3", ["acme"])
    ok, out = _verify()
    assert not ok
    assert "acme: BROKEN" in out and "truncated" in out and "5 events" in out and "holds 3" in out


def test_a_deleted_chain_is_detected(tenant, other_tenant, as_dba):
    _events(tenant, 3)
    _events(other_tenant, 2)
    call_command("audit_checkpoint", stdout=io.StringIO())
    as_dba("DELETE FROM tenants_auditevent WHERE chain = %s", ["acme"])
    ok, out = _verify()
    assert not ok
    assert "acme: BROKEN" in out and "deleted" in out and "globex: OK" in out


def test_a_checkpoint_is_not_written_over_a_broken_chain(tenant, as_dba):
    _events(tenant, 4)
    call_command("audit_checkpoint", stdout=io.StringIO())
    as_dba("DELETE FROM tenants_auditevent WHERE chain = %s AND seq > 2", ["acme"])
    _events(tenant, 3)  # the chain grows again from the truncated head
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_checkpoint", stdout=out)
    assert "acme: NOT checkpointed" in out.getvalue()
    assert not _verify()[0]


def _export(tenant, staff_user, **filters) -> list[str]:
    if not Membership.objects.filter(user=staff_user, tenant=tenant).exists():
        Membership.objects.create(user=staff_user, tenant=tenant, role=Membership.Role.COMPLIANCE)
    client = Client()
    client.force_login(staff_user)
    response = client.get(f"/t/{tenant.slug}/audit/export.jsonl", filters)
    return b"".join(response.streaming_content).decode().splitlines(keepends=True)


def _public_key_file(tmp_path) -> str:
    """The public keys as an auditor gets them (manage.py audit_public_keys)."""
    out = io.StringIO()
    call_command("audit_public_keys", stdout=out)
    path = tmp_path / "audit-public-keys.json"
    path.write_text(out.getvalue())
    return str(path)


def _verify_offline(tmp_path, lines: list[str], settings=None, *, public_key: bool = True,
                    secrets: bool = False) -> tuple[int, str]:
    """``python -m tenants.audit_chain`` as an auditor runs it: the public keys, no secret (unless
    ``secrets``: the audit keys in the environment, as the verifier of an earlier release took them)."""
    path = tmp_path / "export.jsonl"
    path.write_text("".join(lines))
    env = {"PATH": "", **({"ENGRAM_AUDIT_KEYS": ",".join(settings.ENGRAM_AUDIT_KEYS)} if secrets else {})}
    args = ["--public-key", _public_key_file(tmp_path)] if public_key else []
    done = subprocess.run([sys.executable, "-m", "tenants.audit_chain", *args, str(path)], capture_output=True,
                          text=True, env=env)
    return done.returncode, done.stdout + done.stderr


def _line_of(lines: list[str], seq: int) -> int:
    return next(n for n, line in enumerate(lines) if json.loads(line).get("seq") == seq
                and json.loads(line).get("type", "event") == "event")


def test_an_export_verifies_offline_with_the_public_key_alone(tenant, make_staff, tmp_path):
    _events(tenant, 6)
    lines = _export(tenant, make_staff("carol"))
    code, out = _verify_offline(tmp_path, lines)
    assert code == 0, out
    # The export ran to a checkpoint written for it: every event is proved by a checkpoint's digest.
    assert "signature OK" in out and "acme: OK, 7 events" in out and "pins seq 7" in out


def test_a_deleted_export_line_is_detected_offline(tenant, make_staff, tmp_path, settings):
    _events(tenant, 6)
    call_command("audit_checkpoint", stdout=io.StringIO())
    lines = _export(tenant, make_staff("carol"))
    assert _verify_offline(tmp_path, lines)[0] == 0
    del lines[_line_of(lines, 4)]
    code, out = _verify_offline(tmp_path, lines)
    assert code == 1 and "REFUSED" in out and "removed" in out


def test_a_filtered_export_says_so_and_still_verifies_offline(tenant, make_staff, tmp_path, settings):
    _events(tenant, 6)
    call_command("audit_checkpoint", stdout=io.StringIO())
    lines = _export(tenant, make_staff("carol"), action="demo.3")
    header = json.loads(lines[0])
    assert header["type"] == "export" and header["filtered"] is True and header["filters"] == {"action": "demo.3"}
    assert any(json.loads(line).get("type") == "checkpoint" for line in lines)
    code, out = _verify_offline(tmp_path, lines)
    assert code == 0 and "filtered" in out, out
    # A line cut from a filtered export, or the filter flag flipped, breaks the export's signature.
    for tampered in ([lines[0], *lines[2:]], [lines[0].replace('"filtered": true', '"filtered": false'), *lines[1:]],
                     lines[:-1]):
        code, out = _verify_offline(tmp_path, tampered)
        assert code == 1 and "REFUSED" in out


def _sha256_events(n: int) -> list[str]:
    """The issue's forged export: events in the published unkeyed form, chained from genesis."""
    lines, prev = [], "0" * 64
    for seq in range(1, n + 1):
        record = {"chain": "acme", "seq": seq, "created_at": f"2026-12-01T00:00:0{seq}.000000+00:00",
                  "actor_type": "user", "actor": "mallory", "action": "nothing.happened", "tenant_slug": "acme",
                  "subject_ref": "", "target_id": "", "details": {}, "key_id": ""}
        record["prev_hash"], record["hash"] = prev, _sha256_link(prev, record)
        prev = record["hash"]
        lines.append(json.dumps({"type": "event", **record}) + "\n")
    return lines


def test_a_forged_export_without_header_or_signature_is_refused(tenant, tmp_path, settings):
    """Attack 1 of issue 67: no header, no end line, three unkeyed events from the genesis hash;
    the tenant's keys in ENGRAM_AUDIT_KEYS, as the verifier was run."""
    _events(tenant, 2)
    forged = _sha256_events(3)
    code, out = _verify_offline(tmp_path, forged, settings, public_key=False, secrets=True)
    assert code == 1 and "no header" in out, out
    code, out = _verify_offline(tmp_path, forged, settings)
    assert code == 1 and "no header" in out, out
    # A header and an end line made up around them do not carry Engram's signature.
    header = json.dumps({"type": "export", "version": 3, "tenant": "acme", "filtered": False, "filters": {},
                         "created_at": "2026-12-06T00:00:00+00:00"}) + "\n"
    end = json.dumps({"type": "end", "lines": 4, "key_id": "0" * 16, "signature": "00" * 64,
                      "verified": {"ok": True}}) + "\n"
    code, out = _verify_offline(tmp_path, [header, *forged, end], settings)
    assert code == 1 and "REFUSED" in out and "not in the public keys given" in out, out


@pytest.mark.parametrize("store", ["pinned at keying", "no checkpoint credential"])
def test_a_chain_laundered_before_its_first_checkpoint_is_refused(tenant, as_dba, settings, store):
    """Attack 2 of issue 67: the chain rewritten as unkeyed events from genesis; then the next
    audit_record would re-anchor over the forged head, and the next checkpoint pin it."""
    if store == "no checkpoint credential":
        settings.ES_AUDIT_USERNAME = ""  # the keying event cannot be pinned
    _events(tenant, 4)
    prev = "0" * 64
    for row in AuditEvent.objects.filter(chain="acme").order_by("seq"):
        record = audit_export_record(row) | {"prev_hash": prev, "key_id": ""}
        forged = _sha256_link(prev, record)
        as_dba("UPDATE tenants_auditevent SET key_id = '', prev_hash = %s, hash = %s WHERE id = %s",
               [prev, forged, row.pk])
        prev = forged
    settings.ES_AUDIT_USERNAME = "engram-audit"
    with pytest.raises(ImproperlyConfigured, match="unkeyed event"):
        audit_record(actor="alice", action="next", tenant=tenant)
    with pytest.raises(CommandError):  # and no checkpoint signs over it
        call_command("audit_checkpoint", stdout=io.StringIO())
    ok, out = _verify()
    assert not ok and "acme: BROKEN" in out, out
    assert ("the checkpoint of" in out and "rewritten" in out if store == "pinned at keying"
            else "no event of the chain is keyed" in out), out


def test_a_signature_by_a_retired_key_is_refused(tenant, settings):
    """Attack 3 of issue 67: a leaked old key signs a new event after it was rotated out."""
    old = settings.ENGRAM_AUDIT_KEYS[0]
    _events(tenant, 2)
    rotated = timezone.now()
    new = "new-link-key-" + "n" * 40
    settings.ENGRAM_AUDIT_KEYS = [f"{new} from={rotated.isoformat()}", f"{old} retired={rotated.isoformat()}"]
    _events(tenant, 2)
    head = AuditEvent.objects.filter(chain="acme").order_by("-seq").first()
    leaked = audit_chain.Keyring.from_secrets([old])
    forged = AuditEvent(chain="acme", seq=head.seq + 1, prev_hash=head.hash, created_at=timezone.now(),
                        actor_type="user", actor="mallory", action="subject.erased", tenant=tenant,
                        tenant_slug="acme", key_id=leaked.primary)
    forged.hash = audit_chain.link_hash(prev_hash=head.hash, fields=forged.chain_fields(), keyring=leaked)
    forged.save(force_insert=True)
    ok, out = _verify()
    assert not ok and f"seq {forged.seq}" in out and "outside that key's window" in out, out


def test_the_database_refuses_update_and_delete_of_audit_events(tenant):
    event = audit_record(actor="alice", action="demo", tenant=tenant)
    for sql in ("UPDATE tenants_auditevent SET actor = 'mallory' WHERE id = %s",
                "DELETE FROM tenants_auditevent WHERE id = %s"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, [event.pk])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent._base_manager.filter(pk=event.pk)._raw_delete(connection.alias)
    assert AuditEvent.objects.get(pk=event.pk).actor == "alice"
