"""The tamper-evident audit chain: appended, verified, and a tampered event is pointed at."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tenants import audit_chain
from tenants.models import AuditEvent
from tenants.selectors import audit_chain_verify, audit_export_record
from tenants.services.audit import audit_record


def _tamper(sql: str, params: list) -> None:
    with connection.cursor() as cursor:  # what an attacker with database access would do
        cursor.execute(sql, params)


def test_events_chain_per_tenant(tenant, other_tenant):
    a1 = audit_record(actor="x", action="one", tenant=tenant)
    b1 = audit_record(actor="x", action="one", tenant=other_tenant)
    a2 = audit_record(actor="x", action="two", tenant=tenant, details={"n": 2})
    assert (a1.seq, a2.seq, b1.seq) == (1, 2, 1)
    assert a1.prev_hash == audit_chain.GENESIS and a2.prev_hash == a1.hash and b1.prev_hash == audit_chain.GENESIS
    assert audit_chain_verify(chain="acme").ok and audit_chain_verify(chain="acme").checked == 2


@pytest.mark.parametrize("tamper, reason", [
    ("UPDATE tenants_auditevent SET actor = 'mallory' WHERE id = %s", "was changed"),
    ("UPDATE tenants_auditevent SET details = '{\"reason\": \"nothing\"}' WHERE id = %s", "was changed"),
    ("DELETE FROM tenants_auditevent WHERE id = %s", "sequence jumps"),
])
def test_tampering_is_found_at_the_first_broken_link(tenant, tamper, reason):
    events = [audit_record(actor="alice", action=f"a{n}", tenant=tenant, details={"reason": "ok"}) for n in range(5)]
    _tamper(tamper, [events[2].pk])
    report = audit_chain_verify(chain="acme")
    assert not report.ok and report.checked == 2 and reason in report.reason
    assert report.broken_seq == (3 if "UPDATE" in tamper else 4)
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--tenant", "acme", stdout=out)
    assert f"seq {report.broken_seq}" in out.getvalue()


def test_rewriting_hashes_after_a_change_still_breaks_the_next_link(tenant):
    events = [audit_record(actor="alice", action=f"a{n}", tenant=tenant) for n in range(3)]
    record = audit_export_record(events[1]) | {"actor": "mallory"}
    forged = audit_chain.link_hash(prev_hash=record["prev_hash"], fields=record)
    _tamper("UPDATE tenants_auditevent SET actor = 'mallory', hash = %s WHERE id = %s", [forged, events[1].pk])
    report = audit_chain_verify(chain="acme")
    assert not report.ok and report.broken_seq == 3 and "prev_hash" in report.reason


def test_export_lines_verify_offline_and_detect_edits(tenant):
    for n in range(4):
        audit_record(actor="alice", action=f"a{n}", tenant=tenant, details={"n": n})
    lines = [json.dumps(audit_export_record(e)) for e in AuditEvent.objects.filter(chain="acme").order_by("seq")]
    assert all(r.ok for r in audit_chain.verify_jsonl(lines))
    edited = json.loads(lines[1]) | {"action": "nothing.happened"}
    lines[1] = json.dumps(edited)
    [report] = audit_chain.verify_jsonl(lines)
    assert not report.ok and report.broken_seq == 2


def test_command_reports_ok(tenant):
    audit_record(actor="alice", action="a", tenant=tenant)
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "acme: OK, 1 events" in out.getvalue()
