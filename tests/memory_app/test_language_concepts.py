"""Concepts and synonyms in memory_app's writes and recalls (language.concepts against the real Elasticsearch)."""

import pytest
from engram_core.es.schema import MemoryType, alias_name
from memory_app.providers import concepts_of
from memory_app.selectors import memory_get
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write

from memory_app.recall import memory_recall


def test_switched_off_nothing_is_expanded(settings):
    # (A question's kinds are not read then either: tests/memory_app/recall/test_read.py.)
    settings.ENGRAM_CONCEPTS = False
    assert concepts_of("I spent a week in Rome.") is None


def _rome_and_others(subject):
    rome = episode_write(subject=subject, text="I spent a week in Rome, the food was amazing.")
    for text in ("Jon visited his grandmother's farm again.", "The museum Jon visited had great paintings.",
                 "Jon's studio had many visitors today."):
        episode_write(subject=subject, text=text)
    return rome


def test_a_question_for_a_kind_finds_a_memory_naming_a_member_of_it(subject):
    rome = _rome_and_others(subject)
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Which cities has Jon visited?", explain=True)}
    # The turn shares no word with the question: its BM25 rank is its concepts' match ("city").
    assert hits[rome["id"]]["explain"]["bm25_rank"] is not None
    # The field is searched, never shown: not in the write's answer, a read or a recall hit.
    assert "concepts" not in rome and "concepts" not in hits[rome["id"]]
    assert "concepts" not in memory_get(subject=subject, memory_id=rome["id"])


def test_without_concepts_the_lexical_leg_cannot_find_it(subject, settings):
    settings.ENGRAM_CONCEPTS = False
    rome = _rome_and_others(subject)
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Which cities has Jon visited?", explain=True)}
    assert rome["id"] not in hits or hits[rome["id"]]["explain"]["bm25_rank"] is None


def test_facts_and_catalog_entries_get_concepts_too(subject, es_admin):
    fact = fact_write(subject=subject, text="The user plays the cello in a quartet.")
    entry = catalog_entry_write(tenant=subject.tenant, title="Rome city break",
                                text="Three nights near the Colosseum.")
    for memory_type, memory in ((MemoryType.SEMANTIC, fact), (MemoryType.CATALOG, entry)):
        assert es_admin.get(index=alias_name(memory_type), id=memory["id"])["_source"]["concepts"]
    hits = {h["id"] for h in memory_recall(subject=subject, query="What instruments does the user play?")}
    assert fact["id"] in hits


def _holiday_and_others(subject):
    vacation = episode_write(subject=subject, text="We booked the vacation in Lisbon for May.")
    for text in ("The electricity bill came in higher than usual.", "Dawn starts school in September."):
        episode_write(subject=subject, text=text)
    return vacation


def test_a_memory_naming_a_synonym_of_a_question_s_word_gets_a_share_of_its_score(subject, settings):
    vacation = _holiday_and_others(subject)
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Where is the holiday?", explain=True)}
    # "holiday" is not in its text, "vacation" is: the lexical leg finds it.
    assert hits[vacation["id"]]["explain"]["bm25_rank"] == 1
    credited = hits[vacation["id"]]["explain"]["linear_score"]

    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "synonym_weight": 0}
    hits = {h["id"]: h for h in memory_recall(subject=subject, query="Where is the holiday?", explain=True)}
    assert hits[vacation["id"]]["explain"]["bm25_rank"] is None
    # Only its dense leg's share is left (the lexical coverage of "holiday" was 0.5 × 1).
    assert hits[vacation["id"]]["explain"]["linear_score"] == pytest.approx(credited - 0.5)
