"""The offline, deterministic extractor: each speaker's statements (``speech``), attribute and
preference patterns, people by kinship and their ages, change cues and corrections as
supersessions, and problem → steps → outcome sequences as playbooks (docs/consolidation.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from language.temporal import with_dates

from . import speech
from .base import Episode, Extraction, FactCandidate, Known, PlaybookCandidate

VERSION = "rules-3"

# Clause boundaries inside a sentence: "..., and my X", "... but I", "; ".
_CLAUSE = re.compile(r"(?:,\s*|\s+)(?:and|but|so|though|because)\s+(?=(?:I|I'm|I've|my|My)\b)|;\s*|\s+-\s+")
_LEAD = re.compile(r"^(?:(?:oh|well|so|also|anyway|btw|by the way|hey|hi|ok|okay|yeah|yes|fyi|just so you know|"
                   r"quick update|update|heads up|and|as i said|like i said|as i mentioned|as mentioned|remember|guess what|"
                   r"funny enough|honestly|to be honest|for the record|fun fact)\b[,:!]?\s*)+", re.I)
# A label of a few words in front of what is said ("Big news: I moved ...", "Quick update: ...").
_LABEL = re.compile(r"^(?:[A-Za-z']+\s){0,2}[A-Za-z']+:\s+")
_CORRECTION = re.compile(r"^(?:actually|correction|sorry|oops|no wait|wait|my mistake|i misspoke|to correct myself)"
                         r"\b[,:!]?\s*", re.I)
_TRAIL = re.compile(r"\s*(?:\b(?:now|these days|nowadays|anymore|any more|at the moment|currently|lately|"
                    r"for now|though|too|as well|still|again|actually|anyway|as usual|as always|as before|"
                    r"btw|haha|lol|last \w+|this \w+|yesterday|today|recently|"
                    r"(?:a few|a couple of|\w+) (?:days|weeks|months|years) ago|in (?:19|20)\d\d)\b\s*)+$", re.I)
_VALUE_STOP = re.compile(r"\s*(?:[,;:!?()]|" + "".join(rf"(?<!\b{a})" for a in speech.ABBREVIATIONS) +
                         r"\.(?:\s|$)| because | since | which | who | where | but | when | if "
                         r"| so that | and (?:I|my|it|we|she|he|they)\b| with (?:my|our|his|her|the) )", re.I)

_BAD_ATTRS = {"problem", "question", "issue", "point", "guess", "bad", "pleasure", "turn", "fault", "day", "week",
              "bet", "advice", "plan", "idea", "thought", "thoughts", "mind", "head", "life", "experience",
              "goal", "hope", "dream", "concern", "worry", "understanding", "impression", "feeling"}
# What follows an attribute's head noun and is not it: "plan for the weekend", "question today".
_ATTR_MODIFIER = re.compile(r"\s+(?:(?:of|for|at|in|on|with|about|from|to|this|next|last)\b.*|today|tomorrow|"
                            r"tonight)$")
_OCCUPATION_ATTRS = {"work", "job", "occupation", "profession"}
_VAGUE = re.compile(r"^(?:not|so|too|very|really|pretty|quite|kind of|sort of|a bit|just|also|still|going|"
                    r"fine|ok|okay|good|great|bad|here|there|this|that|it|these|those|them|him|to|the same|different|busy|"
                    r"better|worse)\b",
                    re.I)
# "places like this", "the taste of these": what the value names is shown or said elsewhere.
_SHOWN = re.compile(r"\b(?:this|that|these|those)$", re.I)
_PRONOUN = re.compile(r"\b(?:me|you|your|yours|myself|i|i'm|we|us|him|them)\b", re.I)

_SUCCESS = re.compile(r"\b(?:(?:that|it|this|which)(?: finally| actually)? (?:worked|did the trick|fixed it|solved it|"
                      r"sorted it)|works now|(?<!stopped )(?<!not )working (?:again|now)|fixed now|problem solved|all good now|back to normal|"
                      r"is fixed|it's fixed|resolved now)\b", re.I)
_FAILURE = re.compile(r"\b(?:still (?:broken|not working|doesn't work|does not work|won't|isn't|not|the same|failing|"
                      r"dead|stuck)|(?:that|it|this) didn't (?:work|help|fix)|did not (?:work|help)|no luck|"
                      r"didn't help|made no difference|no change)\b", re.I)
_PROBLEM = re.compile(r"\b(?:isn't|is not|won't|doesn't|does not|can't|cannot|can not|stopped|keeps|kept|not working|"
                      r"broken|broke|fails|failing|failed|won't|error|problem with|issue with|trouble with|"
                      r"went offline|is offline|is dead|beeping|flashing|flickering|dropping|disconnecting|"
                      r"crashing|freezing|leaking|overheating)\b", re.I)
_STEP = re.compile(r"^I(?:'ve| have)?(?: already| also| then| just| first)? (?P<step>(?:tried|restarted|rebooted|reset|"
                   r"unplugged|plugged|updated|upgraded|reinstalled|cleared|turned|switched (?:it )?off|replaced|"
                   r"changed|held|pressed|removed|re-?paired|disconnected|reconnected|installed|checked|logged|"
                   r"factory[- ]reset|power[- ]cycled|moved the|charged|tightened|cleaned|rebooted|flushed|"
                   r"re-?enabled|disabled|enabled|toggled|swapped|reseated)\b.*)$", re.I)


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _clean_value(raw: str, *, allow_ing: bool = False) -> str | None:
    value = _VALUE_STOP.split(raw, maxsplit=1)[0]
    value = _TRAIL.sub("", value.strip().rstrip(".!? "))
    value = re.sub(r"^(?:called|named|now|actually|still)\s+", "", value, flags=re.I).strip(" '\"")
    if not value or len(value.split()) > 8 or _VAGUE.match(value) or _PRONOUN.search(value) or _SHOWN.search(value):
        return None
    if not allow_ing and re.match(r"^\w+ing\b", value) and not re.match(r"^(?:king|ring|spring|morning|evening|wedding)\b", value, re.I):
        return None
    return value


def _is_name(value: str) -> bool:
    words = value.split()
    return len(words) <= 4 and all(w[:1].isupper() and re.sub(r"[-.]", "", w).isalpha() for w in words)


def _norm(text: str) -> str:
    text = re.sub(r"\b(?:a|an|the|my|some)\b", " ", text.lower())
    text = text.replace("favorite", "favourite").replace("colour", "color")
    return re.sub(r"[^\w]+", " ", text).strip()


def _slot_key(text: str) -> str:
    words = [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in _norm(text).split()]
    return "_".join(words)


@dataclass
class _Pattern:
    regex: re.Pattern
    build: Callable[[re.Match, str], tuple[str, str | None, str, str | None] | None]
    # build(match, holder) -> (text, slot, value, change) or None


def _possessive(holder: str) -> str:
    return f"{holder}'" if holder.endswith("s") else f"{holder}'s"


def _head(attr: str) -> str:
    """The noun an attribute phrase is about: "goal race" → race, "plan for the weekend" → plan."""
    return _ATTR_MODIFIER.sub("", attr).split()[-1]


def _attr(m: re.Match, holder: str):
    attr = _words(m["attr"]).lower()
    if _head(attr) in _BAD_ATTRS or len(attr.split()) > 4:
        return None
    value = _clean_value(m["value"])
    if value is None:
        return None
    change = "natural" if (m["new"] or m["now"] or m["now_before"]) else None
    attr = re.sub(r"^(?:new|current)\s+", "", attr)
    if attr in _OCCUPATION_ATTRS and value.lower().startswith("as "):
        # "My work is as a librarian" says what "I work as a librarian" says.
        value = value[3:]
        return f"{holder} works as {value}.", "occupation", value, change
    verb = m["verb"].replace("'s", "is")
    person = re.sub(r"'s name$", "", attr)
    if person in _SINGLE_RELATIONS and _is_name(value):
        # "My roommate's name is Jess" and "my new roommate is Aisha": one person in that role.
        slot = f"relation:{person}"
    else:
        slot = f"attr:{_slot_key(attr)}"
    return f"{_possessive(holder)} {attr} {verb} {value}.", slot, value, change


def _theirs(value: str, holder: str) -> str:
    """The value as its holder's: "finding old maps for my shop" → "... for Rosa's shop"."""
    return re.sub(r"\b(?:[Mm]y|[Oo]ur)\b", speech.possessive(holder), value)


def _simple(template: str, slot: str | Callable[[str], str] | None, change: str | None = None,
            allow_ing: bool = False):
    def build(m: re.Match, holder: str):
        value = _clean_value(m["value"], allow_ing=allow_ing)
        if value is None:
            return None
        key = slot(value) if callable(slot) else slot
        return template.format(h=holder, v=_theirs(value, holder)), key, value, change

    return build


def _prefer(m: re.Match, holder: str):
    value = _clean_value(m["value"], allow_ing=True)
    other = _clean_value(m["other"], allow_ing=True) if m["other"] else None
    if value is None:
        return None
    if other:
        return (f"{holder} prefers {_theirs(value, holder)} over {_theirs(other, holder)}.", "prefers:" + "|".join(sorted([_slot_key(value),
                                                                                         _slot_key(other)])),
                value, None)
    return f"{holder} prefers {_theirs(value, holder)}.", f"prefers:{_slot_key(value).split('_')[-1]}", value, None


def _unlike(m: re.Match, holder: str):
    value = _clean_value(m["value"], allow_ing=True)
    if value is None:
        return None
    change = "natural" if re.search(r"no longer|stopped|anymore|any more", m.group(0), re.I) else None
    theirs = _theirs(value, holder)
    return f"{holder} no longer likes {theirs}." if change else f"{holder} does not like {theirs}.", \
        f"likes:{_slot_key(value)}", f"not {value}", change


_I = r"^I(?:'m| am)?"
# When a single event happened ("moved to Liverpool at the weekend"): not part of what it says.
_EVENT_TIME = (r"(?:(?:at|over|on|during) the weekend|on (?:mon|tues|wednes|thurs|fri|satur|sun)day|"
               r"in (?:january|february|march|april|may|june|july|august|september|october|november|december)|"
               r"(?:on|at) the (?:\d+(?:st|nd|rd|th)|end of the \w+))")
PATTERNS: list[_Pattern] = [
    _Pattern(re.compile(r"^(?:my|our) (?P<new>new |current )?(?P<attr>[a-z][a-z' -]{1,40}?) "
                        r"(?:(?P<now_before>now|currently|these days) )?(?P<verb>is|are|'s) "
                        r"(?P<now>now |actually )?(?P<value>.+)$", re.I), _attr),
    _Pattern(re.compile(r"^I(?:'ve| have)? (?:just |finally |recently )?(?:moved|relocated)(?: back)? to "
                        r"(?P<value>.+?)(?:\s+" + _EVENT_TIME + r")?$", re.I), _simple("{h} lives in {v}.", "home",
                                                                                    "natural")),
    _Pattern(re.compile(r"^I(?: now|'m now| am now|'m| am)? (?:live|living|based) in (?P<value>.+)$", re.I),
             _simple("{h} lives in {v}.", "home")),
    _Pattern(re.compile(r"^I(?:'m| am) (?:originally )?from (?P<value>.+)$", re.I),
             _simple("{h} is from {v}.", "hometown")),
    _Pattern(re.compile(r"^I(?: now|'m now| am now|'m| am)? (?:work|working|employed) as (?P<value>.+)$", re.I),
             _simple("{h} works as {v}.", "occupation")),
    _Pattern(re.compile(r"^I(?: now|'m now| am now|'m| am)? (?:work|working|employed) (?:at|for) (?P<value>.+)$",
                        re.I), _simple("{h} works at {v}.", "employer")),
    _Pattern(re.compile(r"^I(?:'ve| have)? (?:just |recently )?(?:started (?:a new job |working )?|got a (?:new )?job "
                        r")(?:at|with|for) (?P<value>.+)$", re.I), _simple("{h} works at {v}.", "employer",
                                                                             "natural")),
    _Pattern(re.compile(r"^I (?:now |really |much |strongly |definitely )*prefer (?P<value>.+?)(?: (?:over|to|rather "
                        r"than|instead of) (?P<other>.+))?$", re.I), _prefer),
    _Pattern(re.compile(r"^I(?: no longer| don't| do not| stopped)(?: really)? (?:like|love|enjoy|liking|loving|"
                        r"enjoying) (?P<value>.+?)(?: anymore| any more)?$", re.I), _unlike),
    _Pattern(re.compile(r"^I (?:really |absolutely |also )*(?:like|love|enjoy|adore) (?P<value>.+)$", re.I),
             _simple("{h} likes {v}.", lambda v: f"likes:{_slot_key(v)}", allow_ing=True)),
    _Pattern(re.compile(_I + r" (?:severely |very |mildly )?allergic to (?P<value>.+)$", re.I),
             _simple("{h} is allergic to {v}.", lambda v: f"allergy:{_slot_key(v)}")),
    _Pattern(re.compile(r"^I (?:was born|grew up) (?:on|in) (?P<value>.+)$", re.I),
             _simple("{h} was born in {v}.", "birth")),
    _Pattern(re.compile(r"^I(?: now)? drive (?P<value>an? .+)$", re.I), _simple("{h} drives {v}.", "car")),
    _Pattern(re.compile(r"^I(?:'ve| have)? (?:just )?(?:became|become|went|gone|turned|am now|'m now) "
                        r"(?P<value>vegan|vegetarian|pescatarian|keto)\b.*$", re.I),
             _simple("{h} is {v}.", "diet", "natural")),
    _Pattern(re.compile(_I + r" (?:a )?(?P<value>vegan|vegetarian|pescatarian)$", re.I),
             _simple("{h} is {v}.", "diet")),
    _Pattern(re.compile(r"^I(?:'m| am) (?P<value>\d{1,3}) (?:years old|yrs old|now)?$", re.I),
             _simple("{h} is {v} years old.", "age")),
    _Pattern(re.compile(r"^I(?: just)? turned (?P<value>\d{1,3})\b.*$", re.I),
             _simple("{h} is {v} years old.", "age", "natural")),
]
# Having none of a thing that is a slot ("No pets here.", "I don't have a car", "No dietary
# restrictions for me", "I eat pretty much anything"): a value like any other, so that a later
# change ("we adopted a greyhound", "I went vegetarian") has a fact to replace. Matched before an
# opener is stripped, since "No" is one. A closed class: "no worries", "no idea" are no slot.
_NONE_OF = {"pets": "pet", "pet": "pet", "dogs": "pet", "cats": "pet", "car": "car", "cars": "car",
            "dietary restrictions": "diet", "dietary requirements": "diet", "food restrictions": "diet"}
_NONE_WORDS = "|".join(sorted(_NONE_OF, key=len, reverse=True))
_ABSENT = re.compile(rf"^(?:no|(?:I|we)(?: have|'ve| have got|'ve got) no|(?:I|we) (?:don't|do not) (?:have|own) "
                     rf"(?:any|an?)) (?P<what>{_NONE_WORDS})(?: (?:here|for me|for us|in this house|"
                     rf"at the moment|right now|at all|whatsoever))*(?:,? thanks)?$", re.I)
_EATS_ANY = re.compile(r"^I(?:'ll)? eat (?:pretty much |just about |basically )?(?:anything|everything)"
                       r"(?: really)?$", re.I)
_SWITCH = re.compile(r"^(?:I|we)(?:'ve| have)? (?:just |finally |recently )?(?:switched|changed|moved|went|upgraded)"
                     r"(?: \w+)? from (?P<old>.+?) to (?P<value>.+)$", re.I)
_BARE = re.compile(r"^(?:(?:i meant|i mean|make that|it should be|that should be|i should have said)\s+"
                   r"(?:(?:that )?(?:it's|it is|it was|they're|they are)\s+)?"
                   r"|(?:it's|it is|it was|that's|that is)\s+)(?P<value>.+?)(?:,?\s+not\s+(?P<old>[^,.;]+?))?$", re.I)
# Kinship and household: a closed class of English nouns naming someone by their tie to the speaker.
_SINGLE_RELATIONS = ("wife", "husband", "partner", "spouse", "girlfriend", "boyfriend", "fiance", "fiancee",
                     "fiancé", "fiancée", "mother", "father", "mom", "mum", "dad", "boss", "manager", "landlord",
                     "roommate", "flatmate")
_MANY_RELATIONS = ("son", "daughter", "kid", "child", "boy", "girl", "brother", "sister", "sibling", "cousin",
                   "aunt", "uncle", "niece", "nephew", "grandmother", "grandfather", "grandma", "grandpa",
                   "granddaughter", "grandson", "friend", "best friend", "neighbour", "neighbor", "colleague",
                   "coworker", "co-worker", "dog", "cat", "puppy", "kitten", "pet", "parrot", "horse", "twin")
_PLURALS = {"kids": "kid", "children": "child", "sons": "son", "daughters": "daughter", "boys": "boy",
            "girls": "girl", "brothers": "brother", "sisters": "sister", "siblings": "sibling", "friends": "friend",
            "dogs": "dog", "cats": "cat", "pets": "pet", "twins": "twin", "cousins": "cousin", "parents": "parent",
            "grandkids": "grandchild", "grandchildren": "grandchild"}
_RELATION_WORDS = "|".join(sorted([*_SINGLE_RELATIONS, *_MANY_RELATIONS, *_PLURALS], key=len, reverse=True))
_NAME = r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
_NOT_NAMES = frozenset("""I I'm I've I'd I'll Monday Tuesday Wednesday Thursday Friday Saturday Sunday January
February March April May June July August September October November December The A An And But So My Our We He
She They It This That Yes No Oh Wow Thanks Sorry Actually Correction Hi Hey Also Just Still Now Then""".split())
_RELATION = re.compile(rf"\b(?P<own>my|our|(?:I|we) (?:have|have got|'ve got) (?:a|an|one|two|three|four|\d))\s+"
                       rf"(?:(?:little|older|younger|big|baby|eldest|oldest|youngest|new|best|twin|step|late)\s+)*"
                       rf"(?P<rel>{_RELATION_WORDS})\b(?P<rest>.*?)(?=\b(?:my|our)\s|$)", re.I)
_AGE_AFTER = re.compile(r"^(?:,|\s)*(?:\(|who is |who's |is |, who is |, )?(?P<age>\d{1,2})"
                        r"(?:\)| years? old| yrs? old|\b)", re.I)
_AGE_OF = re.compile(rf"\b(?P<name>{_NAME})(?:'s| is| just turned| turned| has turned)\s+"
                     rf"(?:now |actually |only |just )?(?P<age>\d{{1,2}})\b"
                     rf"(?P<tail>(?: years? old| yrs? old)?(?:,? not (?P<old>\d{{1,2}}))?(?: now| already)?)")
_CHANGE_NOW = re.compile(r"\b(?:now|anymore|any more|no longer|these days|just turned|turned|has turned)\b", re.I)


_REJECTED = object()


@dataclass
class _Session:
    problem: tuple[str, str] | None = None  # (trigger, episode id)
    steps: list[tuple[str, str]] = field(default_factory=list)  # (step, episode id)


@dataclass
class _Batch:
    """What an extraction remembers across the turns it reads: per session the open problem,
    per speaker the last single-valued fact (what a bare "sorry, I meant ..." corrects) and the
    people they named ("my daughter Leonor": Leonor → daughter)."""

    sessions: dict[str | None, _Session] = field(default_factory=dict)
    speakers: frozenset[str] = frozenset()  # every labelled speaker of the batch: a name said to them is no fact
    last: dict[str, FactCandidate] = field(default_factory=dict)
    people: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # name → (relation, episode)
    turns: dict[tuple[str | None, str], list[str]] = field(default_factory=dict)  # (session, speaker) → last turn


def _rerender(previous: FactCandidate, value: str) -> str | None:
    # The previous fact's sentence with the corrected value in place of the old one.
    if previous.value and previous.value in previous.text:
        return previous.text.replace(previous.value, value, 1)
    return None


def _none_of(said: str, holder: str, episode: Episode, *, labelled: bool) -> FactCandidate | None:
    """The speaker has none of a slot's thing ("No pets here"), or eats anything: that value."""
    if m := _ABSENT.match(said):
        what = m["what"].lower()
        slot, text, value = _NONE_OF[what], f"{holder} has no {what}.", f"no {what}"
    elif _EATS_ANY.match(said):
        slot, text, value = "diet", f"{holder} eats anything.", "anything"
    else:
        return None
    return FactCandidate(text=text, episode_ids=(episode.id,), slot=f"{holder.lower()}:{slot}" if labelled else slot,
                         value=value)


def _clauses(sentence: str) -> list[str]:
    return [c.strip().strip('"').strip() for c in _CLAUSE.split(sentence.strip()) if c and c.strip().strip('"')]


def _split_speaker(text: str) -> tuple[str, str]:
    holder, body = speech.split_speaker(text)
    return holder or "User", body


def _when(episode: Episode) -> datetime:
    raw = episode.occurred_at if isinstance(episode.occurred_at, str) else str(episode.occurred_at)
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _is_problem(clause: str) -> bool:
    """Trouble with a thing ("my hub is offline", "the router keeps dropping"), not a person's
    state ("I can't wait", "my kids keep me busy"): the subject is a possessed or definite noun
    phrase naming no person, or "I can't" followed by a verb of getting something to work."""
    m = _PROBLEM.search(clause)
    if not m:
        return False
    subject = re.match(r"^(?:the|my|our|this|his|her|their)\s+(?P<words>(?:[\w'-]+\s+){0,3})$",
                       clause[:m.start()], re.I)
    if subject:
        return not re.search(rf"\b(?:{_RELATION_WORDS}|family|parents?)\b", subject["words"], re.I)
    return bool(re.match(r"^I (?:can't|cannot|can not|couldn't) (?:connect|log|sign|access|get (?:it|the|my|our)|"
                         r"open|turn|reach|load|pair|print)\b", clause, re.I))


class RulesExtractor:
    name = "rules"
    version = VERSION
    uses_known = False  # stored facts are met by the resolver, through slots and neighbours

    def __init__(self, *, statements: speech.StatementRules = speech.DEFAULT_STATEMENT_RULES):
        self.statements = statements
        self.trace: list[tuple[str, str, str]] | None = None  # (episode id, sentence, why not kept): for the eval

    def extract(self, *, episodes: list[Episode], context: list[Episode], known: Known | None = None,
                user_name: str = "User") -> Extraction:
        """See ``Extractor.extract``; ``known`` is not read (the resolver meets stored facts). Called
        directly, unlabelled turns are "User"'s; consolidation passes the end-user's name."""
        out = Extraction()
        batch = _Batch(speakers=frozenset(filter(None, (speech.split_speaker(e.text)[0]
                                                        for e in [*context, *episodes]))))
        new_ids = {e.id for e in episodes}
        for episode in sorted([*context, *episodes], key=lambda e: (e.occurred_at, e.id)):
            if episode.role != "user":
                continue
            facts, playbooks = self._episode(episode, batch, user_name=user_name)
            if episode.id in new_ids:
                out.facts += facts
                out.playbooks += playbooks
        return out

    def _episode(self, episode: Episode, batch: _Batch, *, user_name: str
                 ) -> tuple[list[FactCandidate], list[PlaybookCandidate]]:
        labelled, text = speech.split_speaker(episode.text)
        holder = labelled or user_name
        state = batch.sessions.setdefault(episode.session_id, _Session())
        people = batch.people.setdefault(holder, {})
        when = _when(episode)
        family = speech.family_context(text)
        facts: list[FactCandidate] = []
        playbooks: list[PlaybookCandidate] = []
        previous_general: int | None = None  # index in facts of this turn's last general statement
        hard = False  # the sentence before said how hard something is: a feeling after it is coping
        in_turn = speech.sentences(text)
        last_turn = batch.turns.get((episode.session_id, holder), [])
        batch.turns[(episode.session_id, holder)] = in_turn
        for index, sentence in enumerate(in_turn):
            after_hardship, hard = hard, speech.hardship(sentence)
            harsh = bool(_CORRECTION.match(speech.strip_opener(sentence)) or _CORRECTION.match(sentence))
            stated = len(facts)
            handled = rejected = False
            for raw in _clauses(sentence):
                said = _LEAD.sub("", _LABEL.sub("", raw)).strip().rstrip(".!? ")
                if none := _none_of(said, holder, episode, labelled=labelled is not None):
                    facts.append(none)
                    continue
                clause = _LEAD.sub("", _CORRECTION.sub("", _LEAD.sub("", _LABEL.sub("", raw)))).strip()
                clause = _LEAD.sub("", speech.strip_opener(clause)).rstrip(".!? ")
                if not clause:
                    continue
                if _SUCCESS.search(clause) or _FAILURE.search(clause) or _is_problem(clause) or (
                        state.problem is not None and _STEP.match(clause)):
                    # Trouble and its outcome are procedure, not durable facts ("my hub is offline").
                    if state.problem is not None or _is_problem(clause):
                        handled = True
                        playbook = self._procedure(clause, episode, state, asked=sentence.rstrip().endswith("?"))
                        if playbook is not None:
                            playbooks.append(playbook)
                        continue
                if any(_SUCCESS.search(c) or _FAILURE.search(c) for c in (clause, raw)):
                    # An outcome with no open problem ("Works now, the hall light comes on
                    # again") is how a thing stands at the moment, not a durable fact.
                    handled = True
                    continue
                fact = self._fact(clause, holder, episode, batch, harsh=harsh, labelled=labelled is not None)
                if fact is _REJECTED:
                    # The clause has a pattern's form but no value the pattern keeps ("my mum is
                    # recovering from a hip operation"): the statement layer may still read it.
                    rejected = True
                    continue
                found = self._people(clause, holder, episode, people, harsh=harsh, labelled=labelled is not None)
                if fact is not None:
                    # "My daughter's name is Leonor" is already the fact; its person is still remembered.
                    found = [fact, *(f for f in found if f.value not in fact.text)]
                elif not found and (fact := self._correction(clause, holder, episode, batch, harsh=harsh)):
                    found = [fact]
                facts += found
            if handled or len(facts) > stated or (rejected and not self.statements.after_pattern):
                previous_general = None
                continue
            sentence = speech.own_part(speech.after_answer(speech.strip_vocative(sentence, names=batch.speakers)))
            sentence = speech.before_eagerness(speech.after_wish(sentence))
            sentence = speech.own_noun(speech.shown_thing(speech.with_subject(speech.plain(speech.strip_opener(sentence)))))
            pair = speech.pronoun_and_i(speech.strip_opener(sentence), [*last_turn, *in_turn[:index]],
                                        exclude=batch.speakers | {holder})
            if pair == "":
                continue  # "She and I ..." with no one named before: the pronoun names no one
            sentence = pair or sentence
            resolved = (speech.resolve_person(speech.strip_opener(sentence), [*last_turn, *in_turn[:index]],
                                              exclude=batch.speakers | {holder})
                        or (speech.resolve_thing(speech.strip_opener(sentence), in_turn[index - 1]) if index else None)
                        if self.statements.resolve and previous_general is None else None)
            if resolved and speech.read(speech.strip_opener(resolved), ignore=batch.speakers, rules=self.statements,
                                        alone=True, family=family, after_hardship=after_hardship).about_speaker:
                sentence = resolved  # "She taught me" after "Have you met my sister?": the sister taught
            elif previous_general is None and speech.leans(speech.strip_opener(sentence)):
                # Nothing before it in the turn to lean on: its first clause names no one; what it
                # says of the speaker after that clause is read on its own (``alone``), else nothing.
                rest = speech.after_leaning(speech.strip_opener(sentence)) if self.statements.alone else ""
                if not rest:
                    if self.trace is not None:
                        self.trace.append((episode.id, sentence, "leaning"))
                    continue
                sentence = rest
            # What opens on "she and I" or "this morning" with nothing before it is a statement of its own.
            reading = speech.read(speech.strip_opener(sentence), ignore=batch.speakers, rules=self.statements,
                                  alone=previous_general is None, family=family, after_hardship=after_hardship)
            if reading.why == "vague" and self.statements.trailing and (
                    head := speech.before_reference(speech.strip_opener(sentence))):
                # "I took up archery, and it keeps me calm": "it" is the archery; the statement stands alone.
                kept = speech.read(head, ignore=batch.speakers, rules=self.statements, alone=previous_general is None,
                                   family=family, after_hardship=after_hardship)
                if kept.about_speaker:
                    sentence, reading = head, kept
            if not reading.follow_up and (tail := speech.spliced_past(speech.strip_opener(sentence))):
                # "Been a crazy month, got engaged on Friday": the chat's clause about the speaker stands alone.
                kept = speech.read(tail, ignore=batch.speakers, rules=self.statements, alone=previous_general is None,
                                   family=family, after_hardship=after_hardship)
                if kept.about_speaker:
                    sentence, reading = tail, kept
            if self.statements.how_it_was and (reading.about_speaker or reading.why == "feeling") and (
                    head := speech.before_how_it_was(speech.strip_opener(sentence))):
                # "I joined the choir with my sister, and it was so much fun": how it was says nothing more of her.
                kept = speech.read(head, ignore=batch.speakers, rules=self.statements, alone=previous_general is None,
                                   family=family, after_hardship=after_hardship)
                if kept.about_speaker:
                    sentence, reading = head, kept
            if self.trace is not None:
                self.trace.append((episode.id, sentence, reading.why))
            if reading.follow_up and previous_general is not None and speech.continues(
                    speech.strip_opener(sentence), ignore=batch.speakers, rules=self.statements):
                # "It's special to me." continues the statement before it.
                head = facts[previous_general]
                tail = speech.third_person(speech.strip_opener(sentence), name=holder, family=family)
                tail = with_dates(tail, when=when).rstrip(" .!")
                facts[previous_general] = replace(head, text=f"{head.text.rstrip(' .!')}; {tail[0].lower()}{tail[1:]}.")
                continue
            previous_general = None
            if not reading.about_speaker:
                continue
            statement = speech.third_person(speech.strip_opener(sentence), name=holder, family=family)
            if holder.lower() not in statement.lower():
                continue  # "Sleep matters more than any of us admit": a maxim, not about the speaker
            statement = with_dates(statement, when=when).rstrip(" .!") + "."
            statement = statement[0].upper() + statement[1:]
            facts.append(FactCandidate(text=statement, episode_ids=(episode.id,), confidence=0.7))
            previous_general = len(facts) - 1
        # "the user lives in Leeds." starts a sentence like any other fact.
        facts = [replace(f, text=f.text[:1].upper() + f.text[1:]) if f.text[:1].islower() else f for f in facts]
        return facts, playbooks

    def _fact(self, clause: str, holder: str, episode: Episode, batch: _Batch, *, harsh: bool, labelled: bool
              ) -> FactCandidate | None | object:
        """The clause read by the patterns: a fact, None (no pattern's form), or _REJECTED (a
        pattern's form whose value is chatter)."""
        ids = (episode.id,)
        def scope(slot: str | None) -> str | None:
            return f"{holder.lower()}:{slot}" if labelled and slot else slot

        if m := _SWITCH.match(clause):
            old, value = _clean_value(m["old"]), _clean_value(m["value"])
            if old and value:
                batch.last.pop(holder, None)
                return FactCandidate(text=f"{holder} switched from {old} to {value}.", episode_ids=ids, slot=None,
                                     value=value, change="harsh" if harsh else "natural", replaces=old)
        body = re.sub(r"^we\b", "I", clause, flags=re.I) if re.match(
            r"^we (?:live|moved|drive|just moved|now live|have moved|relocated)\b", clause, re.I) else clause
        for pattern in PATTERNS:
            m = pattern.regex.match(body)
            if not m:
                continue
            built = pattern.build(m, holder)
            if built is None:
                return _REJECTED
            text, slot, value, change = built
            fact = FactCandidate(text=text, episode_ids=ids, slot=scope(slot), value=value,
                                 change="harsh" if harsh else change)
            if slot:
                batch.last[holder] = fact
            return fact
        return None

    @staticmethod
    def _correction(clause: str, holder: str, episode: Episode, batch: _Batch, *, harsh: bool
                    ) -> FactCandidate | None:
        """A bare correction ("sorry, I meant it's green, not blue") of the speaker's last single-valued fact."""
        ids = (episode.id,)
        previous = batch.last.get(holder)
        if harsh and previous is not None and previous.slot and (m := _BARE.match(clause)):
            value = _clean_value(m["value"])
            if value and (text := _rerender(previous, value)):
                # The corrected fact's turn supplies the rest of the sentence, so it is cited too.
                ids = tuple(dict.fromkeys([*previous.episode_ids, episode.id]))
                fact = FactCandidate(text=text, episode_ids=ids, slot=previous.slot, value=value, change="harsh",
                                     replaces=_clean_value(m["old"]) if m["old"] else previous.value)
                batch.last[holder] = fact
                return fact
        return None

    @staticmethod
    def _people(clause: str, holder: str, episode: Episode, people: dict[str, tuple[str, str]], *, harsh: bool,
                labelled: bool) -> list[FactCandidate]:
        """"my wife Priya", "our kids, Arun who is 7 and Maya who is 4", "Maya is 5 now": who
        the speaker's people are, and their ages (one slot per person, so a new age supersedes)."""
        ids = (episode.id,)
        own = speech.possessive(holder)
        def scope(slot: str) -> str:
            return f"{holder.lower()}:{slot}" if labelled else slot

        out: list[FactCandidate] = []
        for m in _RELATION.finditer(clause):
            rel = m["rel"].lower()
            singular = _PLURALS.get(rel, rel)
            rest = re.sub(r"^(?:'s name is|'s name's| is called| is named| named| called| are| is|,|:|\s)+", " ",
                          m["rest"])
            names = []
            for n in re.finditer(rf"(?<![\w'])(?P<name>{_NAME})\b", rest):
                if n["name"] in _NOT_NAMES or n["name"] == holder:
                    break
                if names and not re.fullmatch(r"(?:,|\s|and|&|who is \d+|, who is \d+|\(\d+\)|, \d+|\d+|is \d+)*",
                                             rest[names[-1][1]:n.start()].strip() or ""):
                    break
                if not names and rest[:n.start()].strip(" ,:"):
                    break
                age = _AGE_AFTER.match(rest[n.end():])
                names.append((n["name"], n.end() + (age.end() if age else 0), age["age"] if age else None))
                if rel not in _PLURALS:
                    break
            for name, _, age in names:
                people[name] = (singular, episode.id)
                slot = f"relation:{singular}" if singular in _SINGLE_RELATIONS else f"person:{name.lower()}"
                out.append(FactCandidate(text=f"{own} {singular} is {name}." if singular in _SINGLE_RELATIONS
                                         else f"{name} is {own} {singular}.", episode_ids=ids, slot=scope(slot),
                                         value=name, change="harsh" if harsh else None))
                if age:
                    out.append(FactCandidate(text=f"{own} {singular} {name} is {age} years old.", episode_ids=ids,
                                             slot=scope(f"age:{name.lower()}"), value=age,
                                             change="harsh" if harsh else None))
        if out:
            return out
        for m in _AGE_OF.finditer(clause):
            name = m["name"]
            if name in _NOT_NAMES or name == holder:
                continue
            # A name the batch has not met is read as a person only when the sentence says it is an
            # age: "years old", or a corrected number ("Ivy is 7, not 6").
            if name not in people and not re.search(r"years? old", m["tail"] or "") and not m["old"]:
                continue
            rel, named_in = people.get(name, (None, None))
            change = "harsh" if harsh or m["old"] else ("natural" if _CHANGE_NOW.search(clause) else None)
            who = f"{own} {rel} {name}" if rel else name
            # The turn that named the relation supports the fact as much as the one giving the age.
            cited = tuple(dict.fromkeys([named_in, episode.id])) if named_in else ids
            out.append(FactCandidate(text=f"{who} is {m['age']} years old.", episode_ids=cited,
                                     slot=scope(f"age:{name.lower()}"), value=m["age"], change=change,
                                     replaces=m["old"]))
        return out

    @staticmethod
    def _procedure(clause: str, episode: Episode, state: _Session, *, asked: bool = False
                   ) -> PlaybookCandidate | None:
        """``asked``: the clause is part of a question ("I changed the lock yesterday, is that
        why?"): something done, asked about, not a step taken against the problem."""
        if _SUCCESS.search(clause) or _FAILURE.search(clause):
            success = bool(_SUCCESS.search(clause)) and not _FAILURE.search(clause)
            if state.problem is None or (success and not state.steps):
                return None
            trigger, problem_id = state.problem
            steps = state.steps
            candidate = PlaybookCandidate(
                trigger=trigger, steps="\n".join(f"{n}. {s}" for n, (s, _) in enumerate(steps, start=1)),
                episode_ids=tuple(dict.fromkeys([problem_id, *(i for _, i in steps), episode.id])),
                outcome=success, outcome_episode_id=episode.id)
            state.steps = []
            if success:
                state.problem = None
            return candidate
        if m := _STEP.match(clause):
            if state.problem is not None and not asked:
                step = m["step"].rstrip(".!")
                state.steps.append((step[0].upper() + step[1:], episode.id))
            return None
        if _is_problem(clause):
            trigger = re.sub(r"^(?:my|our)\s+", "the ", clause.rstrip(".!?"), flags=re.I)
            trigger = re.sub(r"^I\b", "the user", trigger)
            state.problem, state.steps = (trigger[0].upper() + trigger[1:], episode.id), []
        return None


def infer_slot(text: str) -> tuple[str | None, str | None]:
    """The (slot, value) of a fact sentence as the patterns read it: for facts written by agents,
    or by other extractors, in the first or third person ("My X is Y", "User's X is Y")."""
    holder, body = _split_speaker(text)
    body = body.strip().rstrip(".")
    body = re.sub(r"^(?:the )?(?:user|[A-Z][a-z]+)(?:'s|') ", "my ", body, count=1, flags=re.I)
    body = re.sub(r"^(?:the )?(?:user|[A-Z][a-z]+) (lives|works|prefers|likes|is|was|drives)\b", r"I \1", body,
                  count=1, flags=re.I)
    body = re.sub(r"^I (lives|works|prefers|likes|drives)\b", lambda m: "I " + m[1][:-1], body)
    body = re.sub(r"^I is\b", "I am", body)
    body = re.sub(r"^I was born in\b", "I was born in", body)
    for pattern in PATTERNS:
        m = pattern.regex.match(body)
        if m and (built := pattern.build(m, holder)) is not None:
            return built[1], built[2]
    return None, None
