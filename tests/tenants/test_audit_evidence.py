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
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client

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
    settings.ENGRAM_AUDIT_KEYS = ["a key the attacker made up, long enough to pass"]
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
    Membership.objects.create(user=staff_user, tenant=tenant, role=Membership.Role.COMPLIANCE)
    client = Client()
    client.force_login(staff_user)
    response = client.get(f"/t/{tenant.slug}/audit/export.jsonl", filters)
    return b"".join(response.streaming_content).decode().splitlines(keepends=True)


def _verify_offline(tmp_path, lines: list[str], settings) -> tuple[int, str]:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(lines))
    env = {"ENGRAM_AUDIT_KEYS": ",".join(settings.ENGRAM_AUDIT_KEYS), "PATH": ""}
    done = subprocess.run([sys.executable, "-m", "tenants.audit_chain", str(path)], capture_output=True, text=True,
                          env=env)
    return done.returncode, done.stdout + done.stderr


def _line_of(lines: list[str], seq: int) -> int:
    return next(n for n, line in enumerate(lines) if json.loads(line).get("seq") == seq
                and json.loads(line).get("type", "event") == "event")


def test_a_deleted_export_line_is_detected_offline(tenant, make_staff, tmp_path, settings):
    _events(tenant, 6)
    call_command("audit_checkpoint", stdout=io.StringIO())
    lines = _export(tenant, make_staff("carol"))
    assert _verify_offline(tmp_path, lines, settings)[0] == 0
    del lines[_line_of(lines, 4)]
    code, out = _verify_offline(tmp_path, lines, settings)
    assert code == 1 and "BROKEN" in out and "seq 4" in out


def test_a_filtered_export_says_so_and_still_verifies_offline(tenant, make_staff, tmp_path, settings):
    _events(tenant, 6)
    call_command("audit_checkpoint", stdout=io.StringIO())
    lines = _export(tenant, make_staff("carol"), action="demo.3")
    header = json.loads(lines[0])
    assert header["type"] == "export" and header["filtered"] is True and header["filters"] == {"action": "demo.3"}
    assert any(json.loads(line).get("type") == "checkpoint" for line in lines)
    code, out = _verify_offline(tmp_path, lines, settings)
    assert code == 0 and "filtered" in out
    # A line cut from a filtered export, or the filter flag flipped, breaks the export's signature.
    for tampered in ([lines[0], *lines[2:]], [lines[0].replace('"filtered": true', '"filtered": false'), *lines[1:]],
                     lines[:-1]):
        code, out = _verify_offline(tmp_path, tampered, settings)
        assert code == 1 and "BROKEN" in out


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
