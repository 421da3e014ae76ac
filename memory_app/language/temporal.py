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


# ---------------------------------------------------------------- dates a statement names

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = r"(?P<n>\d+|a|an|one|two|three|four|five|six|a couple of)"
_STATEMENT_DATES = re.compile(
    r"\b(?:(?P<dayword>yesterday|today|tonight|tomorrow|last night|this (?:morning|afternoon|evening))"
    r"|(?P<rel>last|this|next|past) (?P<unit>week|weekend|month|year|summer|winter|spring|fall|autumn|"
    rf"{_WEEKDAY[3:-1]})"
    rf"|{_COUNT} (?P<agounit>day|week|month|year)s? ago"
    rf"|in {_COUNT.replace('?P<n>', '?P<inn>')} (?P<inunit>day|week|month|year)s"
    r")\b", re.I)
_FEW = {"a couple of": 2}  # "a few" names no number: left as said
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11), "winter": (12, 2)}


@dataclass(frozen=True)
class DatedPhrase:
    """A time phrase of a statement and the date it names, written out ("yesterday" said on
    8 May 2023 → "on 7 May 2023")."""

    start: int
    end: int
    phrase: str
    rendered: str


def _day(d: datetime) -> str:
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _month(d: datetime) -> str:
    return f"{d.strftime('%B')} {d.year}"


def _count(raw: str) -> int:
    raw = raw.lower()
    return _FEW.get(raw) or _NUMBERS.get(raw) or int(raw)


def statement_dates(text: str, *, when: datetime) -> list[DatedPhrase]:
    """The relative time phrases of ``text`` (a statement made at ``when``) with the dates they
    name, in text order. Only phrases whose date follows from ``when`` alone: "yesterday",
    "last/this/next week|weekend|month|year|<weekday>|<season>", "N days ago", "in N weeks";
    "recently", "a few weeks ago" or "the day before (something)" name no date and are left
    alone. Calendar arithmetic only: a week starts on Monday, "last Friday" is the latest Friday
    before the day it was said."""
    today = when.replace(hour=0, minute=0, second=0, microsecond=0)
    out = []
    for m in _STATEMENT_DATES.finditer(text):
        rendered = _render(m, today)
        if rendered:
            out.append(DatedPhrase(start=m.start(), end=m.end(), phrase=m.group(), rendered=rendered))
    return out


def _render(m: re.Match, today: datetime) -> str | None:
    if word := m["dayword"]:
        word = word.lower()
        offset = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word, 0)
        return f"on {_day(today + timedelta(days=offset))}"
    if m["rel"]:
        rel, unit = m["rel"].lower(), m["unit"].lower()
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[rel]
        if unit in _WEEKDAYS:
            target = _WEEKDAYS.index(unit)
            if rel == "this":
                return None  # "this Friday" may be either side of today
            delta = (today.weekday() - target) % 7 or 7
            ahead = (target - today.weekday()) % 7 or 7
            day = today - timedelta(days=delta) if step < 0 else today + timedelta(days=ahead)
            return f"on {unit.capitalize()} {_day(day)}"
        if unit == "week":
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            return f"in the week of {_day(monday)}"
        if unit == "weekend":
            saturday = today + timedelta(days=(5 - today.weekday()) % 7)
            if step < 0:
                saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
            elif step > 0 and saturday - today < timedelta(days=2):
                saturday += timedelta(weeks=1)
            return f"on the weekend of {_day(saturday)}"
        if unit == "month":
            first = _shift_months(today, -step)
            return f"in {_month(first)}"
        if unit == "year":
            return f"in {today.year + step}"
        first_month, _ = _SEASONS[unit]
        year = today.year + step
        if unit == "winter" and step >= 0 and today.month <= 2:
            year -= 1
        return f"in the {unit} of {year}" if first_month != 12 else f"in the winter of {year}-{str(year + 1)[2:]}"
    if m["agounit"]:
        n, unit = _count(m["n"]), m["agounit"].lower()
        if unit == "day":
            return f"on {_day(today - timedelta(days=n))}"
        if unit == "week":
            return f"in the week of {_day(today - timedelta(days=today.weekday(), weeks=n))}"
        if unit == "month":
            return f"in {_month(_shift_months(today, n))}"
        return f"in {today.year - n}"
    if m["inunit"]:
        n, unit = _count(m["inn"]), m["inunit"].lower()
        if unit == "day":
            return f"on {_day(today + timedelta(days=n))}"
        if unit == "week":
            return f"in the week of {_day(today - timedelta(days=today.weekday()) + timedelta(weeks=n))}"
        if unit == "month":
            return f"in {_month(_shift_months(today, -n))}"
        return f"in {today.year + n}"
    return None


def with_dates(text: str, *, when: datetime) -> str:
    """``text`` with each relative time phrase replaced by the date it names."""
    out, last = [], 0
    for dated in statement_dates(text, when=when):
        prefix = text[last:dated.start]
        # "on yesterday" does not occur, but "since last week" does: keep the preposition's own.
        rendered = dated.rendered
        if re.search(r"\b(?:since|until|till|from|by|before|after|during|for)\s*$", prefix, re.I):
            rendered = rendered.split(" ", 1)[1]
        out += [prefix, rendered]
        last = dated.end
    out.append(text[last:])
    return "".join(out)
