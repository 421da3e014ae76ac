"""``manage.py outbox``: failed writes listed, retried after a fix, or discarded; each audited."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory_app.models import OutboxEntry
from memory_app.outbox import outbox_replay
from tenants.models import AuditEvent, Subject


def _failed(tenant, external_id: str, text: str) -> OutboxEntry:
    return OutboxEntry.objects.create(
        tenant=tenant, external_id=external_id, operation="episode", memory_id=f"{external_id}-op-0001",
        payload={"text": text}, actor="t", reason="outage", status="failed", attempts=1,
        last_error={"code": "internal_error", "message": "the write failed (OverflowError)", "details": {}})


def _run(*args: str) -> str:
    out = StringIO()
    call_command("outbox", *args, stdout=out, stderr=out)
    return out.getvalue()


@pytest.fixture
def tenant(memory):
    from tenants.models import Tenant

    return Tenant.objects.create(slug="outbox-ops", name="Outbox ops")


def test_failed_writes_are_listed_retried_and_discarded(tenant):
    retried = _failed(tenant, "uma", "Uma's boiler is a Vaillant")
    dropped = _failed(tenant, "uma", "a write nobody wants back")
    listing = _run("list", "--tenant", tenant.slug)
    assert str(retried.uid) in listing and str(dropped.uid) in listing and "2 failed write(s)" in listing
    assert "Vaillant" not in listing  # ids and error codes, never content

    assert f"{retried.uid}: pending" in _run("retry", str(retried.uid), "--actor", "ops-anna")
    assert outbox_replay().applied == 1
    subject = Subject.objects.get(tenant=tenant, external_id="uma")
    retried.refresh_from_db()
    assert retried.status == "done" and retried.result == {"id": "uma-op-0001"}

    assert f"{dropped.uid}: cancelled" in _run("discard", str(dropped.uid))
    dropped.refresh_from_db()
    assert dropped.status == "cancelled" and dropped.payload == {}
    events = AuditEvent.objects.filter(action__in=["outbox.retry", "outbox.discard"]).order_by("seq")
    assert [(e.action, e.target_id, e.details["error"]) for e in events] == [
        ("outbox.retry", str(retried.uid), "internal_error"), ("outbox.discard", str(dropped.uid), "internal_error")]
    assert events[0].actor == "manage.py outbox (ops-anna)"
    assert subject.external_id == "uma"

    with pytest.raises(CommandError):  # neither is failed any more: left as they are, and said so
        _run("retry", str(retried.uid), str(dropped.uid))
    assert AuditEvent.objects.filter(action__in=["outbox.retry", "outbox.discard"]).count() == 2


def test_a_failed_write_without_content_is_not_retried(tenant):
    entry = _failed(tenant, "vic", "x")
    OutboxEntry.objects.filter(pk=entry.pk).update(payload={})
    with pytest.raises(CommandError):
        _run("retry", str(entry.uid))
    entry.refresh_from_db()
    assert entry.status == "failed"
