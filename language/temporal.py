"""Time in English, read without a model: the period a question names ("in June", "last summer",
"the week before 9 June 2023", "two weeks ago") against the recall's ``now`` in the end-user's
calendar; whether a question asks for a time ("When did …?", "How long …?"); and the dates a
statement names against the day it was said ("last Saturday" said on 8 May 2023: 6 May 2023).
A relation to another event ("two days after the party") names no date and is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

# What Python's calendar (years 1-9999) cannot hold raises one of these in date arithmetic, as does
# a number too long to read: a phrase naming such a date is dropped, never an error.
OFF_CALENDAR = (OverflowError, ValueError)

MONTHS = {m: n for n, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), start=1)}
_MONTH = r"(?P<month>january|february|march|april|may|june|july|august|september|october|november|december)"
_ISO = re.compile(r"\b(?P<year>(?:19|20)\d{2})-(?P<mon>\d{2})-(?P<day>\d{2})\b")
_DAY_FIRST = re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})\b", re.I)
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b", re.I)
# A day and month without a year ("on 20 May", "May 20th").
_DAY_MONTH = re.compile(rf"\b(?:(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}"
                        rf"|{_MONTH.replace('month', 'month2')}\s+(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?)\b(?!,?\s*\d{{4}})",
                        re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}(?:,?\s+(?P<year>\d{{4}}))?\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since|from)\s+(?P<year>(?:19|20)\d{2})\b", re.I)
_RELATIVE = re.compile(r"\b(?P<which>last|this|past)\s+(?P<unit>week|weekend|month|year)\b", re.I)
_AGO = re.compile(r"\b(?P<n>\d+|a|an|one|two|three|four|five|six)\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I)
_DAY_WORD = re.compile(r"\b(?P<word>yesterday|today)\b", re.I)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10}
# "May" is also a verb ("May I ...", "she may have"): as a month it needs a year or a preposition.
_MAY_AS_MONTH = re.compile(r"\b(?:in|during|of|since|early|late|mid|on|by|until|from)\s+may\b|\bmay,?\s+\d{4}\b"
                           r"|\bmay\s+\d{1,2}(?:st|nd|rd|th)?\b|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?may\b", re.I)
# Seasons of the northern hemisphere's meteorological calendar: (first month, months).
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
# A season is a time only after "in", "during", "the" or last/this/next, or before a year ("summer"
# alone is a topic; "fall" is also a verb).
_SEASON = re.compile(
    r"\b(?:(?P<rel>last|this|next|past)\s+|(?P<art>the|in|during|over)\s+(?:the\s+)?)?"
    r"(?P<season>summer|winter|spring|fall|autumn)(?:\s+(?:of\s+)?(?P<year>(?:19|20)\d{2}))?\b", re.I)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_ABBREVIATIONS = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4,
                          "sat": 5, "sun": 6}
_LAST_WEEKDAY = re.compile(r"\blast\s+(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)
# A period named relative to a date the question names ("the week before 9 June 2023", "two days
# after 20 May"): read in the words just before that date.
_RELATION = re.compile(r"(?:\bthe\s+(?P<unit>day|week|weekend|month|year)|\b(?P<n>\d+|a|an|one|two|three|four|"
                       r"five|six|seven|eight|nine|ten|a\s+couple\s+of|a\s+few)\s+(?P<units>days?|weeks?|months?))"
                       r"\s+(?P<dir>before|after)\s*$|\b(?P<bare>before|after|prior\s+to)\s*$", re.I)
_PART = re.compile(r"\b(?P<part>early|mid|late|the\s+(?:start|beginning|middle|end)\s+of)\s*-?\s*$", re.I)


@dataclass(frozen=True)
class TimeWindow:
    """The period a question names: ``start`` to ``end`` (exclusive), days of the end-user's
    calendar. ``yearly``: a month, season or day named without a year, i.e. that part of any year
    (``start`` is its latest occurrence that has begun by the recall's ``now``)."""

    start: datetime
    end: datetime  # exclusive
    phrase: str
    yearly: bool = False

    def spans(self, *, around: int | None = None, back: int = 1) -> list[tuple[datetime, datetime]]:
        """The window's periods: itself, or for a yearly window its occurrences from ``back``
        years before ``around`` (a year; default the window's own) to the year after it."""
        if not self.yearly:
            return [(self.start, self.end)]
        year = self.start.year if around is None else around
        return [span for y in range(year - back, year + 2) if (span := self._in_year(y)) is not None]

    def _in_year(self, year: int) -> tuple[datetime, datetime] | None:
        shift = year - self.start.year
        try:
            return self.start.replace(year=year), self.end.replace(year=self.end.year + shift)
        except ValueError:  # 29 February in a year without one
            return None

    def contains(self, when: datetime, *, grace: timedelta) -> bool:
        """Whether ``when`` falls in the window, or up to ``grace`` after its end."""
        return any(start <= when < moment_plus(end, grace) for start, end in self.spans(around=when.year))

    def overlaps(self, dates: Iterable[tuple[date, date]]) -> bool:
        """Whether one of ``dates`` (calendar days, first inclusive, last exclusive) names a day of
        the window: it meets the window and lies within the window's length (or a week) of it
        ("last week" names a day of 20 May; "last year" names no day of a June)."""
        for first, last in dates:
            for start, end, around in _near(_days(self.spans(around=first.year))):
                if first < end and start < last and around[0] <= first and last <= around[1]:
                    return True
        return False

    def ranges(self, *, back: int = 1) -> list[tuple[date, date]]:
        """``spans`` as calendar days (first inclusive, last exclusive)."""
        return _days(self.spans(back=back))


def moment_plus(moment: date, delta: timedelta) -> date:
    """``moment + delta`` (a date or datetime), held at the calendar's first or last instant
    rather than past it: a window at the calendar's edge is compared, never an error."""
    try:
        return moment + delta
    except OverflowError:
        later = delta > timedelta(0)
        if isinstance(moment, datetime):
            return (datetime.max if later else datetime.min).replace(tzinfo=moment.tzinfo)
        return date.max if later else date.min


def _days(spans: list[tuple[datetime, datetime]]) -> list[tuple[date, date]]:
    """Spans of time as the calendar days they touch (last exclusive)."""
    return [(start.date(), moment_plus((end - timedelta(microseconds=1)).date(), timedelta(days=1))) for start, end in spans]


def _near(days: list[tuple[date, date]]) -> list[tuple[date, date, tuple[date, date]]]:
    """Each span of days with the days around it that a period naming one of its days may cover:
    the span widened by its own length (at least a week) on either side."""
    out = []
    for first, last in days:
        margin = max(last - first, timedelta(days=7))
        out.append((first, last, (moment_plus(first, -margin), moment_plus(last, margin))))
    return out


def named_day_ranges(window: TimeWindow, *, back: int = 1) -> list[tuple[tuple[date, date], tuple[date, date]]]:
    """For each of ``window``'s spans (``TimeWindow.ranges``), the span and the days around it:
    what a period named in a memory must meet and lie within to name a day of the window
    (``TimeWindow.overlaps``), for a search to ask the same."""
    return [((first, last), around) for first, last, around in _near(window.ranges(back=back))]


def _month_window(year: int, month: int, tz: tzinfo) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=tz)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=tz)
    return start, end


def _shift_months(when: datetime, months: int) -> datetime:
    index = when.year * 12 + when.month - 1 - months
    return when.replace(year=index // 12, month=index % 12 + 1, day=1)


def _latest_year(month: int, day: int, now: datetime) -> int:
    """The year of the latest (month, day) that has begun by ``now``."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _season_window(season: str, year: int, tz: tzinfo) -> tuple[datetime, datetime]:
    first = _SEASONS[season]
    start = datetime(year, first, 1, tzinfo=tz)
    return start, _shift_months(start, -3)


def _season_of(season: str, rel: str | None, today: datetime, tz: tzinfo) -> tuple[datetime, datetime]:
    """The season "last/this/next <season>" names, or without ``rel`` its latest one that has
    begun by ``today``. A winter belongs to the year it starts in."""
    candidates = [_season_window(season, y, tz) for y in range(today.year - 2, today.year + 2)]
    if rel in ("last", "past"):
        return [c for c in candidates if c[1] <= today][-1]
    if rel == "next":
        return [c for c in candidates if c[0] > today][0]
    if rel == "this":
        current = [c for c in candidates if c[0] <= today < c[1]]
        return current[0] if current else [c for c in candidates if c[0] > today][0]
    return [c for c in candidates if c[0] <= today][-1]


Found = tuple[re.Match[str], TimeWindow]


def _on_date(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    """A full date: "2023-05-08", "8 May 2023", "May 8, 2023"."""
    for pattern in (_ISO, _DAY_FIRST, _MONTH_FIRST):
        if m := pattern.search(query):
            try:
                month = int(m["mon"]) if pattern is _ISO else MONTHS[m["month"].lower()]
                start = datetime(int(m["year"]), month, int(m["day"]), tzinfo=tz)
            except ValueError:  # "31 February": no such day
                continue
            return m, TimeWindow(start=start, end=start + timedelta(days=1), phrase=m.group())
    return None


def _on_day_of_month(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    """A day and month without a year ("on 20 May"): that day of any year."""
    for m in _DAY_MONTH.finditer(query):
        month = MONTHS[(m["month"] or m["month2"]).lower()]
        day = int(m["day"] or m["day2"])
        try:
            start = datetime(_latest_year(month, day, now), month, day, tzinfo=tz)
        except ValueError:
            continue
        return m, TimeWindow(start=start, end=start + timedelta(days=1), phrase=m.group(), yearly=True)
    return None


def _in_month(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    """A month, with or without its year ("in June", "December 2022")."""
    for m in _MONTH_YEAR.finditer(query):
        month = MONTHS[m["month"].lower()]
        if month == 5 and not _MAY_AS_MONTH.search(query):
            continue
        year = int(m["year"]) if m["year"] else _latest_year(month, 1, now)
        start, end = _month_window(year, month, tz)
        return m, TimeWindow(start=start, end=end, phrase=m.group(), yearly=not m["year"])
    return None


def _in_season(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    """A season after "in", "during", "the" or last/this/next, or before a year."""
    for m in _SEASON.finditer(query):
        season, rel, year = m["season"].lower(), (m["rel"] or "").lower() or None, m["year"]
        if not (rel or m["art"] or year):
            continue
        if year:
            start, end = _season_window(season, int(year), tz)
        else:
            start, end = _season_of(season, rel if rel != "past" else "last", today, tz)
        return m, TimeWindow(start=start, end=end, phrase=m.group().strip(), yearly=not (rel or year))
    return None


def _in_named_year(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    if m := _YEAR.search(query):
        year = int(m["year"])
        return m, TimeWindow(start=datetime(year, 1, 1, tzinfo=tz), end=datetime(year + 1, 1, 1, tzinfo=tz),
                             phrase=m.group())
    return None


def _on_day_word(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    if m := _DAY_WORD.search(query):
        start = today - timedelta(days=1 if m["word"].lower() == "yesterday" else 0)
        return m, TimeWindow(start=start, end=start + timedelta(days=1), phrase=m.group())
    return None


def _on_last_weekday(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    if m := _LAST_WEEKDAY.search(query):
        start = today - timedelta(days=(today.weekday() - _WEEKDAYS.index(m["weekday"].lower())) % 7 or 7)
        return m, TimeWindow(start=start, end=start + timedelta(days=1), phrase=m.group())
    return None


def _in_relative(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    """ "last/this/past week|weekend|month|year"."""
    if not (m := _RELATIVE.search(query)):
        return None
    which, unit = m["which"].lower(), m["unit"].lower()
    back = 0 if which == "this" else 1
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7) if back else \
            today - timedelta(days=today.weekday()) + timedelta(days=5)
        return m, TimeWindow(start=saturday, end=saturday + timedelta(days=2), phrase=m.group())
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
    return m, TimeWindow(start=start, end=end, phrase=m.group())


def _ago(query: str, now: datetime, today: datetime, tz: tzinfo) -> Found | None:
    """ "N days/weeks/months/years ago"."""
    if not (m := _AGO.search(query)):
        return None
    n = _NUMBERS.get(m["n"].lower()) or int(m["n"])
    unit = m["unit"].lower()
    if unit in ("day", "week"):
        days = n * (7 if unit == "week" else 1)
        slack = 1 if unit == "day" else 4  # "two weeks ago": about then, give or take half a week
        centre = today - timedelta(days=days)
        return m, TimeWindow(start=centre - timedelta(days=slack), end=centre + timedelta(days=slack + 1),
                             phrase=m.group())
    if unit == "month":
        start = _shift_months(today, n)
        return m, TimeWindow(start=start, end=_shift_months(today, n - 1), phrase=m.group())
    return m, TimeWindow(start=datetime(today.year - n, 1, 1, tzinfo=tz),
                         end=datetime(today.year - n + 1, 1, 1, tzinfo=tz), phrase=m.group())


# Most specific kind first.
_ANCHORS = (_on_date, _on_day_of_month, _in_month, _in_season, _in_named_year, _on_day_word, _on_last_weekday,
            _in_relative, _ago)


def _anchor(query: str, now: datetime, tz: tzinfo) -> Found | None:
    """The first date expression of ``query``, most specific kind first, with its window. A kind
    whose date the calendar cannot hold ("5000 years ago") is not read; the next kind may be."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for read in _ANCHORS:
        try:
            found = read(query, now, today, tz)
        except OFF_CALENDAR:
            continue
        if found is not None:
            return found
    return None


def _related(window: TimeWindow, relation: re.Match[str], phrase: str) -> TimeWindow:
    """The period ``relation`` names relative to ``window``: "the day/week/weekend/month/year
    before|after" it (the period next to it), "N days/weeks/months before|after" it (the day, or
    about the week or month, that far from it) or a bare "before"/"after" (read as within a month)."""
    before = (relation["dir"] or relation["bare"] or "").lower().startswith(("before", "prior"))
    day = timedelta(days=1)

    def made(start: datetime, end: datetime) -> TimeWindow:
        return TimeWindow(start=start, end=end, phrase=phrase, yearly=window.yearly)

    if relation["bare"] or (relation["unit"] or "").lower() in ("month", "year", "week", "day"):
        length = day * {"day": 1, "week": 7, "month": 31, "year": 365}.get((relation["unit"] or "month").lower(), 31)
        return made(window.start - length, window.start) if before else made(window.end, window.end + length)
    if relation["unit"]:  # the weekend before or after
        if before:
            saturday = window.start - day * ((window.start.weekday() - 5) % 7 or 7)
            if saturday + 2 * day > window.start:
                saturday -= 7 * day
        else:
            saturday = window.end + day * ((5 - window.end.weekday()) % 7)
        return made(saturday, saturday + 2 * day)
    raw = " ".join(relation["n"].lower().split())
    n = {"a couple of": 2, "a few": 3}.get(raw) or _NUMBERS.get(raw) or int(raw)
    unit = relation["units"].lower().rstrip("s")
    step, slack = {"day": (1, 0), "week": (7, 3), "month": (30, 15)}[unit]
    centre = window.start - day * (n * step) if before else window.end - day + day * (n * step)
    return made(centre - day * slack, centre + day * (slack + 1))


def _part(window: TimeWindow, part: str, phrase: str) -> TimeWindow:
    """The "early", "mid" or "late" third of a month's (or a longer) window."""
    part = " ".join(part.lower().split())
    index = 0 if part in ("early", "the start of", "the beginning of") else 1 if part in ("mid", "the middle of") else 2
    days = (window.end - window.start).days
    start = window.start + timedelta(days=days * index // 3)
    end = window.end if index == 2 else window.start + timedelta(days=days * (index + 1) // 3)
    return TimeWindow(start=start, end=end, phrase=phrase, yearly=window.yearly)


def query_time_window(query: str, *, now: datetime, tz: tzinfo | None = None) -> TimeWindow | None:
    """The period ``query`` names (the first recognised expression, most specific kind first, and
    the relation or part of it said just before: "the week before", "early"), or None. ``now``
    anchors relative expressions; a month, season or day named without a year is that part of any
    year (``TimeWindow.yearly``). The window's days are ``tz``'s (default UTC). "between A and B"
    spans both."""
    tz = tz or UTC
    try:
        return _window(query, now=(now if now.tzinfo else now.replace(tzinfo=UTC)).astimezone(tz), tz=tz)
    except OFF_CALENDAR:  # the period, or the moment it is read at, lies outside the calendar
        return None


def _window(query: str, *, now: datetime, tz: tzinfo) -> TimeWindow | None:
    found = _anchor(query, now, tz)
    if found is None:
        return None
    m, window = found
    before = query[:m.start()]
    if (between := re.search(r"\bbetween\s+$", before, re.I)) and (rest := re.match(r"\s*(?:and|to)\s+", query[m.end():])):
        second = _anchor(query[m.end() + rest.end():], now, tz)
        if second is not None and second[1].end > window.start:
            return TimeWindow(start=window.start, end=second[1].end,
                              phrase=query[between.start(): m.end() + rest.end() + second[0].end()].strip(),
                              yearly=window.yearly and second[1].yearly)
    if relation := _RELATION.search(before):
        return _related(window, relation, f"{relation.group().strip()} {window.phrase}")
    if (part := _PART.search(before)) and window.end - window.start >= timedelta(days=28):
        return _part(window, part["part"], f"{part.group().strip()} {window.phrase}")
    return window


# ---------------------------------------------------------------- questions that ask for a time

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# A question opening with "when" (not "when" joining two clauses: "Who helps her when she is down?"),
# one asking which time, day, month or year, or how long, how soon, how many days or years.
_ASKS_WHEN = re.compile(r"^\W*(?:(?:and|but|so|then|also|ok|okay)\W+)?(?:since\s+|until\s+|till\s+|from\s+)?when\b",
                        re.I)
_ASKS_WHICH_TIME = re.compile(
    r"\b(?:what|which)\s+(?:exact\s+|specific\s+|particular\s+)?(?:time|date|dates|day|days|week|weekend|month|"
    r"months|year|years|season|decade)\b"
    r"|\bhow\s+(?:long|soon|recently)\b|\bhow\s+many\s+(?:days|weeks|months|years|hours)\b", re.I)


def query_asks_time(query: str) -> bool:
    """Whether ``query`` asks for a time or a duration: a question opening with "when" ("When did
    Caroline go to the support group?", "Since when …"), or asking which day, month or year, how
    long, how soon or how many days or years. Its answer lies in a memory that states a time
    (``states_time``) or in an event dated by when it was told."""
    for sentence in _SENTENCE.split(query.strip()):
        if _ASKS_WHEN.search(sentence) or _ASKS_WHICH_TIME.search(sentence):
            return True
    return False


# ---------------------------------------------------------------- dates a statement names

# Weekdays, also abbreviated when capitalised ("last Fri"; "last sat" is a verb more often).
_WEEKDAY_NAMES = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|(?-i:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)"
_COUNT = r"(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of)"
_STATEMENT_DATES = re.compile(
    r"\b(?:(?P<dayword>yesterday|today|tonight|tomorrow|last night|this (?:morning|afternoon|evening))"
    r"|(?P<rel>last|this|next|past) (?P<unit>week|weekend|month|year|summer|winter|spring|fall|autumn|"
    rf"{_WEEKDAY_NAMES})"
    rf"|{_COUNT} (?P<agounit>day|weekend|week|month|year)s? ago"
    rf"|in {_COUNT.replace('?P<n>', '?P<inn>')} (?P<inunit>day|week|month|year)s"
    r")\b", re.I)
_FEW = {"a couple of": 2}  # "a few" names no number: left as said


@dataclass(frozen=True)
class DatedPhrase:
    """A time phrase of a statement and the date it names, written out ("yesterday" said on
    8 May 2023 → "on 7 May 2023"), and as calendar days (``first`` inclusive, ``last`` exclusive)."""

    start: int
    end: int
    phrase: str
    rendered: str
    first: date | None = None
    last: date | None = None


def _day(d: datetime) -> str:
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _month(d: datetime) -> str:
    return f"{d.strftime('%B')} {d.year}"


def _count(raw: str) -> int:
    raw = raw.lower()
    return _FEW.get(raw) or _NUMBERS.get(raw) or int(raw)


def _weekday_index(raw: str) -> int | None:
    raw = raw.lower().rstrip(".")
    if raw in _WEEKDAYS:
        return _WEEKDAYS.index(raw)
    return _WEEKDAY_ABBREVIATIONS.get(raw)


def statement_dates(text: str, *, when: datetime) -> list[DatedPhrase]:
    """The relative time phrases of ``text`` (a statement made at ``when``) with the dates they
    name, in text order. Only phrases whose date follows from ``when`` alone: "yesterday",
    "last/this/next week|weekend|month|year|<weekday>|<season>" (weekdays also abbreviated: "last
    Fri"), "N days ago", "in N weeks"; "recently", "a few weeks ago" or "the day before (something)"
    name no date and are left alone. Calendar arithmetic only: a week starts on Monday, "last
    Friday" is the latest Friday before the day it was said."""
    today = when.replace(hour=0, minute=0, second=0, microsecond=0)
    out = []
    for m in _STATEMENT_DATES.finditer(text):
        try:
            found = _render(m, today)
        except OFF_CALENDAR:  # "4500 years ago" said in 2026: before the calendar's first year
            continue
        if found:
            rendered, first, last = found
            out.append(DatedPhrase(start=m.start(), end=m.end(), phrase=m.group(), rendered=rendered,
                                   first=first.date(), last=last.date()))
    return out


def _render(m: re.Match[str], today: datetime) -> tuple[str, datetime, datetime] | None:
    """The phrase written out, and the days it names (first inclusive, last exclusive)."""
    one = timedelta(days=1)
    if word := m["dayword"]:
        word = word.lower()
        offset = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word, 0)
        day = today + timedelta(days=offset)
        return f"on {_day(day)}", day, day + one
    if m["rel"]:
        rel, unit = m["rel"].lower(), m["unit"].lower()
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[rel]
        if (target := _weekday_index(unit)) is not None:
            if rel == "this":
                return None  # "this Friday" may be either side of today
            delta = (today.weekday() - target) % 7 or 7
            ahead = (target - today.weekday()) % 7 or 7
            day = today - timedelta(days=delta) if step < 0 else today + timedelta(days=ahead)
            return f"on {_WEEKDAYS[target].capitalize()} {_day(day)}", day, day + one
        if unit == "week":
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            return f"in the week of {_day(monday)}", monday, monday + timedelta(days=7)
        if unit == "weekend":
            saturday = today + timedelta(days=(5 - today.weekday()) % 7)
            if step < 0:
                saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
            elif step > 0 and saturday - today < timedelta(days=2):
                saturday += timedelta(weeks=1)
            return f"on the weekend of {_day(saturday)}", saturday, saturday + timedelta(days=2)
        if unit == "month":
            first = _shift_months(today, -step)
            return f"in {_month(first)}", first, _shift_months(first, -1)
        if unit == "year":
            start = today.replace(year=today.year + step, month=1, day=1)
            return f"in {today.year + step}", start, start.replace(year=start.year + 1)
        first_month = _SEASONS[unit]
        year = today.year + step
        if unit == "winter" and step >= 0 and today.month <= 2:
            year -= 1
        start = today.replace(year=year, month=first_month, day=1)
        end = _shift_months(start, -3)
        rendered = f"in the {unit} of {year}" if first_month != 12 else f"in the winter of {year}-{str(year + 1)[2:]}"
        return rendered, start, end
    if m["agounit"]:
        n, unit = _count(m["n"]), m["agounit"].lower()
        if unit == "day":
            day = today - timedelta(days=n)
            return f"on {_day(day)}", day, day + one
        if unit == "week":
            monday = today - timedelta(days=today.weekday(), weeks=n)
            return f"in the week of {_day(monday)}", monday, monday + timedelta(days=7)
        if unit == "weekend":  # "two weekends ago": the weekend before last
            saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7) - timedelta(weeks=n - 1)
            return f"on the weekend of {_day(saturday)}", saturday, saturday + timedelta(days=2)
        if unit == "month":
            first = _shift_months(today, n)
            return f"in {_month(first)}", first, _shift_months(first, -1)
        start = today.replace(year=today.year - n, month=1, day=1)
        return f"in {today.year - n}", start, start.replace(year=start.year + 1)
    if m["inunit"]:
        n, unit = _count(m["inn"]), m["inunit"].lower()
        if unit == "day":
            day = today + timedelta(days=n)
            return f"on {_day(day)}", day, day + one
        if unit == "week":
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=n)
            return f"in the week of {_day(monday)}", monday, monday + timedelta(days=7)
        if unit == "month":
            first = _shift_months(today, -n)
            return f"in {_month(first)}", first, _shift_months(first, -1)
        start = today.replace(year=today.year + n, month=1, day=1)
        return f"in {today.year + n}", start, start.replace(year=start.year + 1)
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


# ---------------------------------------------------------------- the dates a memory is about

# Dates a statement names outright ("on 20 May", "in June 2023", "in 2022"); a month or day
# without a year is its occurrence nearest to the day it was said.
_STATED_DAY = re.compile(
    rf"\b(?:(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}|{_MONTH.replace('month', 'month2')}\s+"
    rf"(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?\b)(?:,?\s+(?P<year>(?:19|20)\d{{2}}))?", re.I)
_STATED_MONTH = re.compile(rf"\b(?:in|during|of|since|until|by|early|late|mid|from|this|last|next)\s+(?:-\s*)?"
                           rf"{_MONTH}(?:,?\s+(?P<year>(?:19|20)\d{{2}}))?\b|\b{_MONTH.replace('month', 'month2')},?\s+"
                           r"(?P<year2>(?:19|20)\d{2})\b", re.I)
_STATED_YEAR = re.compile(r"\b(?:in|during|since|from|of|until|by|back in)\s+(?P<year>(?:19|20)\d{2})\b", re.I)
# Vague but dated by the day it was said ("a few weeks ago": within about two months before).
_VAGUE_AGO = re.compile(r"\b(?:a few|several|some)\s+(?P<unit>day|week|month|year)s?\s+"
                        r"(?:ago|back)\b", re.I)
_VAGUE_SPAN = {"day": (7, 1), "week": (49, 7), "month": (200, 28), "year": (6 * 365, 365)}


def _nearest(month: int, day: int, when: datetime) -> datetime | None:
    """The (month, day) nearest to ``when``: its year's, or the one before or after."""
    options = []
    for year in (when.year - 1, when.year, when.year + 1):
        try:
            options.append(datetime(year, month, day, tzinfo=when.tzinfo))
        except ValueError:
            continue
    return min(options, key=lambda d: abs(d - when)) if options else None


def _iso_day(m: re.Match[str], today: datetime) -> tuple[date, date]:
    day = date(int(m["year"]), int(m["mon"]), int(m["day"]))
    return day, day + timedelta(days=1)


def _stated_day(m: re.Match[str], today: datetime) -> tuple[date, date] | None:
    month = MONTHS[(m["month"] or m["month2"]).lower()]
    number = int(m["day"] or m["day2"])
    if month == 5 and not _MAY_AS_MONTH.search(m.group()):
        return None
    day = datetime(int(m["year"]), month, number) if m["year"] else _nearest(month, number, today)
    return None if day is None else (day.date(), day.date() + timedelta(days=1))


def _stated_month(m: re.Match[str], today: datetime) -> tuple[date, date] | None:
    month = MONTHS[(m["month"] or m["month2"]).lower()]
    year = m["year"] or m["year2"]
    first = datetime(int(year), month, 1) if year else _nearest(month, 1, today.replace(day=1))
    return None if first is None else (first.date(), _shift_months(first, -1).date())


def _stated_year(m: re.Match[str], today: datetime) -> tuple[date, date]:
    year = int(m["year"])
    return date(year, 1, 1), date(year + 1, 1, 1)


def _vague_ago(m: re.Match[str], today: datetime) -> tuple[date, date]:
    far, near = _VAGUE_SPAN[m["unit"].lower()]
    return (today - timedelta(days=far)).date(), (today - timedelta(days=near) + timedelta(days=1)).date()


# The dates a statement names outright, and vague distances, each read from one match.
_STATED = ((_ISO, _iso_day), (_STATED_DAY, _stated_day), (_STATED_MONTH, _stated_month),
           (_STATED_YEAR, _stated_year), (_VAGUE_AGO, _vague_ago))


def event_dates(text: str, *, when: datetime) -> list[tuple[date, date]]:
    """The calendar days ``text`` (said at ``when``) says something happened or will happen on,
    each as (first, last exclusive), in text order without repeats: its relative phrases
    (``statement_dates``), the dates it names outright ("on 20 May", "in June 2023", "in 2022"; a
    month or day without a year nearest to ``when``) and vague distances ("a few weeks ago")."""
    today = when.replace(hour=0, minute=0, second=0, microsecond=0)
    found: list[tuple[int, date, date]] = []
    for dated in statement_dates(text, when=when):
        if dated.first is not None and dated.last is not None:
            found.append((dated.start, dated.first, dated.last))
    for pattern, read in _STATED:
        for m in pattern.finditer(text):
            try:
                days = read(m, today)
            except OFF_CALENDAR:  # "31 February", or a day the calendar cannot hold
                continue
            if days is not None:
                found.append((m.start(), *days))
    return list(dict.fromkeys((first, last) for _, first, last in sorted(found)))


# Statements that tell when without naming a date: a duration ("for five years", "seven years
# now", "since I was 17"), a vague distance ("a while ago", "the other day") or an event told as
# just past ("I just signed up", "recently"), which its telling dates.
_TELLS_TIME = re.compile(
    r"\b(?:(?:for|in|over)\s+(?:the\s+)?(?:past\s+|last\s+|about\s+|almost\s+|nearly\s+|over\s+)?"
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few|several|many)\s+"
    r"(?:days?|weeks?|months?|years?|decades?)"
    r"|(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|several)\s+(?:days?|weeks?|months?|years?)\s+"
    r"(?:now|already|so far)"
    r"|since\s+(?:I|we|he|she|they)\s+was|since\s+(?:I|we|he|she|they)\s+were|since\s+(?:childhood|high school|college)"
    r"|when\s+(?:I|we|he|she|they)\s+(?:was|were)\s+(?:\d+|a kid|a child|little|young|younger)"
    r"|a while (?:ago|back)|the other day|earlier (?:today|this (?:week|month|year))|recently|lately"
    r"|just\s+(?!(?:wanted|needed|loved|liked|hoped|wondered|thought|felt|meant|figured|realized|realised|"
    r"seemed|used)\b)(?:[a-z]+ed|got|had|went|came|took|made|began|begun|met|left|lost|sold|won|ran|read|wrote|"
    r"found|bought|brought|built|did|gave|heard|held|paid|saw|sent|spent|taught|told)"
    r"|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?:over|on)\s+the\s+weekend|this\s+past\s+(?:week|weekend|month|year)"
    r")\b", re.I)


def states_time(text: str, *, when: datetime) -> bool:
    """Whether ``text`` (said at ``when``) tells when something happened or for how long: a date
    it names (``event_dates``), a duration, a vague distance or an event told as just past."""
    return bool(_TELLS_TIME.search(text)) or bool(event_dates(text, when=when))


def date_ranges(dates: Iterable[tuple[date, date]]) -> list[dict[str, str]]:
    """Calendar days as stored (Elasticsearch ``date_range`` values: ``gte`` inclusive, ``lt`` exclusive)."""
    return [{"gte": first.isoformat(), "lt": last.isoformat()} for first, last in dates]


def stored_ranges(values: Iterable[dict[str, Any]] | dict[str, Any] | None) -> Iterator[tuple[date, date]]:
    """``date_ranges`` read back from a stored memory."""
    if isinstance(values, dict):
        values = [values]
    for value in values or ():
        try:
            yield date.fromisoformat(str(value["gte"])[:10]), date.fromisoformat(str(value["lt"])[:10])
        except (KeyError, TypeError, ValueError):
            continue
