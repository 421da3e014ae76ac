"""Hypothesis strategies for what users send: English time phrases as people write them (with
numbers from 0 to 10^15 and dates of any year), moments anywhere in the calendar, long numbers
and deeply nested JSON. Shared by the properties of the pure readers and the fuzzes of the API."""

from __future__ import annotations

from datetime import datetime
from string import ascii_letters

from hypothesis import strategies as st

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SEASONS = ("spring", "summer", "fall", "autumn", "winter")
UNITS = ("day", "week", "weekend", "month", "year", "decade", "century", "hour")
NUMBER_WORDS = ("a", "an", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "a couple of", "a few", "several")

# Whole numbers from 0 to 10^15, with the small ones people say most and those around the
# calendar's own edges (Python's years 1-9999, 999,999,999 days) drawn often.
numbers = st.one_of(st.integers(0, 12), st.integers(0, 10**15), st.sampled_from(
    [0, 1, 99, 100, 1000, 4500, 7977, 7978, 9999, 10000, 365 * 8000, 999_999_999, 10**9, 10**15]))
years = st.one_of(st.integers(0, 99999), st.sampled_from([0, 1, 2, 1899, 1900, 1999, 2023, 2024, 9998, 9999, 10000]))
day_numbers = st.integers(0, 40)


def _case(word: str) -> st.SearchStrategy[str]:
    return st.sampled_from([word, word.lower(), word.upper(), word[:3]])


months = st.sampled_from(MONTHS).flatmap(_case)
weekdays = st.sampled_from(WEEKDAYS).flatmap(_case)
count = st.one_of(numbers.map(str), st.sampled_from(NUMBER_WORDS))
amount = st.builds(lambda n, unit, s: f"{n} {unit}{s}", count, st.sampled_from(UNITS), st.sampled_from(["", "s"]))
dates = st.one_of(
    st.builds(lambda d, m, y: f"{d} {m} {y}", day_numbers, months, years),
    st.builds(lambda d, m, y: f"{d}th of {m}, {y}", day_numbers, months, years),
    st.builds(lambda m, d, y: f"{m} {d}, {y}", months, day_numbers, years),
    st.builds(lambda y, m, d: f"{y:04d}-{m:02d}-{d:02d}", years, st.integers(0, 13), day_numbers),
    st.builds(lambda m, y: f"{m} {y}", months, years),
    st.builds(lambda d, m: f"{d} {m}", day_numbers, months),
    st.builds(lambda m, d: f"{m} {d}th", months, day_numbers),
    st.builds(lambda y: f"in {y}", years),
    months,
)
time_phrases = st.one_of(
    st.builds(lambda a: f"{a} ago", amount),
    st.builds(lambda a: f"{a} back", amount),
    st.builds(lambda a: f"in {a}", amount),
    st.builds(lambda a, rel, d: f"{a} {rel} {d}", amount, st.sampled_from(["from", "before", "after"]), dates),
    st.builds(lambda u, rel, d: f"the {u} {rel} {d}", st.sampled_from(UNITS), st.sampled_from(["before", "after"]),
              dates),
    st.builds(lambda p, d: f"{p} {d}", st.sampled_from(["early", "mid", "late", "the end of", "the start of"]), dates),
    st.builds(lambda a, b: f"between {a} and {b}", dates, dates),
    st.builds(lambda rel, s, y: f"{rel}{s}{y}", st.sampled_from(["last ", "this ", "next ", "past ", "in the ",
                                                                  "during ", ""]),
              st.sampled_from(SEASONS), st.one_of(st.just(""), years.map(lambda y: f" of {y}"),
                                                  years.map(lambda y: f" {y}"))),
    st.builds(lambda rel, w: f"{rel} {w}", st.sampled_from(["last", "this", "next", "past", "on"]), weekdays),
    st.builds(lambda rel, u: f"{rel} {u}", st.sampled_from(["last", "this", "next", "past", "this past"]),
              st.sampled_from(UNITS)),
    st.sampled_from(["yesterday", "today", "tonight", "tomorrow", "last night", "this morning", "a while ago",
                     "recently", "the other day", "a few weeks ago", "several years back"]),
    dates,
)
_fillers = st.sampled_from(["it", "was", "that", "we", "met", "and", "the", "castle", "built", "nobody",
                            "will", "remember", "this", ",", ".", "?", "when", "how long", "what happened",
                            "for", "since"])
sentences = st.one_of(
    st.builds(lambda p: f"The castle near us was built {p}.", time_phrases),
    st.builds(lambda p: f"{p[:1].upper()}{p[1:]} nobody will remember this.", time_phrases),
    st.builds(lambda p: f"What happened {p}?", time_phrases),
    st.builds(lambda p: f"When did we meet? It was {p}", time_phrases),
    st.lists(st.one_of(time_phrases, _fillers), min_size=1, max_size=6).map(" ".join),
    st.text(max_size=60),
)
# Any moment of the calendar, naive or in any time zone (an import's occurred_at, a recall's now).
moments = st.datetimes(min_value=datetime.min, max_value=datetime.max, timezones=st.none() | st.timezones())

# Days and moments written as ISO 8601 with any numbers in their places: "2024-02-30",
# "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00".
day_texts = st.builds(lambda y, m, d: f"{y:04d}-{m:02d}-{d:02d}",
                      st.integers(0, 9999) | st.sampled_from([0, 1, 2024, 9999]), st.integers(0, 13), day_numbers)
moment_texts = st.builds(lambda day, h, sign, offset: f"{day}T{h:02d}:59:59{sign}{offset:02d}:00", day_texts,
                         st.integers(0, 24), st.sampled_from("+-"), st.integers(0, 24)) | st.sampled_from(
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])

# Strings as fuzzers should send them: long runs of digits (which a parser may read as numbers), and
# text that is JSON nested far deeper than anyone writes.
long_numbers = st.integers(0, 10**60).map(str) | st.integers(20, 5000).map(lambda n: "9" * n)
# The same as JSON numbers: within the 4,300 digits Python writes and reads.
json_numbers = st.integers(-(10**60), 10**60) | st.integers(20, 4000).map(lambda n: int("9" * n))


def nested_json(depth: int, *, leaf: object = 1) -> object:
    """``[[[...leaf...]]]`` (alternating lists and objects) ``depth`` levels deep, built without recursion."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


def nested_json_text(depth: int) -> str:
    """The JSON text of ``nested_json(depth)``, written without the recursion ``json.dumps`` would need."""
    opens = "".join('{"a":' if level % 2 == 0 else "[" for level in reversed(range(depth)))
    closes = "".join("}" if level % 2 == 0 else "]" for level in range(depth))
    return opens + "1" + closes


# Text as a client may send it: any code point, lone surrogates (a JSON "\ud800" escape) and NUL included.
any_text = st.text(st.characters(exclude_categories=()), max_size=80)
texts = st.one_of(st.text(max_size=80), any_text, long_numbers, sentences, day_texts, moment_texts, st.sampled_from(
    ["", " ", "\x00", "\ud800", "é" * 300, "x" * 200_001, "2024-02-30", "0001-01-01T00:00:00+01:00",
     "9999-12-31T23:59:59-01:00", "NaN", "-0", "1e999", "../..", "Europe/../../etc/passwd"]))
# What the language library meets everywhere: every unicode category, right-to-left marks and
# scripts, combining marks, zero-width characters, lone surrogates, case foldings that change a
# word's length, very long tokens, and sentences naming dates of any year.
_HOSTILE = ("\u202e", "\u202d", "\u200f", "\u200e", "\u2066", "\u2069", "\u200b", "\u200c", "\u200d", "\ufeff",
            "\u0301", "\u0338", "\u20dd", "\u0e47", "\u05d0\u05d1\u05d2", "\u0627\u0644\u0639", "\ud800", "\udfff",
            "\U0001f600", "\U0001f1eb\U0001f1f7", "\u00df", "\u0130", "\u03a3", "\ufb01", "\u2028", "\u2029",
            "\u00a0", "\u3000", "\x85", "\x0b", "\x1f", "\x7f", "\ufffd", "\uffff", "\U0010ffff", "\ue000")
hostile_texts = st.one_of(
    any_text,
    st.text(st.characters(categories=["Mn", "Mc", "Me", "Cf", "Co", "Cs", "Zs", "Zl", "Zp", "Sk", "So"]),
            max_size=20),
    st.lists(st.sampled_from(_HOSTILE) | st.text(ascii_letters, min_size=1, max_size=4),
             max_size=12).map("".join),
    st.integers(1, 3000).map(lambda n: "\u0627" * n),  # one very long right-to-left token
    st.integers(1, 2000).map(lambda n: "e\u0301" * n),  # a long run of combining marks
    sentences,  # dates named in any year, counts up to 10^15
)

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(2**70), 2**70), st.floats(), texts)
# JSON as a client may send it (Python's parser gives huge integers, NaN and Infinity too), and now
# and then nested a few thousand levels deep.
json_values = st.one_of(
    st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                 max_leaves=12),
    st.integers(100, 3000).map(nested_json),
)


def query_string(params: dict[str, str]) -> str:
    """``params`` as a URL's query string: each text's UTF-8 bytes percent-encoded (a lone surrogate
    as the invalid UTF-8 it encodes to), as a server hands it to Django."""
    return query_string_pairs(params.items())


def query_string_pairs(pairs) -> str:
    """``query_string`` of (name, value) pairs, a name given more than once (a form's checkboxes) included."""
    from urllib.parse import quote_from_bytes

    def encoded(text: str) -> str:
        return quote_from_bytes(text.encode("utf-8", "surrogatepass"))

    return "&".join(f"{encoded(k)}={encoded(v)}" for k, v in pairs)
