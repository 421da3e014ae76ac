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
