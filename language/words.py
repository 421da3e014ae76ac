"""The words of an English question, and its stop words: the function words that carry no topic."""

from __future__ import annotations

import re

# The Snowball English stop list (question words, auxiliaries, pronouns, determiners), which the
# index's smaller Lucene list keeps. In a question they carry no topic yet match every turn that
# asks or addresses someone ("What did she ...?" matching "What do you ...?").
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can't cannot could couldn't did didn't do does doesn't doing don't down during each few
for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves
then there there's these they they'd they'll they're they've this those through to too under until up
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself
yourselves
""".split())
WORD = re.compile(r"\w+(?:['’]\w+)*")


def is_stopword(word: str) -> bool:
    """Whether ``word`` (any case, either apostrophe) is a stop word."""
    return word.lower().replace("’", "'") in STOPWORDS


def without_stopwords(text: str) -> str:
    """``text`` without its stop words; ``text`` unchanged when nothing else is left."""
    stripped = WORD.sub(lambda m: "" if is_stopword(m.group()) else m.group(), text)
    return " ".join(stripped.split()) if WORD.search(stripped) else text


def distinct_words(text: str) -> list[str]:
    """The distinct words of ``text``, lower-cased, in order."""
    return list(dict.fromkeys(w.lower() for w in WORD.findall(text)))


# How a speaker speaks of themself ("I", "my", "we") and of the one they speak to ("you"); the
# possessives capitalised too, as a sentence starts ("My knee hurts").
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|[Mm]y|[Mm]ine|myself|"
                          r"[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'd|[Ww]e'll|us|"
                          r"[Oo]ur|[Oo]urs|ourselves)\b")
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|ya|u)\b", re.I)
# The same as words (a run of word characters, as "I'm" is "I" and "m"), counted by set membership
# among the words opening with one of their letters: the patterns' alternatives scan slowly over a
# recall's few hundred candidates.
_FIRST_WORDS = frozenset("I me my My mine Mine myself we We us our Our ours Ours ourselves".split())
_SECOND_WORDS = frozenset("you your yours yourself ya u".split())  # any case
_TOKEN = re.compile(r"\b[IiMmWwUuOoYy]\w*")
# A note a client appends to a line for what was shared with it ("[shares a photo of a lake]"): not speech.
ATTACHMENT = re.compile(r"\s*\[(?:shares|shared) [^\]]*\]\s*$")
_ENDS_ASKING = re.compile(r"\?[\"'”’)\]]*\s*$")


def persons(text: str) -> tuple[int, int]:
    """How often ``text`` speaks of its speaker and of its listener: its ``FIRST_PERSON`` and its
    ``SECOND_PERSON`` words."""
    tokens = _TOKEN.findall(text)
    return sum(t in _FIRST_WORDS for t in tokens), sum(t.lower() in _SECOND_WORDS for t in tokens)


def to_listener(text: str) -> bool:
    """Whether a line of talk speaks to its listener rather than of its speaker: it holds more
    second-person words than first-person ones, or it ends by asking (an attachment's note aside).
    "Wow, you did that? Your kids must love it!" does; "I painted a lake, do you like it?" asks."""
    said = text.replace("’", "'")
    if "[" in said:
        said = ATTACHMENT.sub("", said)
    first, second = persons(said)
    return second > first or bool(_ENDS_ASKING.search(said))
