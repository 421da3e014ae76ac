"""Dates and times in recall: named windows, the end-user's time zone, the days a memory names (language.temporal, against the real Elasticsearch)."""

from datetime import UTC, datetime

import pytest
from engram_core.errors import ValidationFailed
from memory_app.services.imports import episodes_import

from memory_app.recall import memory_recall

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC)


def test_episodes_in_the_named_window_are_boosted(subject, settings):
    texts = {"june": "We went camping at the lake with the kids.",
             "march": "We went camping at the lake with the kids again."}
    june, march = episodes_import(subject=subject, episodes=[
        {"text": texts["june"], "occurred_at": "2023-06-12T10:00:00+00:00"},
        {"text": texts["march"], "occurred_at": "2023-03-12T10:00:00+00:00"}])
    question = "When did we go camping at the lake in June?"
    on = memory_recall(subject=subject, query=question, explain=True, now=NOW)  # the shipped default: on, 0.25
    by_id = {h["id"]: h for h in on}
    assert by_id[june]["explain"]["multipliers"]["time_window"] == pytest.approx(1.25)
    assert "time_window" not in by_id[march]["explain"]["multipliers"]
    assert on[0]["id"] == june
    # Nothing is filtered out: the March trip is still recalled.
    assert march in by_id
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "temporal_boost": 0.0}
    off = memory_recall(subject=subject, query=question, explain=True, now=NOW)
    assert all("time_window" not in h["explain"]["multipliers"] for h in off)


def test_a_recall_reads_dates_in_the_end_users_time_zone(subject):
    # Told at 12:00 on 18 October in Los Angeles (19:00 UTC): "yesterday" at 20:00 on the 19th there.
    told = episodes_import(subject=subject, episodes=[
        {"text": "We repainted the fence blue.", "occurred_at": "2023-10-18T19:00:00+00:00"}])[0]
    now = datetime(2023, 10, 20, 3, 0, tzinfo=UTC)
    question = "What did we paint yesterday?"
    local = memory_recall(subject=subject, query=question, explain=True, now=now, timezone="America/Los_Angeles")
    assert local[0]["id"] == told and local[0]["explain"]["multipliers"]["time_window"] == pytest.approx(1.25)
    in_utc = memory_recall(subject=subject, query=question, explain=True, now=now)  # UTC's yesterday: the 19th
    assert in_utc[0]["id"] == told and "time_window" not in in_utc[0]["explain"]["multipliers"]


@pytest.mark.parametrize("timezone", ["Mars/Olympus_Mons", "../etc/passwd", "/etc/localtime", "x" * 65, 7])
def test_an_unknown_time_zone_is_refused(subject, timezone):
    with pytest.raises(ValidationFailed) as err:
        memory_recall(subject=subject, query="what happened yesterday?", timezone=timezone)
    assert err.value.code == "invalid_timezone" and err.value.details == {"field": "timezone"}


def test_an_episode_stores_the_days_its_words_name_and_a_question_finds_it_by_them(subject):
    from memory_app.services.episodes import episode_write

    # Told on 8 May about the Saturday before; asked about 6 May, the day it names.
    told = episode_write(subject=subject, text="We went to the pottery workshop last Saturday.",
                         occurred_at="2023-05-08T13:56:00+00:00")["id"]
    other = episode_write(subject=subject, text="We went to the pottery workshop again.",
                          occurred_at="2023-03-01T10:00:00+00:00")["id"]
    results = memory_recall(subject=subject, query="What did we do on 6 May 2023 at the pottery workshop?",
                            explain=True, now=NOW)
    by_id = {h["id"]: h for h in results}
    assert by_id[told]["explain"]["bm25_rank"] == 1  # it holds the question's date, the other does not
    assert by_id[told]["explain"]["multipliers"]["time_window"] == pytest.approx(1.25)
    assert "time_window" not in by_id[other]["explain"]["multipliers"]
    assert "event_dates" not in results[0] and "states_time" not in results[0]  # derived, never returned
