"""The recall's settings snapshot: read once, checked where it is read."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory_app.recall.options import RecallOptions


def test_the_fusion_setting_is_checked(settings):
    assert RecallOptions.from_settings().fusion == "linear"
    settings.ENGRAM_FUSION = "RRF"
    assert RecallOptions.from_settings().fusion == "rrf"
    settings.ENGRAM_FUSION = "convex"
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_FUSION"):
        RecallOptions.from_settings()


def test_the_lexical_norm_setting_is_checked(settings):
    assert RecallOptions.from_settings().lexical_norm == "coverage"
    settings.ENGRAM_LINEAR_LEXICAL_NORM = " MinMax "
    assert RecallOptions.from_settings().lexical_norm == "minmax"
    settings.ENGRAM_LINEAR_LEXICAL_NORM = "zscore"
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_LINEAR_LEXICAL_NORM"):
        RecallOptions.from_settings()


def test_a_snapshot_does_not_follow_later_changes(settings):
    before = RecallOptions.from_settings()
    settings.ENGRAM_RECALL_CANDIDATES = before.candidates + 1
    assert before.candidates == settings.ENGRAM_RECALL_CANDIDATES - 1
    assert RecallOptions.from_settings().candidates == settings.ENGRAM_RECALL_CANDIDATES
    with pytest.raises(AttributeError):
        before.candidates = 1  # frozen
