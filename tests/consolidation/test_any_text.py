"""The rules extractor over any episode text: it never raises, every fact it proposes stands on
episodes of the run (never only on context, never on an id it was not given), every playbook on
episodes it was given, and the same episodes give the same proposals again (a rerun is idempotent
before the service's own checks)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from memory_app.consolidation.extractors import Episode
from memory_app.consolidation.extractors.rules import RulesExtractor
from tests.strategies import hostile_texts as _pieces

pytestmark = pytest.mark.properties

# Statements the rules read, so that hostile text meets the code that builds facts, not only the
# code that finds none.
_STATEMENTS = st.sampled_from([
    "My favourite colour is {x}.", "I moved to {x} last month.", "I work as a {x}.", "I no longer like {x}",
    "Correction: my phone number is {x}.", "My new roommate is {x}.", "The router keeps dropping {x}.",
    "I restarted it and {x} worked.", "That worked!", "Caroline: I'm allergic to {x}", "I prefer {x} over tea",
])
_texts = st.one_of(_pieces, st.builds(lambda s, x: s.format(x=x), _STATEMENTS, _pieces))


def _episodes(texts: list[str], start: int, session: str | None) -> list[Episode]:
    return [Episode(id=f"e{n}", text=t, occurred_at=f"2025-01-01T00:{n % 60:02d}:00Z", session_id=session,
                    role="user" if n % 3 else "assistant") for n, t in enumerate(texts, start=start)]


@settings(max_examples=int(os.environ.get("ENGRAM_EXTRACTOR_TEXT_EXAMPLES", "150")), deadline=None)
@given(new=st.lists(_texts, min_size=1, max_size=5), earlier=st.lists(_texts, max_size=3),
       session=st.sampled_from([None, "s1"]), user_name=st.sampled_from(["the user", "Dana", "\u202eAli\u0301"]))
def test_any_episode_text_gives_proposals_standing_on_the_runs_episodes_the_same_each_time(new, earlier, session,
                                                                                          user_name):
    context = _episodes(earlier, 0, session)
    episodes = _episodes(new, len(earlier), session)
    given_ids = {e.id for e in episodes}
    every_id = given_ids | {e.id for e in context}

    first = RulesExtractor().extract(episodes=episodes, context=context, user_name=user_name)
    again = RulesExtractor().extract(episodes=episodes, context=context, user_name=user_name)

    assert (first.facts, first.playbooks) == (again.facts, again.playbooks)
    for fact in first.facts:
        assert fact.text.strip() and fact.episode_ids and set(fact.episode_ids) <= given_ids, fact
    for playbook in first.playbooks:
        assert playbook.episode_ids and set(playbook.episode_ids) <= every_id, playbook
        assert set(playbook.episode_ids) & given_ids or playbook.outcome_episode_id in given_ids, playbook
        assert playbook.outcome_episode_id is None or playbook.outcome_episode_id in every_id, playbook
