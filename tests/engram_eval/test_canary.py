"""The canary scan on the real cluster: every kind of copy of memory text is found before a forget
or an erase, and none after; a copy left behind is reported."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from engram_eval.canary import FAMILIES, canary_scan_run
from memory_app.services.forget import copies

pytestmark = pytest.mark.django_db(transaction=True)


def test_forget_and_erase_leave_no_copy_of_any_canary(es_prefix, invalidate_minted_keys):
    forgotten, erased = canary_scan_run()
    for report in (forgotten, erased):
        assert report.unseen == [], report.lines()  # each canary was found before: the scan proves something
        assert report.after == [], [str(h) for h in report.after]
    assert set(erased.families) == set(FAMILIES) and "admin log" not in forgotten.families
    assert {h.store for h in forgotten.before} >= {"elasticsearch", "database", "export"}


def test_a_copy_left_behind_is_reported(es_prefix, invalidate_minted_keys, monkeypatch):
    monkeypatch.setattr(copies, "memory_copies_purge", lambda **kwargs: 0)  # stored responses keep their text
    forgotten, _erased = canary_scan_run()
    assert not forgotten.ok
    assert {(h.family, h.store) for h in forgotten.after} >= {("idempotency record", "database")}


def test_the_command_prints_the_families_and_the_copies_left(es_prefix, invalidate_minted_keys, capsys):
    call_command("canary_scan")
    out = capsys.readouterr().out
    assert "forget, after: 0 copies; by family: episode 0, derived fact 0" in out
    assert out.strip().endswith("copies left: 0")
