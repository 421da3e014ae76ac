"""The system checks of settings (memory_app.checks) that concern the ranking."""

from memory_app.checks import ranking_check


def test_a_ranking_it_cannot_take_or_a_retired_setting_is_named(settings, monkeypatch):
    monkeypatch.delenv("ENGRAM_FUSION", raising=False)
    assert ranking_check(None) == []
    settings.ENGRAM_RANKING = {"fusion": "convex"}
    monkeypatch.setenv("ENGRAM_FUSION", "rrf")
    found = ranking_check(None)
    assert [p.id for p in found] == ["memory_app.E004", "memory_app.W001"]
    assert "fusion must be" in found[0].msg and "ENGRAM_FUSION" in found[1].msg and '"fusion"' in found[1].hint
