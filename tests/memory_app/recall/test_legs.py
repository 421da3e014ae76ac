"""The legs as values: what explain calls each, and which leg's scale a crediting leg is valued on."""

import pytest

from memory_app.recall.legs import PLAIN_BM25, PLAIN_DENSE, LegId, LegKind, LegRole, entity_leg
from memory_app.recall.options import RecallOptions
from memory_app.recall.search import entity_guard, plain_leg_ids


@pytest.mark.parametrize(("leg", "name"), [
    (PLAIN_BM25, "bm25"),
    (PLAIN_DENSE, "dense"),
    (LegId(LegKind.BM25, LegRole.CREDIT), "credit_bm25"),
    (LegId(LegKind.DENSE, LegRole.CREDIT), "credit_dense"),
    (entity_leg(LegKind.BM25, 2), "entity2"),
    (entity_leg(LegKind.DENSE, 2), "entity2_dense"),
    (entity_leg(LegKind.MENTIONS, 1), "entity1_mentions"),
    (LegId(LegKind.BM25, LegRole.DATED), "dated"),
    (LegId(LegKind.DENSE, LegRole.DATED), "dated_dense"),
    (LegId(LegKind.DENSE, LegRole.HOP), "hop_dense"),
])
def test_each_leg_has_the_name_explain_shows(leg, name):
    assert leg.name == name
    assert leg.dense is (leg.kind is LegKind.DENSE)


def test_a_crediting_leg_is_valued_on_its_plain_legs_scale_and_others_on_their_own():
    assert LegId(LegKind.DENSE, LegRole.CREDIT).shadows == PLAIN_DENSE
    assert LegId(LegKind.BM25, LegRole.CREDIT).shadows == PLAIN_BM25
    assert entity_leg(LegKind.DENSE, 1).shadows == entity_leg(LegKind.DENSE, 1)


def test_the_plain_legs_follow_the_switches_and_the_crediting_ones_come_after(settings):
    options = RecallOptions.from_settings()
    assert plain_leg_ids(options) == [PLAIN_BM25, PLAIN_DENSE]
    assert plain_leg_ids(options, crediting=True) == [PLAIN_BM25, PLAIN_DENSE, LegId(LegKind.BM25, LegRole.CREDIT),
                                                      LegId(LegKind.DENSE, LegRole.CREDIT)]
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "bm25": False}
    assert plain_leg_ids(RecallOptions.from_settings(), crediting=True) == [PLAIN_DENSE,
                                                                           LegId(LegKind.DENSE, LegRole.CREDIT)]


def test_the_guard_reads_each_count_and_drops_the_legs_of_a_rare_entity(settings):
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_min_mentions": 5}
    names = [(entity_leg(LegKind.MENTIONS, 1), 0.0), (entity_leg(LegKind.BM25, 1), 0.5),
             (entity_leg(LegKind.DENSE, 1), 0.5), (entity_leg(LegKind.MENTIONS, 2), 0.0),
             (entity_leg(LegKind.BM25, 2), 0.5)]
    responses = [{"hits": {"total": {"value": 7}}}, {"n": 1}, {"n": 2}, {"hits": {"total": {"value": 2}}}, {"n": 3}]
    kept, legs, counts = entity_guard(responses, names, entities=("Melanie", "Caroline"),
                                      options=RecallOptions.from_settings())
    assert counts == {"Melanie": 7, "Caroline": 2}
    assert legs == [(entity_leg(LegKind.BM25, 1), 0.5), (entity_leg(LegKind.DENSE, 1), 0.5)]
    assert kept == [{"n": 1}, {"n": 2}]
