"""RankingConfig: defaults in code, changes read from text or JSON values by each field's type."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_app.recall.ranking import RankingConfig


def test_changes_are_read_by_each_fields_type():
    changed = RankingConfig().changed({"bm25": "off", "dense": True, "entity_legs": "3", "fact_credit": "0",
                                       "catalog_prior": 1, "fusion": " RRF", "lexical_norm": "minmax"})
    assert changed == RankingConfig(bm25=False, entity_legs=3, fact_credit=0.0, catalog_prior=1.0, fusion="rrf",
                                    lexical_norm="minmax")
    assert isinstance(changed.catalog_prior, float)
    assert RankingConfig().changed({}) == RankingConfig()


@pytest.mark.parametrize(("changes", "says"), [
    ({"fusion": "convex"}, "fusion must be"), ({"lexical_norm": 1}, "lexical_norm must be"),
    ({"entity_legs": 2.5}, "entity_legs must be a number"), ({"entity_legs": True}, "entity_legs must be"),
    ({"bm25": 1}, "bm25 must be a bool"), ({"decay_decay": "inf"}, "decay_decay must be"),
    ({"ENGRAM_FUSION": "rrf"}, "not a ranking setting"),
])
def test_a_change_it_cannot_take_is_named(changes, says):
    with pytest.raises(ValueError, match=says):
        RankingConfig().changed(changes)


@pytest.mark.properties
@given(st.dictionaries(st.text(max_size=20), st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                                       st.text(max_size=20)), max_size=4))
def test_any_changes_give_a_config_or_a_value_error(changes):
    try:
        changed = RankingConfig().changed(changes)
    except ValueError:
        return
    assert set(changes) <= set(RankingConfig.__dataclass_fields__)
    assert isinstance(changed, RankingConfig)
