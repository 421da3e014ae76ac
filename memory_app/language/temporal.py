"""The date window a question names ("in June", "last year", "on 13 October 2023", "two weeks
ago", "yesterday"), read without a model against the recall's ``now``, in the end-user's calendar.
Relations to other events ("before she moved") name no date and are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

MONTHS = {m: n for n, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), start=1)}
_MONTH = r"(?P<month>january|february|march|april|may|june|july|august|september|october|november|december)"
_DAY_FIRST = re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})\b", re.I)
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}(?:,?\s+(?P<year>\d{{4}}))?\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+(?P<year>(?:19|20)\d{2})\b", re.I)
_RELATIVE = re.compile(r"\b(?P<which>last|this|past)\s+(?P<unit>week|month|year)\b", re.I)
_AGO = re.compile(r"\b(?P<n>\d+|a|an|one|two|three|four|five|six)\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I)
_DAY_WORD = re.compile(r"\b(?P<word>yesterday|today)\b", re.I)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
# "May" is also a verb ("May I ...", "she may have"): as a month it needs a year or a preposition.
_MAY_AS_MONTH = re.compile(r"\b(?:in|during|of|since|early|late|mid)\s+may\b|\bmay,?\s+\d{4}\b", re.I)


@dataclass(frozen=True)
class TimeWindow:
    start: datetime
    end: datetime  # exclusive
    phrase: str

    def contains(self, when: datetime, *, grace: timedelta) -> bool:
        return self.start <= when < self.end + grace


def _month_window(year: int, month: int, tz: tzinfo) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=tz)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=tz)
    return start, end


def _shift_months(when: datetime, months: int) -> datetime:
    index = when.year * 12 + when.month - 1 - months
    return when.replace(year=index // 12, month=index % 12 + 1, day=1)


def query_time_window(query: str, *, now: datetime, tz: tzinfo | None = None) -> TimeWindow | None:
    """The date window ``query`` names (the first recognised expression, most specific kind
    first), or None. ``now`` anchors relative expressions and month names without a year; the
    window's days are ``tz``'s (default UTC)."""
    tz = tz or UTC
    now = (now if now.tzinfo else now.replace(tzinfo=UTC)).astimezone(tz)
    for pattern in (_DAY_FIRST, _MONTH_FIRST):
        if m := pattern.search(query):
            try:
                start = datetime(int(m["year"]), MONTHS[m["month"].lower()], int(m["day"]), tzinfo=tz)
            except ValueError:  # "31 February": no such day
                continue
            return TimeWindow(start=start, end=start + timedelta(days=1), phrase=m.group())
    for m in _MONTH_YEAR.finditer(query):
        month = MONTHS[m["month"].lower()]
        if month == 5 and not _MAY_AS_MONTH.search(query):
            continue
        if m["year"]:
            year = int(m["year"])
        else:  # the latest such month that has begun by ``now``
            year = now.year if month <= now.month else now.year - 1
        start, end = _month_window(year, month, tz)
        return TimeWindow(start=start, end=end, phrase=m.group())
    if m := _YEAR.search(query):
        year = int(m["year"])
        return TimeWindow(start=datetime(year, 1, 1, tzinfo=tz), end=datetime(year + 1, 1, 1, tzinfo=tz),
                          phrase=m.group())
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if m := _DAY_WORD.search(query):
        start = today - timedelta(days=1 if m["word"].lower() == "yesterday" else 0)
        return TimeWindow(start=start, end=start + timedelta(days=1), phrase=m.group())
    if m := _RELATIVE.search(query):
        which, unit = m["which"].lower(), m["unit"].lower()
        back = 0 if which == "this" else 1
        if unit == "week":
            start = today - timedelta(days=today.weekday() + 7 * back)
            end = start + timedelta(days=7)
        elif unit == "month":
            start = _shift_months(today, back)
            end = _shift_months(today, back - 1)
        else:
            start = datetime(today.year - back, 1, 1, tzinfo=tz)
            end = datetime(today.year - back + 1, 1, 1, tzinfo=tz)
        if which == "past":  # "the past month": the last 30 days, not the calendar month
            span = {"week": 7, "month": 31, "year": 366}[unit]
            start, end = today - timedelta(days=span), today + timedelta(days=1)
        return TimeWindow(start=start, end=end, phrase=m.group())
    if m := _AGO.search(query):
        n = _NUMBERS.get(m["n"].lower()) or int(m["n"])
        unit = m["unit"].lower()
        if unit in ("day", "week"):
            days = n * (7 if unit == "week" else 1)
            slack = 1 if unit == "day" else 4  # "two weeks ago": about then, give or take half a week
            centre = today - timedelta(days=days)
            return TimeWindow(start=centre - timedelta(days=slack), end=centre + timedelta(days=slack + 1),
                              phrase=m.group())
        if unit == "month":
            start = _shift_months(today, n)
            return TimeWindow(start=start, end=_shift_months(today, n - 1), phrase=m.group())
        return TimeWindow(start=datetime(today.year - n, 1, 1, tzinfo=tz),
                          end=datetime(today.year - n + 1, 1, 1, tzinfo=tz), phrase=m.group())
    return None
