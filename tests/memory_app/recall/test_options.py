"""The recall's settings snapshot: read once, checked where it is read."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory_app.recall.options import RecallOptions


@pytest.mark.parametrize(("setting", "name", "default", "spelled", "read", "unknown"), [
    ("ENGRAM_FUSION", "fusion", "linear", "RRF", "rrf", "convex"),
    ("ENGRAM_LINEAR_LEXICAL_NORM", "lexical_norm", "coverage", " MinMax ", "minmax", "zscore"),
])
def test_a_choice_is_read_case_blind_and_checked(settings, setting, name, default, spelled, read, unknown):
    assert getattr(RecallOptions.from_settings(), name) == default
    setattr(settings, setting, spelled)
    assert getattr(RecallOptions.from_settings(), name) == read
    setattr(settings, setting, unknown)
    with pytest.raises(ImproperlyConfigured, match=setting):
        RecallOptions.from_settings()


def test_every_option_is_a_setting():
    from dataclasses import fields

    from django.conf import settings as django_settings

    assert all(hasattr(django_settings, f.metadata["setting"]) for f in fields(RecallOptions))


def test_a_snapshot_does_not_follow_later_changes(settings):
    before = RecallOptions.from_settings()
    settings.ENGRAM_RECALL_CANDIDATES = before.candidates + 1
    assert before.candidates == settings.ENGRAM_RECALL_CANDIDATES - 1
    assert RecallOptions.from_settings().candidates == settings.ENGRAM_RECALL_CANDIDATES
    with pytest.raises(AttributeError):
        before.candidates = 1  # frozen
