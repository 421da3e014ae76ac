"""Time expressions in recall queries: parsing, and the boost through the real Elasticsearch."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from language.temporal import query_time_window

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC)


def _d(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize("query, start, end", [
    ("When did Melanie go camping in June?", _d(2023, 6, 1), _d(2023, 7, 1)),  # latest June before now
    ("What did she do in November?", _d(2022, 11, 1), _d(2022, 12, 1)),  # November has not begun in 2023
    ("What did Mel paint in July 2023?", _d(2023, 7, 1), _d(2023, 8, 1)),
    ("How many times has she gone to the beach in 2023?", _d(2023, 1, 1), _d(2024, 1, 1)),
    ("What painting did she show on October 13, 2023?", _d(2023, 10, 13), _d(2023, 10, 14)),
    ("What happened on 8 May, 2023?", _d(2023, 5, 8), _d(2023, 5, 9)),
    ("What happened in May?", _d(2023, 5, 1), _d(2023, 6, 1)),
    ("What did they see on the camping trip last year?", _d(2022, 1, 1), _d(2023, 1, 1)),
    ("what did I buy last month", _d(2023, 9, 1), _d(2023, 10, 1)),
    ("anything this week?", _d(2023, 10, 16), _d(2023, 10, 23)),  # Monday to Monday
    ("what did I say yesterday", _d(2023, 10, 19), _d(2023, 10, 20)),
    ("the trip two weeks ago", _d(2023, 10, 2), _d(2023, 10, 11)),
    ("the move 3 months ago", _d(2023, 7, 1), _d(2023, 8, 1)),
    ("December 2022 plans", _d(2022, 12, 1), _d(2023, 1, 1)),
    ("What happened on 31 February, 2023?", _d(2023, 2, 1), _d(2023, 3, 1)),  # no such day: the month
])
def test_time_expressions_become_windows(query, start, end):
    window = query_time_window(query, now=NOW)
    assert (window.start, window.end) == (start, end)


@pytest.mark.parametrize("query", [
    "May I ask what she said about the garage?",  # "May" the verb
    "What did she do before she moved?",  # a relation to an event names no date
    "What is 2023 in binary?",  # a bare number is not a year without a preposition
])
def test_no_window_where_no_date_is_named(query):
    assert query_time_window(query, now=NOW) is None


def test_the_window_includes_a_grace_after_its_end():
    window = query_time_window("in June", now=NOW)
    assert window.contains(_d(2023, 7, 20), grace=timedelta(days=31))
    assert not window.contains(_d(2023, 8, 5), grace=timedelta(days=31))
    assert not window.contains(_d(2023, 5, 31), grace=timedelta(days=31))  # never before the window




def test_windows_are_the_end_users_calendar_days_when_a_timezone_is_named():
    # 20 October 2023, 03:00 UTC is still the evening of the 19th in Los Angeles (UTC-7 then).
    now = datetime(2023, 10, 20, 3, 0, tzinfo=UTC)
    la = ZoneInfo("America/Los_Angeles")
    utc_yesterday = query_time_window("what did I say yesterday", now=now)
    assert (utc_yesterday.start, utc_yesterday.end) == (_d(2023, 10, 19), _d(2023, 10, 20))
    la_yesterday = query_time_window("what did I say yesterday", now=now, tz=la)
    assert (la_yesterday.start, la_yesterday.end) == (_d(2023, 10, 18, 7), _d(2023, 10, 19, 7))
    june = query_time_window("in June", now=now, tz=ZoneInfo("Asia/Tokyo"))  # Tokyo's June: from 31 May 15:00 UTC
    assert (june.start, june.end) == (_d(2023, 5, 31, 15), _d(2023, 6, 30, 15))






def test_statement_dates_are_written_out_against_the_day_they_were_said():
    from language.temporal import with_dates

    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
    assert with_dates("I went yesterday", when=said) == "I went on 7 May 2023"
    assert with_dates("last year I painted it", when=said) == "in 2022 I painted it"
    assert with_dates("we go camping next month", when=said) == "we go camping in June 2023"
    assert with_dates("two days ago", when=said) == "on 6 May 2023"
    assert with_dates("last Friday", when=said) == "on Friday 5 May 2023"
    assert with_dates("since last week", when=said) == "since the week of 1 May 2023"
    # No date follows from these alone: left as said.
    assert with_dates("a few weeks ago, recently, this Friday", when=said) == "a few weeks ago, recently, this Friday"


@pytest.mark.parametrize("query, start, end", [
    ("What did they do last summer?", _d(2023, 6, 1), _d(2023, 9, 1)),
    ("Where did she go in the summer of 2022?", _d(2022, 6, 1), _d(2022, 9, 1)),
    ("What happened last Saturday?", _d(2023, 10, 14), _d(2023, 10, 15)),  # NOW is a Friday
    ("Any plans from last weekend?", _d(2023, 10, 14), _d(2023, 10, 16)),
    ("What happened the week before 9 June 2023?", _d(2023, 6, 2), _d(2023, 6, 9)),
    ("Where was he two days after 20 May 2023?", _d(2023, 5, 22), _d(2023, 5, 23)),
    ("What did she do in early June 2023?", _d(2023, 6, 1), _d(2023, 6, 11)),
    ("Which event took place on 2023-05-08?", _d(2023, 5, 8), _d(2023, 5, 9)),
    ("What happened between 1 May 2023 and 20 May 2023?", _d(2023, 5, 1), _d(2023, 5, 21)),
])
def test_seasons_weekdays_relations_and_parts_become_windows(query, start, end):
    window = query_time_window(query, now=NOW)
    assert (window.start, window.end) == (start, end)


def test_a_month_named_without_a_year_is_that_month_of_any_year():
    window = query_time_window("What did she paint in June?", now=NOW)
    assert window.yearly
    assert window.contains(_d(2021, 6, 15), grace=timedelta(0))  # LoCoMo's sessions lie years before "now"
    assert not window.contains(_d(2021, 8, 15), grace=timedelta(0))


@pytest.mark.parametrize("query, asks", [
    ("When did Caroline go to the support group?", True),
    ("Since when has he been painting?", True),
    ("How long has she had the dog?", True),
    ("In which year did they move?", True),
    ("Who helps her when she is down?", False),  # "when" joining two clauses
    ("What did Melanie paint?", False),
])
def test_a_question_asks_for_a_time(query, asks):
    from language.temporal import query_asks_time

    assert query_asks_time(query) is asks


def test_a_statement_names_the_days_it_is_about_against_the_day_it_was_said():
    from datetime import date

    from language.temporal import event_dates, states_time

    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
    assert event_dates("We went hiking last Saturday!", when=said) == [(date(2023, 5, 6), date(2023, 5, 7))]
    assert event_dates("The race is on 20 May.", when=said) == [(date(2023, 5, 20), date(2023, 5, 21))]
    assert event_dates("I started in 2022 and moved in June 2023.", when=said) == [
        (date(2022, 1, 1), date(2023, 1, 1)), (date(2023, 6, 1), date(2023, 7, 1))]
    assert event_dates("Thanks, that sounds great.", when=said) == []
    assert event_dates("May I ask you something?", when=said) == []  # "May" the verb
    assert states_time("I've been painting for seven years now.", when=said)
    assert states_time("I just signed up for a pottery class.", when=said)
    assert states_time("We went yesterday.", when=said)
    assert not states_time("I just wanted to say thanks.", when=said)
    assert not states_time("That painting is lovely.", when=said)




# ---------------------------------------------------------------- properties (no service)
# Whatever a user writes, and whenever it was said: the readers never raise, drop what the
# calendar cannot hold (Python's years 1-9999), and give the same answer to the same input.

from datetime import date  # noqa: E402

from hypothesis import example, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from language.temporal import (  # noqa: E402
    date_ranges,
    event_dates,
    named_day_ranges,
    query_asks_time,
    statement_dates,
    states_time,
    stored_ranges,
    with_dates,
)

from tests.strategies import moments, numbers, sentences  # noqa: E402

_EDGES = (datetime.min, datetime.max.replace(tzinfo=UTC), datetime(1, 1, 1, tzinfo=ZoneInfo("Asia/Tokyo")),
          datetime(9999, 12, 31, 23, 0, tzinfo=ZoneInfo("America/New_York")))


def _use(window):
    """What recall does with a window: its spans, calendar days and the days around them, and
    whether a moment or a stored range falls in it."""
    edge_days = [(date.min, date(1, 1, 2)), (date(9999, 12, 30), date.max)]
    return (window.spans(), window.ranges(), named_day_ranges(window, back=3),
            [window.contains(m, grace=timedelta(days=365)) for m in (window.start, *_EDGES[1:])],
            window.overlaps(edge_days + window.ranges()))


@pytest.mark.properties
@given(query=sentences, now=moments, tz=st.none() | st.timezones())
@example(query="what happened 5000 years ago", now=NOW, tz=None)
@example(query="What happened 1000000 days ago?", now=NOW, tz=None)
@example(query="what happened in 10000 years", now=NOW, tz=None)
@example(query="what happened yesterday", now=datetime(1, 1, 1, tzinfo=UTC), tz=None)
@example(query="What happened in December?", now=datetime(9999, 12, 31, 23, tzinfo=UTC), tz=ZoneInfo("Pacific/Kiritimati"))
@example(query="the week before 1 January 0001", now=NOW, tz=None)
@example(query="What happened between 1 May 0001 and 31 December 9999?", now=NOW, tz=None)
@example(query="What happened in late December 9999?", now=NOW, tz=None)
def test_a_question_is_read_whatever_it_says_and_whenever_it_is_asked(query, now, tz):
    window = query_time_window(query, now=now, tz=tz)
    assert window == query_time_window(query, now=now, tz=tz)
    if window is not None:
        assert window.start < window.end
        _use(window)
    assert query_asks_time(query) is query_asks_time(query)


@pytest.mark.properties
@given(text=sentences, when=moments)
@example(text="The castle near us was built 4500 years ago.", when=NOW)
@example(text="In 10000 years nobody will remember this.", when=NOW)
@example(text="That was 1000000 days ago", when=NOW)
@example(text="We met yesterday, tomorrow we leave.", when=datetime(1, 1, 1, tzinfo=UTC))
@example(text="We met yesterday, tomorrow we leave.", when=datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
@example(text="next winter, a few years back", when=datetime(9999, 12, 31))
def test_a_statement_is_read_whatever_it_says_and_whenever_it_was_said(text, when):
    dated = statement_dates(text, when=when)
    named = event_dates(text, when=when)
    assert dated == statement_dates(text, when=when) and named == event_dates(text, when=when)
    assert all(d.first < d.last and text[d.start:d.end] == d.phrase for d in dated)
    assert all(first < last for first, last in named)
    assert list(stored_ranges(date_ranges(named))) == named  # as stored, and read back by recall
    assert with_dates(text, when=when) == with_dates(text, when=when)
    assert states_time(text, when=when) is states_time(text, when=when)
    if not dated:
        assert with_dates(text, when=when) == text


def _days_before(when: datetime, n: int) -> date | None:
    """The day ``n`` days before ``when``'s, if the calendar holds it and the day after it."""
    try:
        day = when.date() - timedelta(days=n)
        day + timedelta(days=1)
    except OverflowError:
        return None
    return day


@pytest.mark.properties
@given(n=numbers, when=moments)
@example(n=1_000_000, when=NOW)
@example(n=739_000, when=NOW)  # before 1 January of year 1
def test_n_days_ago_names_that_day_or_nothing(n, when):
    """What the calendar can hold is read exactly; what it cannot is dropped, never an error."""
    expected = _days_before(when, n)
    said = f"That was {n} days ago."
    assert [d.first for d in statement_dates(said, when=when)] == ([expected] if expected else [])
    assert event_dates(said, when=when) == ([(expected, expected + timedelta(days=1))] if expected else [])


@pytest.mark.properties
@given(n=numbers, now=moments.filter(lambda m: m.tzinfo is None), ahead=st.booleans())
@example(n=5000, now=NOW.replace(tzinfo=None), ahead=False)
@example(n=10000, now=NOW.replace(tzinfo=None), ahead=True)
def test_n_years_ago_or_ahead_names_that_year_or_nothing(n, now, ahead):
    year = now.year + n if ahead else now.year - n
    held = 1 <= year <= 9998  # the year and the one after it, where its range ends
    said = f"in {n} years" if ahead else f"{n} years ago"
    dated = statement_dates(f"It happens {said}.", when=now)
    assert [(d.first, d.last) for d in dated] == ([(date(year, 1, 1), date(year + 1, 1, 1))] if held else [])
    if not ahead:
        window = query_time_window(f"what happened {said}?", now=now)
        assert (window.start.year if window else None) == (year if held else None)


@pytest.mark.properties
@given(n=st.integers(0, 4000), unit=st.sampled_from(["day", "week", "year"]),
       now=moments.filter(lambda m: m.tzinfo is None), plural=st.booleans())
@example(n=2, unit="week", now=NOW.replace(tzinfo=None), plural=True)
def test_a_question_naming_n_units_ago_reads_about_that_time(n, unit, now, plural):
    """"N days ago" is that day give or take one, "N weeks ago" that day give or take half a week,
    "N years ago" that whole year (the mutation run, scripts/mutation: windows one day or a
    month off, or naive, passed every property before)."""
    said = f"{n} {unit}{'s' if plural else ''} ago"
    today = now.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=UTC)
    try:
        if unit == "year":
            expected = (datetime(today.year - n, 1, 1, tzinfo=UTC), datetime(today.year - n + 1, 1, 1, tzinfo=UTC))
        else:
            centre, slack = today - timedelta(days=n * (7 if unit == "week" else 1)), (4 if unit == "week" else 1)
            expected = (centre - timedelta(days=slack), centre + timedelta(days=slack + 1))
    except (OverflowError, ValueError):
        expected = None
    window = query_time_window(f"What happened {said}?", now=now)
    assert ((window.start, window.end, window.phrase) if window else None) == (*expected, said) if expected else True
    if window is not None:
        assert window.start.tzinfo is UTC and window.end.tzinfo is UTC
