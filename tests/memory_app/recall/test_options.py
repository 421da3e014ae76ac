"""A recall's options: the ranking as the edge builds it (the code's defaults with ENGRAM_RANKING's
changes) and the operator's settings, read once."""

from dataclasses import fields

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from memory_app.recall.options import RETIRED_SETTINGS, RecallOptions, ranking_config
from memory_app.recall.ranking import RankingConfig


def test_the_ranking_is_the_codes_defaults_with_the_deployments_changes(settings):
    assert ranking_config() == RankingConfig()
    settings.ENGRAM_RANKING = {"fusion": " RRF ", "entity_min_mentions": 5}
    assert ranking_config() == RankingConfig(fusion="rrf", entity_min_mentions=5)
    assert RecallOptions.from_settings().fusion == "rrf"


@pytest.mark.parametrize("changes", [{"fusion": "convex"}, {"lexical_norm": "zscore"}, {"no_such_knob": 1},
                                     {"entity_legs": "two"}, {"bm25": "maybe"}, {"fact_credit": "nan"}, []])
def test_a_ranking_it_cannot_take_is_refused_where_it_is_read(settings, changes):
    settings.ENGRAM_RANKING = changes
    with pytest.raises(ImproperlyConfigured, match="ENGRAM_RANKING"):
        RecallOptions.from_settings()


def test_the_operators_settings_are_read_and_the_ranking_is_not_a_setting():
    operator = [f for f in fields(RecallOptions) if "setting" in f.metadata]
    assert operator and all(hasattr(django_settings, f.metadata["setting"]) for f in operator)
    # Every knob that was a setting is a field; the ones born as fields never were settings.
    born = {"superseded_weight", "past_boost", "stale_facts", "past_above", "ended_below", "dated_weight",
            "neighbour_credit", "speaker_weight", "listener_weight", "hop_weight", "activity_answer_boost"}
    assert {f.name for f in fields(RankingConfig)} == set(RETIRED_SETTINGS.values()) | born
    assert not any(hasattr(django_settings, name) for name in RETIRED_SETTINGS)


def test_the_given_ranking_is_the_one_used(settings):
    settings.ENGRAM_RANKING = {"fusion": "rrf"}
    options = RecallOptions.from_settings(RankingConfig(entity_legs=0))
    assert (options.fusion, options.entity_legs) == ("linear", 0)


def test_a_snapshot_does_not_follow_later_changes(settings):
    before = RecallOptions.from_settings()
    settings.ENGRAM_RECALL_CANDIDATES = before.candidates + 1
    assert before.candidates == settings.ENGRAM_RECALL_CANDIDATES - 1
    assert RecallOptions.from_settings().candidates == settings.ENGRAM_RECALL_CANDIDATES
    with pytest.raises(AttributeError):
        before.candidates = 1  # frozen
