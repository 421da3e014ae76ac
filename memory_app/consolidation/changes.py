"""Changes found in natural phrasing: which sentence says that one of the speaker's values changed,
and which stored fact it replaces.

Two stages, each pure (no Django, no settings, no Elasticsearch): ``change_read`` reads one
sentence into a ``ChangeReading`` (or None: it reports no change of the speaker's own), and
``change_target`` picks, among the speaker's current facts, the one the reading replaces (or
None). The consolidation service calls both (``memory_app.consolidation.services``) and writes the
supersession with the kind the reading found: ``harsh`` for a correction of a mistake, ``natural``
for a change over time.

A sentence reports a change when it holds a cue (a verb of replacing, leaving, ending or starting;
"no longer", "not ... any more", "instead of", "from now on", "now that", "used to ... now", a bare
"now" or "new") in a clause about the speaker (first person, "we", or the end-user's own name),
and nothing that says the value stays (a question, a hypothesis, a plan given up, a temporary
arrangement, an addition, someone else's change, a reference to long ago). A stored fact is the
one it replaces when the clause names its value, or shares its topic (the thing the slot is
about: a router, a partner, a bank), or, failing both, when their embeddings are close; never
when the shared word is only the owner of a part ("the router's firmware", "the batteries in the
thermostat").
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory_app.consolidation.extractors import speech
from memory_app.consolidation.extractors.base import Episode, FactCandidate
from language.temporal import MONTHS, with_dates

NATURAL, HARSH = "natural", "harsh"

# The things a single-valued slot is about, each with the words that name it. A clause and a fact
# that name the same topic speak of the same slot.
TOPICS: dict[str, frozenset[str]] = {name: frozenset(words.split()) for name, words in {
    "work": "job jobs work employer company firm office contract agency notice employed career workplace "
            "promoted promotion title role depot shifts full-time part-time",
    "occupation": "teacher nurse developer engineer analyst manager photographer driver student postman "
                  "barista auditor assistant midwife editor lead lawyer solicitor chef plumber electrician "
                  "accountant paramedic freelancer freelance retired qualified",
    "home": "live lives living lived home house flat apartment address halls place based cottage terrace "
            "moved move rent rented street road",
    "partner": "husband wife boyfriend girlfriend partner fiance fiancé fiancee married single seeing divorced "
               "spouse dating together marriage",
    "dentist": "dentist", "doctor": "doctor gp surgery", "manager": "manager", "boss": "boss",
    "landlord": "landlord letting lettings", "flatmate": "flatmate roommate housemate",
    "childcare": "childminder nanny nursery babysitter", "cleaner": "cleaner",
    "emergency_contact": "emergency",
    "pet": "pet pets dog dogs cat cats rabbit rabbits parrot hamster kitten puppy pup budgie greyhound collie "
           "spaniel beagle terrier tabby guinea",
    "phone": "phone mobile smartphone iphone android handset",
    "number": "number",
    "car": "car cars drive drives vehicle lease",
    "router": "router wifi broadband mesh",
    "thermostat": "thermostat setpoint heating",
    "speaker": "speaker speakers echo",
    "doorbell": "doorbell chime",
    "lock": "lock",
    "tv": "tv television",
    "laptop": "laptop computer",
    "camera": "camera",
    "hub": "hub bridge bulbs lights lighting",
    "temperature": "degrees temperature setpoint",
    "alarm": "alarm",
    "quiet": "quiet disturb",
    "hot_water": "water boiler",
    "language": "language english spanish italian french german japanese mandarin portuguese welsh arabic korean "
                "russian greek dutch",
    "email": "email inbox",
    "channel": "email text texts sms whatsapp calls call post letters message contact reach",
    "landline": "landline",
    "newsletter": "newsletter marketing",
    "diet": "eat eating diet vegan vegetarian pescatarian keto gluten lactose dairy meat coffee decaf sugar salt "
            "food restrictions dietary",
    "school": "school primary academy secondary nursery reception university uni college course studying "
              "student degree mba diploma",
    "hobby": "hobby sport play playing football running run cycling swimming gym workouts choir sing yoga "
             "climbing climb boulder guitar cello piano instrument learning gaming woodworking pottery tennis padel",
    "internet": "internet broadband fibre",
    "energy": "energy gas electric electricity supplier",
    "bank": "bank account salary",
    "network": "network sim contract",
    "insurance": "insurance",
    "streaming": "streaming netflix subscription",
    "gym": "gym membership",
    "medication": "take taking medication medicine mg mcg micrograms dose tablet tablets pill pills inhaler prescription",
    "vision": "glasses varifocals lenses",
    "smoking": "smoke smoking cigarettes",
}.items()}
_TOPIC_OF: dict[str, set[str]] = {}
for _name, _words in TOPICS.items():
    for _word in _words:
        _TOPIC_OF.setdefault(_word, set()).add(_name)

# A thing of the speaker's put away or given back ("the Dell went back to IT", "the Nest Minis are in
# a box", "the landline's been disconnected"): its value ended.
_DISPOSED = (r"(?:went|gone|was sent|were sent|got sent|been sent) back|(?:is|are|'s|'re|sits|sitting|went|gone|"
             r"been put|put) (?:in|into) (?:a|the) (?:box|loft|drawer|cupboard|attic|storage)|(?:been|was|were|got) "
             r"(?:disconnected|returned|recycled|given away)")
# A new thing got with its value named after it ("I've got a new number: 07700 900456", "got a new
# phone, a Pixel 8"): a replacement told. "New" alone ("a new hobby", "my new SO") is no cue.
_GOT_NEW = (r"(?:got|get|getting|'ve got|have got|bought|picked up) (?:a|my) (?:brand[ -])?new(?=\s+[\w-]+,?\s+"
            r"(?:a |an |the |called )?(?-i:[A-Z0-9]))")
# Verbs (and phrases) whose subject replaces, ends or starts something of its own.
_CUE = re.compile(r"\b(?:switch(?:ed|ing)?|chang(?:e|ed|ing)|mov(?:e|ed|ing)|swap(?:ped|ping)?|"
                  r"replac(?:e|ed|ing)|trad(?:e|ed|ing)(?: [\w-]+){0,4} in|upgrad(?:e|ed|ing)|quit(?:ting)?|"
                  r"l(?:eft|eave|eaving)|start(?:ed|ing)|join(?:ed|ing)|split up|broke up|pass(?:ed)? away|"
                  r"died|lost|adopt(?:ed|ing)|got rid of|sold|gave up|given up|give up|took up|taken up|"
                  r"retir(?:e|ed|ing)|relocat(?:e|ed|ing)|transferr(?:ed|ing)|closed|cancell?ed|dropped|"
                  r"rehom(?:e|ed)|port(?:ed|ing)|stopped|went (?:over|vegan|vegetarian|pescatarian|back)|"
                  r"gone (?:in-house|vegan|vegetarian)|became|become|turned (?:it |the \w+ )?(?:down|up)|"
                  r"lowered|raised|reset|increased|decreased|went up|go(?:es)? up|went down|promoted|"
                  r"got married|married|divorced|proposed|engaged|graduated|retrained|handed in|"
                  r"wrapped up|written off|died|finished|ended|took (?:me|us) on|put (?:me|us|the \w+ family) on|"
                  r"no longer|not (?:\w+ ){0,4}any ?more|don't (?:\w+ ){0,4}any ?more|instead|rather than|"
                  r"took (?:me|us) off|(?:haven't|hasn't) (?:needed|used|had|touched)|"
                  r"from now on|going forward|now that|ever since|these days|nowadays|back (?:on|with)(?=\s+(?-i:[A-Z]))|"
                  r"used to\b.*\bnow|\bnow\b|moved on|" + _GOT_NEW + r"|reduc(?:e|ed|ing)|cut(?:ting)? (?:down|back) on|" + _DISPOSED + r")\b",
                  re.I)
# Cues that end the value without naming the next one.
_ENDS = re.compile(r"\b(?:quit|left|leave|moved out|split up|broke up|pass(?:ed)? away|died|lost|got rid of|sold|gave up|"
                   r"given up|retired|closed|cancell?ed|dropped|rehomed|stopped|no longer|any ?more|written off|"
                   r"wrapped up|ended|divorced|handed in|" + _DISPOSED + r")\b", re.I)
_CORRECTION = re.compile(r"^(?:\W*)(?:sorry|oops|correction|small correction|my mistake|my bad|apologies|"
                         r"actually|no wait|wait)\b|\bi (?:meant|mean)\b|\b(?:typed|gave you|got) (?:that|the) "
                         r"wrong\b|\bwrong (?:drug|number|name|one)\b|\bi said \w+.{0,30}\b(?:but|meant|actually)\b|"
                         r"\bcorrection\b|\bmistake\b|\bmix(?:ed)? (?:them|it) up\b|\bmuddle", re.I)
_BACK_TO = re.compile(r"(?i:\b(?:(?:i'm|i am|we're|we are|went|gone|going|switched|moved|am|are|is|'s)\s+)?back "
                      r"(?:on|with|to|at|in)\s+)"
                      r"(?:the\s+|my\s+|our\s+)?[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*(?!'s)\b")
_MEANT = re.compile(r"\b(?:i meant|i mean|i said|mistake|wrong|correction|typo)\b", re.I)
_QUESTION_REQUEST = re.compile(r"^(?:can|could|would|will) you (?:please )?(?:note|make|update|change|switch|set|"
                               r"put|record|take|mark|move|use)\b", re.I)
# "may" as the month ("in May", "since May", "May 2025") is no hypothesis.
_HYPOTHETICAL = re.compile(r"\b(?:might|(?<!\bin )(?<!\bof )(?<!since )(?<!last )(?<!next )(?<!early )(?<!\blate )"
                           r"(?<!\bmid )(?<!\bby )(?<!from )(?<!until )(?<!\bend )may(?!\s+\d)|could|would|maybe|perhaps|if|thinking (?:about|of)|think about|"
                           r"considering|one day|someday|some day|plan(?:ning)? to|hop(?:e|ing) to|"
                           r"want(?:s)? to|wanna|'d (?:love|like|want)|in case)\b", re.I)
_GIVEN_UP = re.compile(r"\b(?:was|were) going to\b|\bnearly\b|\balmost\b|\bthought about\b|\blooked at\b|"
                       r"\bturned (?:it|them) down\b|\bdecided to stay\b|\bstay(?:ing)? put\b|\bwe're staying\b|"
                       r"\bi'm staying\b|\bkeep(?:ing)? (?:it|him|her|them|rosa|\w+) ?$|\bkept it\b|\bsticking with\b|"
                       r"\bstick with\b|\bgave up, back\b|\bback to normal\b|\bno change\b|\b(?:didn't|did not|"
                       r"haven't|have not|hasn't|has not) changed?\b|\bwe didn't\b", re.I)
_TEMPORARY = re.compile(r"\b(?:for (?:a|the|two|three|four|a couple of|a few|\d+) (?:days?|weeks?|nights?|months?|"
                        r"terms?|weekend)|just for|for tonight|for saturday|for the week|till|until|for now|"
                        r"this week|next week|tomorrow|while (?:the|my|our|his|her|dr|mr|mrs)\b|"
                        r"(?:back|be back) (?:on|in|at|to)\b.{0,40}\b(?:when|after|then)\b|"
                        r"then back\b|back (?:in|to) \w+ after|temporar|locum|covering|seconded|fostering|"
                        r"hire car|on loan|borrowed|on holiday|away on|is away|are away|at the repair|"
                        r"went back for repair|in the garage)\b", re.I)
# Content words too common to name a value on their own.
_GENERIC = frozenset("""work home house place time day days week weeks month months year years people person
thing things stuff way lot bit kind sort part end start now today use used using need needs going news""".split())
_TEMPORARY_SENTENCE = re.compile(r"\b(?:all this week|this week|for a bit|for now|until|till|just for)\b", re.I)
_STILL_AT_END = re.compile(r"\bstill\b[^,;]*[.!]?$", re.I)
_VERB_FIRST = re.compile(r"^(?:gave|traded|upgraded|replaced|renewed|changed|sold|swapped|switched|moved|quit|left|"
                         r"started|got|had|went|dropped|cancell?ed|finally|been)\b", re.I)
_ADDITION = re.compile(r"\b(?:a second|another|one more|also|as well|on top of|alongside|added|add|in addition|extra|"
                       r"backup|as a second)\b|\bjoin(?:ed|ing)? (?:\w+ ){0,4}(?:group|club|program|programme|course|"
                       r"class|classes|community|meetup|society|network|forum)\b", re.I)
_LONG_AGO = re.compile(r"\b(?:years ago|back when|when i was|at uni\b|as a kid|before \w+ i used|"
                       r"used to\b(?!.*\bnow\b)|never again)\b", re.I)
_FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|we'd|us|our|ours)\b", re.I)
_FIRST_OBJECT = re.compile(r"\b(?:me|my|mine|us|our|ours)\b", re.I)
_THIRD_POSSESSIVE = re.compile(r"\b(?:his|her|their|its)\b", re.I)
_PERSON_NOUNS = frozenset("""husband wife partner boyfriend girlfriend son daughter sister brother mum mom dad father
mother nephew niece cousin friend mate neighbour neighbor colleague boss manager parents kids children child uncle
aunt grandma grandad grandpa granddad fiance fiancé fiancee family""".split())
_CLAUSE_SPLIT = re.compile(r"(?:,\s*|\s+)(?:but|so|and then|which|whereas)\s+|;\s*|:\s+|\s+-\s+|—", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]*|\d+(?:[.:]\d+)?(?:mg|am|pm|kwh)?", re.I)
_STOP = frozenset("""before after a an the and or but so to of in on at by for with from into over up down off out about as is are
was were be been being am i me my mine we us our ours you your he him his she her they them their it its this that
these those there here what which who whom whose when where why how not no nor too very just really still now
then than also again ever never always all any some more most much many one two three four five six seven eight
nine ten new old last next first week weeks month months year years day days today yesterday tomorrow morning
night evening time since ago back have has had do does did done get got getting go going went gone make made
say said tell told know think thought like love good great nice lovely best better well sorry actually finally
instead rather these days anymore any more longer its it's i'm i've we're we've that's there's he's she's
they're don't didn't doesn't isn't wasn't can't won't couldn't wouldn't shouldn't please thanks thank oh hey hi
yes yeah okay ok big little bit lot lots own way thing things""".split())


@dataclass(frozen=True)
class ChangeReading:
    """A clause that reports a change of the speaker's own value.

    ``clause``: the words of the change; ``kind``: natural or harsh; ``ends``: the cue ends the
    old value ("quit", "no longer") so the clause needs no new value of its own; ``other_subject``:
    the clause's subject is someone else ("my wife moved our energy"): it counts only when the
    thing changed is the speaker's (a first-person object) or is the stored value itself ("Frank
    passed away").
    """

    sentence: str
    clause: str
    kind: str
    cue: str
    ends: bool
    other_subject: str | None
    first_object: bool
    subject_kind: str | None = None  # "person" | "thing" | None (the speaker)
    request: bool = False  # the clause asks for the change ("Please change the schedule to ...")


def words_of(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


# "Moved the couch into the back room", "moving my desk upstairs": an object moved within a home;
# only a move of the household ("we moved to Leeds", "moved house", "moved the family") is about a home.
_OBJECT_MOVED = re.compile(r"\bmov(?:e|es|ed|ing)\s+(?=(?:the|my|our|his|her|their|a|an|some|all|that|this|these|"
                           r"those|it|them)\b(?!\s+(?:whole\s+)?(?:house|home|flat|apartment|place|address|in|out|away|family|kids|"
                           r"children)\b))",
                           re.I)


# "Work" as effort ("the hard work starts", "so much work on my shop", "working on something
# complicated") names no job, and "together" names a couple only as one ("we've been together six
# years", "no longer together"), not time spent with others ("a great time together") or a move.
_EFFORT_WORK = re.compile(r"\b(?:hard|a lot of|lots of|so much|too much|much|more|extra|such|real|all the|enough|"
                          r"tough|heavy|put in the|putting in the)\s+work\b(?!\s+(?:for|at|as)\b)|"
                          r"\bwork(?:s|ed|ing)?\s+(?:hard|out|through|towards?|on (?:something|it|this|that|stuff|"
                          r"things|(?:my|our|his|her|their|a|the|some|an) (?!own\b)(?:new |big |side |little )?"
                          r"(?:project|projects|business|biz|idea|ideas|skills|game|games|music|art|book|novel|"
                          r"garden|house|car|routine|plan|plans|app|website|site|stuff|thing|things|moves|"
                          r"choreography|assignment|code|coding|portfolio|craft|relationship|health|fitness)\b))",
                          re.I)
_COUPLE = re.compile(r"\b(?:are|were|'re|been|being|got|get|gets|getting|back|stay|stayed|staying|still|longer|not|"
                     r"be|is|live|lives|living|lived)\s+together\b|\btogether\s+(?:for|since)\b", re.I)


def _uncoupled(text: str) -> str:
    """``text`` without a "together" that names no couple."""
    spans = [m.span() for m in _COUPLE.finditer(text)]
    return re.sub(r"\btogether\b", lambda m: m.group(0) if any(a <= m.start() < b for a, b in spans) else " ",
                  text, flags=re.I)


def topics_of(text: str) -> set[str]:
    found: set[str] = set()
    for word in words_of(_uncoupled(_EFFORT_WORK.sub(" ", _OBJECT_MOVED.sub(" ", text)))):
        for form in _forms(word):
            found |= _TOPIC_OF.get(form, set())
    return found


def _forms(word: str) -> tuple[str, ...]:
    word = word.removesuffix("'s").removesuffix("'")
    forms = [word]
    if word[:1].isdigit() and word.rstrip("0123456789.:"):  # "50mg": its unit
        forms.append(word.lstrip("0123456789.:"))
    if word.endswith("s") and len(word) > 3:
        forms.append(word[:-1])
    # "do-not-disturb" names its topic by its parts; "bouldering" and "climbs" by the verb ("climbing")
    if "-" in word:
        forms += [part for part in word.split("-") if len(part) > 2]
    if word.endswith("ing") and len(word) > 6:
        forms.append(word[:-3])
    elif word.endswith("s") and len(word) > 4 and not word.endswith("ss"):
        forms.append(word[:-1] + "ing")
    return tuple(forms)


# A question tagged on to a statement ("we got married in June - what about you?") asks about the
# listener; the statement before it still tells.
_TAG_QUESTION = re.compile(r"(?:\s+[-–—]\s*|,\s*|\.\s*)(?:how|what) about you\??\s*$|,\s*(?:right|you know)\?\s*$",
                           re.I)


def _is_question(sentence: str) -> bool:
    s = _TAG_QUESTION.sub(".", sentence.strip())
    if not s.endswith("?"):
        return False
    return not _QUESTION_REQUEST.match(s)


def _subject(clause: str, self_names: frozenset[str]) -> tuple[str | None, str | None]:
    """(the clause's subject when it is someone or something other than the speaker: a person
    noun ("my sister", "Cara's brother", "his neighbour's collie"), a name that is not the
    speaker's, or a thing ("the bakery", "the dose"); and which of "person" or "thing" it is)."""
    words = words_of(clause)
    if not words:
        return None, None
    first_word = words[0]
    if first_word in ("i", "i'm", "i've", "i'd", "i'll", "we", "we're", "we've", "we'd", "we'll"):
        return None, None
    if _WITH_ME.match(clause.strip()):
        return None, None  # "my wife and I switched": the speaker is one of the subjects
    if first_word.removesuffix("'s") in self_names:
        if first_word.endswith("'s") and words[1:2] and words[1] in _PERSON_NOUNS:
            return " ".join(words[:2]), "person"  # "Zofia's husband" is her husband, not her
        return None, None
    if first_word in ("my", "our", "his", "her", "their"):
        noun = next((w for w in words[1:4] if w not in ("best", "old", "new", "little", "big", "older",
                                                         "younger", "late")), "")
        if noun.removesuffix("'s") in _PERSON_NOUNS:
            return " ".join(words[:2]), "person"
        return (None, None) if first_word in ("my", "our") else (" ".join(words[:2]), "person")
    if first_word in ("the", "they"):
        if first_word == "they":
            return None, None
        # the whole noun phrase: "the weekday alarm is 5:45" is about the alarm
        phrase = list(itertools.takewhile(lambda w: w not in _STOP and not _is_verb_form(w), words[1:4]))
        return " ".join(words[: 1 + max(1, len(phrase))]), "thing"
    if re.match(r"^[A-Z][a-z]+(?:'s)?\b", clause.strip()) and first_word not in _STOP \
            and not _is_verb_form(first_word):
        if first_word.endswith("'s") and words[1:2] and words[1] in _PERSON_NOUNS:
            return " ".join(words[:2]), "person"
        return first_word.removesuffix("'s"), "person"
    return None, None


_WITH_ME = re.compile(r"^(?:(?:my|our) )?[\w']+(?: [\w']+)? and (?:i|me)\b", re.I)
_REPORTED = re.compile(r"^(?!i\b)(?!we\b).*?\b(?:mentioned|says|said|told me|reckons|tells me)(?: that)?\s+", re.I)


def change_read(sentence: str, *, self_names: Iterable[str] = (), harsh_context: bool = False
                ) -> ChangeReading | None:
    """The change ``sentence`` reports about the speaker (named ``self_names`` when it speaks of
    them in the third person), or None. ``harsh_context``: an earlier sentence of the same turn
    was a correction ("Sorry, I gave you the wrong number. It's 41, not 14.")."""
    names = frozenset(n.lower() for n in self_names if n)
    text = sentence.replace("’", "'").strip()
    if not text or _is_question(text):
        return None
    # "Actually I'm back on Virgin Media": a return to an earlier value told, not a correction of what was said
    correction = bool(_CORRECTION.search(text)) and not (_BACK_TO.search(text) and not _MEANT.search(text))
    # "X, not Y" with no word of time corrects what was said; with "now" it is a change.
    contrast = re.search(r",\s+not\s+(?!just\b|only\b|merely\b|simply\b|least\b)(?:a |an |the |my )?\w", text) \
        is not None and not re.search(
        r"\b(?:now|new|these days|from now on|any ?more|no longer)\b", text, re.I)
    harsh = correction or harsh_context or (contrast and not _CUE.search(text.split(", not")[0]))
    if not harsh and (_GIVEN_UP.search(text) or _HYPOTHETICAL.search(_without_requests(text))
                      or _LONG_AGO.search(text) or _TEMPORARY_SENTENCE.search(text)):
        return None
    subject: tuple[str | None, str | None] = (None, None)
    for clause in _clauses(_REPORTED.sub("", text)):
        core = _LEAD.sub("", clause)  # "now we're with Hyperoptic": the subject follows the adverb
        own = _subject(core, names)
        if own != (None, None) or _opens_with_subject(core, names):
            subject = own  # a clause with no subject of its own ("and started at X") keeps the last one
        if harsh:
            cue = _CORRECTION.search(text) or _CUE.search(clause)
            if not re.search(r"\bnot\b|\bi meant\b|\bit's\b|\bis\b|\bare\b|\bam\b|'m\b|'s\b", clause, re.I):
                continue
        else:
            cue = _news_cue(clause)
            if cue is None or _TEMPORARY.search(clause) or _ADDITION.search(clause):
                continue
            if _NEGATED.search(clause[: cue.start()]) and not _ENDS.search(cue.group(0)[-12:]) \
                    or _NEGATED_END.search(clause):
                continue  # "I won't quit", "never gave up": the value stays
            if cue.group(0).lower() in ("now", "new") and _ADDITION.search(text):
                continue  # "we adopted a second cat, so now there are two": the now of an addition
            if re.search(r"\bswitch(?:ed|ing)? (?:\w+ ){0,3}(?:off|on)\b|\b(?:turn(?:ed)?) \w+ off\b", clause, re.I):
                continue  # switching a thing off and on again changes nothing
            if _PUT_SOMEWHERE.search(clause) and re.match(r"l(?:eft|eav)", cue.group(0), re.I):
                continue  # "I left my phone at the office": put somewhere, not given up
            if _MISHAP_ENDED.search(clause):
                continue  # "I don't drop my phone any more": a mishap stopped, the phone stays
            if _MORE_OF_THE_SAME.search(clause) and not _ENDS.search(clause):
                continue  # "ever since the half I've been even keener on running": the same value, more so
        other, what = subject
        if harsh or (other and what == "person" and re.search(rf"^\W*{re.escape(other)}\s*(?:is|'s|are|was)\b", clause.lower())
                     and not _BACK_TO.search(clause)):  # "my brother is back with EE": his return
            other, what = None, None  # "my partner is Joan, not Jon": the speaker's own value, restated
        about_self = harsh or bool(_FIRST.search(text)) or any(w.removesuffix("'s") in names for w in words_of(text)) \
            or _VERB_FIRST.match(text) is not None
        if not about_self and what is None:
            continue
        object_part = clause
        if other:
            object_part = re.sub(rf"^\W*{re.escape(other)}", "", clause.lower().replace("’", "'"))
        first_object = bool(_FIRST_OBJECT.search(object_part)) or any(
            w.removesuffix("'s") in names and w.endswith("'s") for w in words_of(object_part))
        if what == "thing" and first_object:
            what, other = None, None  # "the company relocated me": the change is the speaker's
        if what == "person" and _THIRD_POSSESSIVE.search(object_part) and not first_object:
            continue  # "my husband changed his alarm": his change, not the speaker's
        return ChangeReading(sentence=text, clause=clause, kind=HARSH if harsh else NATURAL,
                             cue=cue.group(0).lower() if cue else "", ends=bool(_ENDS.search(clause)),
                             other_subject=other, first_object=first_object, subject_kind=what,
                             request=_asks_for(core, sentence=text))
    return None


# A cue in a clause of background ("since I lost my job, ...", "'cause we moved") tells what
# happened before the news, and a "now" after a span ("seven years now", "especially now") tells
# how long a value has held: neither reports a change.
_BACKGROUND = re.compile(r"(?i:\b(?:since|because|'cause|cause|after|when|as|once))\s+"
                         r"(?:(?i:(?:(?:my|our)\s+)?\w+\s+and\s+i|i|we|he|she|they)\b|[A-Z][a-z]+)\s+(?:\w+\s+)?$")
_SPAN_NOW = re.compile(r"\b(?:years?|months?|weeks?|days?|while|ages|especially|right|even|by)\s+$", re.I)


def _news_cue(clause: str) -> re.Match[str] | None:
    """The first cue of ``clause`` that is not background or a span (see ``_BACKGROUND``), nor a
    participle that only describes ("shows time changing lives"), nor an "ever since" that ends the
    clause ("hooked ever since": how long it has held)."""
    for cue in _CUE.finditer(clause):
        before, word = clause[: cue.start()], cue.group(0).lower()
        if _BACKGROUND.search(before) or (word == "now" and _SPAN_NOW.search(before)):
            continue
        if word.endswith("ing") and before.strip() and not _AUX_BEFORE.search(before):
            continue
        if _TALKED_ABOUT.search(before) and (word.endswith("ing") or before.lower().endswith(("getting ", "being "))):
            continue
        if word == "ever since" and not clause[cue.end():].strip(" .,!"):
            continue
        if _CUE_AS_NOUN.search(before) and word in ("move", "change", "switch", "swap", "upgrade", "start") \
                and not re.search(r"\bmade\s+(?:\w+\s+){0,2}$", before, re.I):
            continue  # "a bold move", "keen to make a change": a noun, no change told ("made the switch" is one)
        return cue
    return None


_CUE_AS_NOUN = re.compile(r"\b(?:a|an|the|this|that|what|such|one|big|huge|small|major|nice|good|great|new)\s+"
                          r"(?:\w+\s+)?$", re.I)
_AUX_BEFORE = re.compile(r"(?:\b(?:am|is|are|was|were|be|been|'m|'re|'s|i|we|me|us|of|about|on)\s+(?:\w+\s+)?$)", re.I)
# A cue as a gerund after a preposition ("excited about getting married", "tired of switching
# trains") names a change talked about, not one that happened.
_TALKED_ABOUT = re.compile(r"\b(?:about|of|on|for|from|into|without|at)\s+(?:getting\s+|being\s+)?$", re.I)


def _names_a_thing(word: str) -> bool:
    """A shared plain word that can name a value: a noun that is no adjective or adverb ("choir",
    "parents"), or a word WordNet does not know (a brand, a drug); not "hard", "lately", "bought"."""
    noun = word in _wordnet_nouns() or _singular(word) in _wordnet_nouns()
    if noun:
        return word not in _wordnet_other()
    return not (_is_verb_form(word) or word in _wordnet_other())


@functools.cache
def _wordnet_other() -> frozenset[str]:
    words: set[str] = set()
    for part in ("adj", "adv"):
        with open(speech._wordnet_dir() / f"index.{part}", encoding="utf-8") as fh:
            words |= {line.split(" ", 1)[0] for line in fh if not line.startswith(" ")}
    return frozenset(words)


_MISHAP_ENDED = re.compile(r"\b(?:don't|doesn't|do not|does not|no longer|not|never)\s+(?:\w+\s+)?(?:drop|lose|break|"
                           r"forget|miss|burn|spill|crash|smash|scratch|crack|oversleep|trip)\w*\b", re.I)
# A negation just before a cue keeps the value ("won't quit", "not gonna give up", "never moved").
# A degree of the same value ("even keener on running", "more into cycling than ever"): it holds.
_MORE_OF_THE_SAME = re.compile(r"\b(?:keener|fonder|more (?:into|keen on|serious about|hooked on)|more than ever|"
                               r"(?:love|enjoy|like)s? it (?:even )?more)\b", re.I)
_NEGATED = re.compile(r"\b(?:won't|will not|wouldn't|never|not gonna|not going to|didn't|did not|can't|cannot|"
                      r"couldn't|don't|do not|doesn't|haven't|hasn't|have not|has not)\s+(?:\w+\s+){0,2}$", re.I)
_NEGATED_END = re.compile(r"\b(?:won't|will not|never|not gonna|not going to|can't)\s+(?:\w+\s+){0,2}"
                          r"(?:quit|give up|leave|stop|move)\b", re.I)
_LEAD = re.compile(r"^(?:(?:now|so|then|today|finally|actually|anyway|these days|nowadays|since then|at last)\b,?\s*)+",
                   re.I)


def _opens_with_subject(clause: str, names: frozenset[str]) -> bool:
    first = words_of(clause)[:1]
    return bool(first) and (first[0] in ("i", "i'm", "i've", "we", "we're", "we've", "it", "it's", "they", "he",
                                         "she", "he's", "she's", "there")
                            or first[0].removesuffix("'s") in names)


_ASKS_FOR = re.compile(r"^\W*(?:(?:from now on|going forward),?\s+)?(?:please\b|(?:can|could|would|will) you\b)", re.I)


def _asks_for(clause: str, *, sentence: str) -> bool:
    """A clause that asks the listener for the change ("Please change the weekday schedule to 21",
    "Can you switch my ...", "Change it to 21 please"), not one that reports it."""
    return _ASKS_FOR.match(clause) is not None or (
        re.search(r"\bplease\b", sentence, re.I) is not None and speech.is_imperative(clause.lstrip()))


def _without_requests(text: str) -> str:
    # "Can you note that ..." and "could you make ..." ask the agent to record, not whether to change.
    return _QUESTION_REQUEST.sub("", text)


def _clauses(text: str) -> list[str]:
    text = re.sub(r"(\bnew [\w-]+):\s+", r"\1 ", text)  # "a new number: 07700 900456" is one clause
    return [p.strip(" ,.!") for p in _CLAUSE_SPLIT.split(text) if p and p.strip(" ,.!")]


@functools.cache
def _wordnet_nouns() -> frozenset[str]:
    with open(speech._wordnet_dir() / "index.noun", encoding="utf-8") as fh:
        return frozenset(line.split(" ", 1)[0] for line in fh if not line.startswith(" "))


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _is_verb_form(word: str) -> bool:
    lemmas, forms = speech._verbs()
    w = word.lower()
    return w in forms or (w.endswith("ed") and (w[:-2] in lemmas or w[:-1] in lemmas)) or (
        w.endswith("ing") and (w[:-3] in lemmas or w[:-3] + "e" in lemmas))


def _noun_only(word: str) -> bool:
    """A word WordNet knows as a noun and never as a verb ("batteries", "desks", "firmware"): the
    head of a noun phrase, not a verb or an adverb."""
    w = _singular(word.lower())
    lemmas, _ = speech._verbs()
    return w not in _STOP and w in _wordnet_nouns() and w not in lemmas and word.lower() not in lemmas


@dataclass(frozen=True)
class StoredFact:
    """A current fact of the speaker as the linking sees it: its id, text, when it became true
    (ISO date or None) and its cosine with the change's sentence (0 when unknown)."""

    id: str
    text: str
    cosine: float = 0.0
    valid_from: str | None = None
    topics: tuple[str, ...] = ()  # topics it inherits from the fact it replaced (its chain's slot)
    slot: str | None = None  # the extractor's slot, when it gave one


@dataclass(frozen=True)
class Link:
    fact: StoredFact
    by: str  # "value" (the clause names the fact's value) | "topic" | "vector"
    shared: tuple[str, ...]
    score: float


def _better(best: Link | None, link: Link) -> Link:
    """The link of the higher score; the one found first on a tie."""
    return link if best is None or link.score > best.score else best


def _content(text: str, *, self_names: frozenset[str]) -> set[str]:
    # ("James'": the speaker's own name in the possessive is no value either)
    return {w.removesuffix("'s").removesuffix("'") for w in words_of(text)
            if w not in _STOP and w.removesuffix("'s").removesuffix("'") not in self_names
            and w.removesuffix("'s") != "user" and len(w) > 1}


def _names(text: str, *, self_names: frozenset[str]) -> set[str]:
    """Capitalised words and numbers that are not the first word of a sentence: a value's names."""
    out = set()
    # An hour keeps its half of the day: "6pm" is no name of "6am".
    for m in re.finditer(r"(?<![.!?]\s)(?<!^)\b([A-Z][A-Za-z'’\-]+|[a-z]+[A-Z]\w*|\d+(?:[.:]\d+)?(?:\s?[ap]m\b)?)", text):
        word = m.group(1).lower().replace("’", "'").removesuffix("'s").replace(" ", "")
        if word not in _STOP and word.removesuffix("'") not in self_names and word != "user" and word != "i":
            out.add(word)
    return out


def _opening_names(text: str, *, self_names: frozenset[str]) -> set[str]:
    """The capitalised first word of each sentence of ``text`` (a name only if written so elsewhere)."""
    out = set()
    for m in re.finditer(r"(?:^|[.!?;]\s+)([A-Z][A-Za-z'’\-]+)", text):
        word = m.group(1).lower().replace("’", "'").removesuffix("'s")
        if word not in _STOP and word not in self_names and word != "user":
            out.add(word)
    return out


def _part_only(clause: str, word: str, *, compound: bool = False) -> bool:
    """Whether every mention of ``word`` in ``clause`` names the owner of a part ("the router's
    firmware", "the batteries in the thermostat", "my email signature", "desks at the Infirmary"),
    not the thing itself."""
    low = clause.lower().replace("’", "'")
    mentions = list(re.finditer(rf"\b{re.escape(word)}(?:'s|s)?\b", low))
    if not mentions:
        return False
    for m in mentions:
        before, after = low[: m.start()], low[m.end():]
        following = re.match(r"\s+([a-z][a-z'-]*)", after)
        owner = low[m.start(): m.end()].endswith("'s") and following is not None and \
            following[1] not in _STOP and not _is_verb_form(following[1])
        # (the thing may carry words of its own: "the battery in the kitchen smoke alarm")
        held = re.search(r"\b([a-z][a-z'-]*)\s+(?:on|in|of|at|for)\s+(?:the|my|our|his|her|their)\s+"
                         r"(?:[a-z][a-z'-]*\s+){0,3}$", before)
        # a noun, or a word a determiner makes one ("the filter in the hood", "a new fuse in the plug")
        held_in = held is not None and (_noun_only(held[1]) or re.search(
            r"\b(?:the|a|an|new|its|my|our|their|his|her)\s+" + re.escape(held[0]) + "$", before) is not None)
        modifier = compound and following is not None and _noun_only(following[1]) and not re.match(r"\s+(?:one|now)\b", after)
        if not (owner or held_in or modifier):
            return False
    return True


def _modifiers(text: str, word: str, *, self_names: frozenset[str]) -> set[str]:
    """The content words just before the first mention of ``word`` in ``text`` ("weekday" and
    "heating" in "the weekday heating schedule"), up to two."""
    words = [w.removesuffix("'s") for w in words_of(text)]
    for n, w in enumerate(words):
        if w == word or _singular(w) == word:
            out: set[str] = set()
            for before in reversed(words[max(0, n - 2): n]):
                if before in _STOP or before in self_names or before == "user" or before[0].isdigit() \
                        or _is_verb_form(before):
                    break
                out.add(before)
            return out
    return set()


def _kinds_apart(sentence: str, fact: str, word: str, *, self_names: frozenset[str]) -> bool:
    """Whether the texts name ``word`` with no word before it in common ("the weekday schedule",
    "the weekend schedule"): two things of one kind, two slots."""
    a, b = _modifiers(sentence, word, self_names=self_names), _modifiers(fact, word, self_names=self_names)
    return bool(a) and bool(b) and not a & b


# (a time of day names a kind of thing: "morning alarms")
_KIND_STOP = _STOP - {"morning", "night", "evening"}


def _thing_words(text: str, word: str) -> set[str]:
    """The words between a determiner and ``word`` ("smoke" in "the smoke alarm", "loud" in "no loud
    alarms"): what kind of ``word`` the text names."""
    found = re.search(rf"\b(?:the|a|an|my|our|your|his|her|their|no|any|[a-z]+'s)\s+((?:[a-z][a-z'-]*\s+){{1,2}}?)"
                      rf"{re.escape(word)}(?:s|es)?\b", text.lower().replace("’", "'"))
    if found:  # (an owner is no kind: "the user's alarm")
        return {w for w in found[1].split() if not w.endswith("'s")} - _KIND_STOP
    # a kind named in the plural with no determiner ("can't stand loud alarms"), not a verb's object
    bare = re.search(rf"\b([a-z][a-z'-]*)\s+{re.escape(word)}(?:s|es)\b", text.lower().replace("’", "'"))
    if bare and bare[1] not in _KIND_STOP and _lemma(bare[1]) not in speech._verbs()[0]:
        return {bare[1]}
    return set()


def _things_apart(sentence: str, fact: str, word: str) -> bool:
    """Both texts name a kind of ``word`` and no word of it in common ("the smoke alarm", "no loud alarms")."""
    a, b = _thing_words(sentence, word), _thing_words(fact, word)
    return bool(a) and bool(b) and not a & b


# Cues that say only that something is new or begins ("now", "new", "started"): with nothing in
# common but the vector, a story, not a replaced value.
_WEAK_CUE = re.compile(r"now|new|these days|nowadays|ever since|now that|start(?:ed|ing)?|join(?:ed|ing)|"
                       r"finished|ended|chang(?:e|ed|ing)|became|become|took up|taken up|moved on|"
                       r"adopt(?:ed|ing)|lost|reset|give up|gave up|given up", re.I)
# A weak cue names the replacement when it sets the value to a new one ("changed do-not-disturb to
# 10pm", "reset the hot water to 55 degrees"), or when the speaker states the value it has now in the
# same clause ("these days I work for Loom Studio", "these days I'm into woodworking").
_NAMES_NEW = re.compile(r"\b(?:chang(?:e|ed|es)|reset|set|turned (?:\w+ )?(?:up|down))\b(?:\s+[\w'-]+){0,4}?\s+to\s+\w",
                        re.I)
_STATES_OWN_VALUE = re.compile(r"^(?:(?:these days|nowadays|now)\b,?\s+|(?:ever since|after|since|following) (?:[\w'-]+,?\s+){1,4}?)?"
                               r"(?:i|we)(?:'m|'re| am| are)?\s+(?:only |just |mostly )?"
                               r"(?:work(?:ing)? (?:for|at|as)|(?:am |are |'m |'re )?(?:into|with|on|at)|"
                               r"(?:live|drive|use|play|take|eat|drink|bank|need|go to|manage|wear)s?|do(?:ing)?|learn(?:ing)?|"
                               r"study(?:ing)?)\b", re.I)
_PAIR_CUE = re.compile(r"\b(?:got married|married|engaged|proposed|divorced|split up|broke up|moved out|"
                       r"no longer|passed away|died|retired|left)\b", re.I)


_HAS_NONE = re.compile(r"\b(?:(?:has|have|has got|have got) no|(?:doesn't|don't|does not|do not) (?:have|own) "
                       r"(?:any|an?)) (?P<what>[a-z]+(?: [a-z]+)?)", re.I)


def _lacks(fact: str) -> set[str]:
    """The topics a fact says the holder has none of ("Simon has no pets." → pet)."""
    return set().union(*(topics_of(m["what"]) for m in _HAS_NONE.finditer(fact)))


def _relocated(sentence: str, word: str) -> bool:
    """"moved the Eero up to the landing": the thing moved, it was not replaced."""
    return re.search(rf"\bmov(?:e|ed|ing) (?:the |my |our )?{re.escape(word)}\b(?! over)", sentence, re.I) is not None


def _still(sentence: str, words: set[str]) -> bool:
    """The last clause says the value still holds ("the thermostat's still on 20")."""
    last = _clauses(sentence)[-1] if _clauses(sentence) else sentence
    return re.search(r"\bstill\b", last, re.I) is not None and bool(set(words_of(last)) & words
                                                                    | {w.removesuffix("'s") for w in words_of(last)} & words)


# Where a clause names the value that went: after a verb of leaving or ending ("gave up the guitar",
# "left the fire service", "haven't needed the inhaler"), before "to" after "from" ("changed me from
# amlodipine to ramipril"), after "instead of". A verb ending in -ing after "no longer", "stopped",
# "quit" or "gave up" names an activity that went ("no longer driving deliveries").
_ENDED_OBJECT = re.compile(r"\b(?:quit|left|leave|leaving|gave up|given up|give up|giving up|stopped|sold|got rid of|"
                           r"dropped|cancell?ed|no longer|(?:haven't|hasn't|have not|has not) (?:needed|used|had|touched)|"
                           r"(?:don't|doesn't|do not|does not) (?:use|have|own|drive|take|drink|eat|play|wear|need|smoke|go to)|"
                           r"took (?:me|us|him|her) off|"
                           r"instead of|rather than|reduc(?:e|ed|ing)|cut(?:ting)? (?:down|back) on)\s+((?:[\w'-]+\s*){1,4})",
                           re.I)
# (not a span of the day: "from 8am to 6pm" names no old value)
_CLOCK_NEXT = r"(?!\d{1,2}(?:[:.]\d\d)?\s?[ap]m\b)"
_FROM_OLD = re.compile(r"\bfrom\s+" + _CLOCK_NEXT + r"((?:[\w'-]+\s+){0,3}?[\w'-]+)\s+(?:to|for)\b", re.I)
# "left my phone at work", "lost the keys in town": a thing put somewhere, not given up.
_PUT_SOMEWHERE = re.compile(r"\b(?:left|leave|leaving)\s+(?:(?:the|my|our|his|her|a|an)\s+)?[\w'-]+(?:\s+[\w'-]+)?\s+"
                            r"(?:(?:at|in|on|behind|with|outside)\s+(?!(?:the\s+|last\s+|this\s+)?(?:spring|summer|autumn|"
                            r"fall|winter|end|start|beginning|middle|past|week|month|year|weekend|morning|evening|"
                            + "|".join(MONTHS) + r"|\d))|upstairs|downstairs|there|here|behind)\b", re.I)
_SPAN_END = re.compile(r"\b(?:in|at|on|over|since|for|after|before|because|last|this|and|but|to|with|when|as|"
                       r"so|then|now|anymore|any)\b", re.I)
# A clause that names both the old value and the new one.
_NAMES_BOTH = re.compile(r"\b(?:instead of|rather than)\b|\bfrom\s+" + _CLOCK_NEXT + r"(?:[\w'-]+\s+){1,4}?(?:to|for)\b",
                         re.I)
_DULL_VERBS = frozenset("use have get go do make need be take".split())


def _lemma(word: str) -> str:
    lemmas, forms = speech._verbs()
    w = word.lower().removesuffix("'s")
    if w in forms:
        return forms[w]
    for cut, add in (("ing", ""), ("ing", "e"), ("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("d", "")):
        if w.endswith(cut) and len(w) > len(cut) + 2 and (stem := w[: -len(cut)] + add) in lemmas:
            return stem
    return w


def _replaced_value(clause: str, *, self_names: frozenset[str]) -> tuple[set[str], set[str]]:
    """(the content words naming the value ``clause`` says went, the lemmas of an activity that went)."""
    text = clause.replace("’", "'")
    if _PUT_SOMEWHERE.search(text):
        return set(), set()
    spans = [(m.group(1), not re.match(r"instead|rather", m.group(0), re.I)) for m in _ENDED_OBJECT.finditer(text)]
    spans += [(m.group(1), False) for m in _FROM_OLD.finditer(text)]
    words: set[str] = set()
    verbs: set[str] = set()
    for span, after_verb in spans:
        first = words_of(span)[:1]
        if first and first[0].endswith("ing") and _is_verb_form(first[0]):
            # an activity is the value ("quit smoking in March"), not what follows it
            if _lemma(first[0]) not in _DULL_VERBS:
                verbs.add(_lemma(first[0]))
            span = re.sub(r"^\W*[\w'-]+\s*", "", span)
        elif after_verb and first and (_is_verb_form(first[0]) or speech.lexicon().mostly_verb(first[0])):
            # "no longer live in Oxford": the value follows the verb and its preposition
            span = re.sub(r"^\W*[\w'-]+\s+(?:(?:in|at|on|for|with|to)\s+)?", "", span)
        span = _SPAN_END.split(span, maxsplit=1)[0]
        words |= {w for w in _content(span, self_names=self_names) if not _is_verb_form(w)}
    return words, verbs


def _agents(text: str, clause: str) -> set[str]:
    """The activities the fact's agent nouns name ("teacher": teach, "smoker": smoke, "driver": drive),
    each when the clause ends it as a whole: not with an object of its own ("stopped teaching my
    nephew to drive": one pupil, not the job)."""
    return {stem for w in words_of(text) if len(w) > 5 and w.endswith(("er", "or"))
            for stem in (w[:-2], w[:-1], w[:-3]) if stem in speech._verbs()[0]
            and not re.search(rf"\b{re.escape(stem[:-1] if stem.endswith('e') else stem)}\w*\s+(?:my|his|her|their|our|"
                              rf"your|the|a|an|him|them|me|us)\b", clause, re.I)}


def change_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                  min_cosine: float = 1.01, min_topic_cosine: float = 0.6, min_strong_topic_cosine: float | None = None,
                  told_at: str | None = None) -> Link | None:
    """The fact ``reading`` replaces among ``facts`` (the speaker's current facts near it), or None.

    By value: the sentence and the fact share a name (a capitalised word, a number) or a content
    word that is no topic word ("choir", "amlodipine"). By topic: they name the same topic and
    their cosine is at least ``min_topic_cosine``, or ``min_strong_topic_cosine`` (when given)
    for a cue that names a replacement ("switched", "moved to", "instead of"; not one that says only
    that something is new or begins, ``_WEAK_CUE``). By vector: the cosine alone, at ``min_cosine``
    or above. A clause whose subject is another person counts only when the fact names that person
    ("Frank passed away") or the clause has a first-person object ("my GP changed me"); a thing as
    subject ("the bakery closed") only by value. The new value must differ: a clause whose words
    all appear in the fact replaces nothing unless its cue ends the value ("quit Halden"). A change
    in natural phrasing (not a correction) told within ``SAME_SITTING`` of when the fact became
    (``told_at``, ``StoredFact.valid_from``) replaces nothing: the same talk told again."""
    names = frozenset(n.lower() for n in self_names if n)
    clause_words = _content(reading.clause, self_names=names)
    sentence_words = _content(reading.sentence, self_names=names)
    sentence_names = _names(reading.sentence, self_names=names)
    clause_topics = topics_of(reading.clause) | topics_of(reading.sentence)
    weak = _WEAK_CUE.fullmatch(reading.cue) is not None and not _NAMES_NEW.search(reading.clause) \
        and not _STATES_OWN_VALUE.search(reading.clause)
    topic_cosine = min_topic_cosine if min_strong_topic_cosine is None or weak else min_strong_topic_cosine
    replaced, replaced_verbs = _replaced_value(reading.clause, self_names=names)
    begun = _begun_phrase(reading.clause, reading.cue)
    begun_topics = topics_of(" ".join(begun)) if begun is not None else set()
    # "got married" grows a bond: it ends a stage of it ("new girlfriend", "engaged"), not a fact that
    # only shares its topic ("my partner is pregnant", "my partner's job")
    bond_grown = _BOND_NEWS.search(reading.clause) is not None and not reading.ends
    best: Link | None = None
    for fact in facts:
        if not holds_value(fact.text, self_names=names) or (
                reading.kind == NATURAL and _same_sitting(fact.valid_from, told_at)):
            continue
        fact_words = _content(fact.text, self_names=names)
        fact_names = _names(fact.text, self_names=names)
        fact_topics = topics_of(fact.text) | set(fact.topics)
        shared_names = {w for w in sentence_names & (fact_names | fact_words) if not w.isdigit() or w in fact_names}
        # A name that opens the sentence ("Frank passed away", "Vodafone was hopeless") is a name when
        # the fact writes it as one.
        shared_names |= _opening_names(reading.sentence, self_names=names) & fact_names
        # So is the one the clause is about when the fact opens on it too ("Biscuit passed away" and
        # "Biscuit is User's dog"): both sentences have it as their subject.
        if reading.subject_kind == "person" and _PAIR_CUE.search(reading.clause):
            shared_names |= {reading.other_subject or ""} & _opening_names(fact.text, self_names=names)
        # A thing the clause is about, named by the head of a name the fact holds ("the bakery closed
        # down" — "at the Lantern Bakery"), when its value ends.
        if reading.subject_kind == "thing" and reading.ends:
            shared_names |= set(words_of(reading.other_subject or "")[1:]) & fact_names - _GENERIC
        # a start shares a topic only through what was begun ("started a course", not the love it feeds)
        shared_topics = (begun_topics if begun is not None else clause_topics) & fact_topics
        # A plain word in common names a value only within a topic both speak of ("choir" in a
        # hobby); alone it is talk about the same things ("journey", "express").
        shared_words = {w for w in sentence_words & fact_words
                        if not _TOPIC_OF.get(w) and not _TOPIC_OF.get(_singular(w)) and w not in _GENERIC
                        and _names_a_thing(w)} if shared_topics else set()
        # The value the clause says was left or replaced ("gave up the guitar", "from amlodipine to",
        # "no longer driving") is the fact's own when the fact names it, topic word or not.
        ended = {w for w in replaced & fact_words if w not in _GENERIC}
        shared_words |= {w for w in ended if not _TOPIC_OF.get(w) and not _TOPIC_OF.get(_singular(w))}
        if replaced_verbs & ({_lemma(w) for w in words_of(fact.text)} | _agents(fact.text, reading.clause)):
            shared_words |= replaced_verbs
        shared_words = {w for w in shared_words if not _kinds_apart(reading.sentence, fact.text, w, self_names=names)}
        if begun is not None:
            # "started a course that feeds my love of cycling": only what was begun is a value replaced
            shared_words = {w for w in shared_words if w in begun or w in ended}
        shared_value = tuple(sorted(shared_names | shared_words))
        link: Link | None = None
        if shared_value:
            if all(_part_only(reading.sentence, w) or _relocated(reading.sentence, w) for w in shared_value):
                continue  # "the router's firmware", "moved the Eero upstairs": the thing itself stays
            person = set(words_of(reading.other_subject or "")) if reading.subject_kind == "person" else set()
            # "Diego and I swapped sides": the one acting with the speaker is not the value replaced
            person |= set(words_of(with_me[0].rsplit(" and ", 1)[0])) if (
                with_me := _WITH_ME.match(_LEAD.sub("", reading.clause.strip()))) else set()
            if person and not reading.first_object and not reading.ends and not _PAIR_CUE.search(reading.clause) \
                    and not set(shared_value) - person:
                continue  # "Tomasz replaced the shower head": the person stays who they are
            link = Link(fact=fact, by="value", shared=shared_value, score=2.0 + fact.cosine)
        elif shared_topics and (reading.subject_kind != "thing" or topics_of(reading.other_subject or "")):
            # A thing as subject counts when it names the topic: "the weekday alarm is 5:45 from now on".
            topic_words = [w for w in words_of(reading.sentence)
                           if (_TOPIC_OF.get(w.removesuffix("'s"), set()) | _TOPIC_OF.get(_singular(w), set()))
                           & shared_topics]
            if topic_words and all(_part_only(reading.sentence, w, compound=True) for w in topic_words):
                continue  # "the batteries in the thermostat": the thermostat stays
            if topic_words and all(_things_apart(reading.sentence, fact.text, _singular(w.removesuffix("'s")))
                                   for w in topic_words):
                continue  # "replaced the smoke alarm" and "wants no loud alarms": two kinds of alarm
            if replaced and not ended and not replaced_verbs & ({_lemma(w) for w in words_of(fact.text)}
                                                                 | _agents(fact.text, reading.clause)) \
                    and not topics_of(" ".join(replaced)) & fact_topics:
                continue  # "instead of my usual shooters" and "got into a new hobby": another value of the topic
            if _WEAK_CUE.fullmatch(reading.cue) and reading.kind == NATURAL and not reading.ends and not ended \
                    and not fact_names and not _lacks(fact.text) and topic_words \
                    and _begun_again(reading.clause, fact.text, shared_topics):
                continue  # "started a new diet", "now I'm on a diet" and "is on a diet": having one still holds
            # The thing that went named by its topic word ("gave up the guitar") needs no more than a cue
            # that names a replacement.
            named_ended = ended and min_strong_topic_cosine is not None and fact.cosine >= min_strong_topic_cosine
            # A fact of having none ("has no pets") is ended by any one of its topic that begins
            # ("adopted a greyhound"): a weak cue names the replacement there.
            threshold = min_strong_topic_cosine if min_strong_topic_cosine is not None and (
                _lacks(fact.text) & shared_topics) else topic_cosine
            if fact.cosine >= threshold or named_ended:
                link = Link(fact=fact, by="topic", shared=tuple(sorted(shared_topics)), score=1.0 + fact.cosine)
        if link is None and not shared_value and fact.cosine >= min_cosine and reading.subject_kind is None \
                and not _WEAK_CUE.fullmatch(reading.cue):
            link = Link(fact=fact, by="vector", shared=(), score=fact.cosine)
        if link is None:
            continue
        if bond_grown and link.by != "value":
            continue  # (``bond_target`` finds the stage it ends)
        if reading.request and link.by != "value" and not ended and not reading.ends:
            # a request names what it changes ("change my weekday schedule") or what goes ("rather than
            # email", "don't send me the newsletter any more"): a topic in common is another slot
            continue
        if reading.subject_kind == "person" and not reading.first_object and not (
                set(words_of(reading.other_subject or "")) & (fact_words | fact_names)):
            continue  # someone else's change of their own thing
        if link.by == "value" and _adds_beside(reading, set(link.shared)):
            continue  # "we adopted a puppy and Pip and Sorrel adore him": the ones named stay
        if link.by == "value" and reading.kind == NATURAL and _NAMES_BOTH.search(reading.clause) \
                and not set(link.shared) & (replaced | replaced_verbs) and set(link.shared) <= clause_words:
            continue  # "thrillers instead of biographies": the fact holds the new value, not the old
        # "back with EE" after "switched from EE to Three": the value the fact replaced, returned
        returned = _BACK_TO.search(reading.clause) is not None and bool(
            set(link.shared) & _replaced_value(fact.text, self_names=names)[0])
        if reading.kind == NATURAL and not reading.ends and not (clause_words - fact_words) and not returned:
            continue  # nothing new: the same value said again
        if reading.ends and reading.cue and re.search(rf"\b{re.escape(reading.cue)}\b", fact.text, re.I):
            continue  # the fact already tells the same end ("lost the job"): said again, nothing replaced
        if _still(reading.sentence, (fact_words | fact_names) - _GENERIC):
            continue  # "... but email is still the way to reach me"
        best = _better(best, link)
    return best


_BEGUN = re.compile(r"start(?:ed|ing)?|join(?:ed|ing)|took up|taken up", re.I)
_RELATIVE = re.compile(r"\s+(?:that|which|who|whose|where|because|to)\s+", re.I)


def _begun_phrase(clause: str, cue: str) -> set[str] | None:
    """The words of what a start cue (``cue``: "started", "joined", "took up") says was begun in
    ``clause``, up to a break or a relative clause ("a course | that feeds my love of cycling"),
    or None for another cue."""
    if not _BEGUN.fullmatch(cue) or (at := re.search(rf"\b{re.escape(cue)}\b", clause, re.I)) is None:
        return None
    phrase = _RELATIVE.split(_PHRASE_BREAK.split(clause[at.end():].strip(), maxsplit=1)[0], maxsplit=1)[0]
    return {_singular(w.removesuffix("'s")) for w in words_of(phrase)} | {w.removesuffix("'s") for w in words_of(phrase)}


def _adds_beside(reading: ChangeReading, shared: set[str]) -> bool:
    """An animal taken in ("adopted", ``reading.cue``) and the values shared with the fact named
    only outside the phrase of the one taken in: those named are beside it, not replaced by it."""
    cue = re.search(r"\badopt(?:ed|ing)\b", reading.clause, re.I)
    if cue is None or not re.fullmatch(r"adopt(?:ed|ing)", reading.cue):
        return False
    phrase = re.split(r"\band\b", _PHRASE_BREAK.split(reading.clause[cue.end():].strip(), maxsplit=1)[0], maxsplit=1)[0]
    return not shared & set(words_of(phrase))


def _begun_again(clause: str, fact: str, topics: set[str]) -> bool:
    """Every word of ``topics`` in ``fact`` is said in ``clause`` too, bare in the fact (no kind
    before it: "a diet", not "the keto diet"): what began is what the fact already holds."""
    held = [w for w in words_of(fact) if (_TOPIC_OF.get(w, set()) | _TOPIC_OF.get(_singular(w), set())) & topics
            and not _is_verb_form(w)]
    said = {_singular(w) for w in words_of(clause)}
    return bool(held) and all(_singular(w) in said and not _thing_words(fact, _singular(w)) for w in held)


# A fact that tells a hope, a promise or an opinion ("X hopes ...", "X will keep you updated", "X's
# goal is ...") holds no value a later change could replace.
_NO_VALUE = re.compile(r"\b(?:will|'ll|gonna|going to|hopes?|hoping|wants? to|wanted to|wishes|goal|dream|dreams|"
                       r"is sure|believes?|thinks?|thinking about|can't wait|looking forward|would|could|might)\b",
                       re.I)
_CHANGE_EVENT = re.compile(r"\b(?:switched|changed|moved|swapped|replaced|traded|upgraded|quit|left|started|"
                           r"transferred|retired|relocated|handed|took up|taken up|went (?:vegan|vegetarian|pescatarian|over to)|"
                           r"adopted|got married|married|split|broke up|divorced|sold|gave up|stopped|dropped|"
                           r"cancell?ed|hired|joined)\b", re.I)


def holds_value(fact: str, *, self_names: Iterable[str] = ()) -> bool:
    """Whether ``fact`` states something that holds (a value a change can replace): not a hope,
    promise or opinion, and not a one-off event in the past ("On 23 June X went to a workshop",
    "X met three new friends") unless that event was itself a change ("X moved to Leeds")."""
    if _NO_VALUE.search(fact):
        return False
    names = {n.lower() for n in self_names} | {"user", "others", "and"}
    words = words_of(fact)
    # the first word after the holder (and any adverbs) that is a verb form
    for word in words:
        if word.removesuffix("'s") in names or word in ("just", "recently", "finally", "also", "then", "lately",
                                                        "on", "in", "at", "the", "of", "week", "weekend") \
                or word[0].isdigit():
            continue
        if word in ("went", "met", "got", "made", "had", "did", "bought", "saw", "took", "tried", "visited",
                    "attended", "were", "was") or (word.endswith("ed") and _is_verb_form(word)):
            return _CHANGE_EVENT.search(fact) is not None
        if _is_verb_form(word) or word in ("is", "are", "has", "have", "'s", "lives", "works"):
            return True
    return True


SAME_SITTING = timedelta(hours=12)


def _same_sitting(first: str | None, then: str | None) -> bool:
    a, b = _when(first or ""), _when(then or "")
    return a is not None and b is not None and abs(b - a) < SAME_SITTING


@dataclass(frozen=True)
class Probe:
    """A candidate fact of a new episode together with the change its sentence reports."""

    candidate: FactCandidate
    reading: ChangeReading
    holder: str
    fulfilment: ChangeReading | None = None  # something done or given up (``fulfilment_read``, ``abandonment_read``)


_OPENER_WORD = re.compile(r"^\W*(?:actually|sorry|oops|well|so|ok|okay|oh|and|but|also|anyway)\b[,!.:]*\s+", re.I)


_THIRD_NEGATIVE = re.compile(r"\b(has|does|is|was)n't\b", re.I)


def _rendered(sentence: str, *, holder: str, family: bool, when: datetime | None) -> str:
    stripped = speech.strip_opener(sentence)
    if stripped and stripped[0].islower() and _is_verb_form(words_of(stripped)[0] if words_of(stripped) else ""):
        # "Actually, Arun is 8": the opener took the name with it (as in "Thanks, Caroline")
        stripped = _OPENER_WORD.sub("", sentence)
    statement = speech.third_person(stripped, name=holder, family=family)
    # "I haven't" rendered "hasn't" would name a word the turn never said: grounding reads "has not".
    statement = _THIRD_NEGATIVE.sub(lambda m: f"{m.group(1)} not", statement)
    if when is not None:
        statement = with_dates(statement, when=when)
    statement = statement.rstrip(" .!") + "."
    return statement[0].upper() + statement[1:]


# Verbs that state a value ("is", "has", "uses", "drives", "is with"), and the words of a fault.
_STATIVE = re.compile(r"\b(?:is|are|'s|'re|am|'m|has|have|'ve got|use|uses|drive|drives|take|takes|wear|wears|"
                      r"live|lives|work|works|bank|banks|pay for|runs? through|goes off|comes on|set to|set for)\b",
                      re.I)
_TROUBLE = re.compile(r"\b(?:keeps?|kept) \w+ing\b|\b(?:won't|isn't|doesn't|can't|stopped|broken|not working|"
                      r"offline|dropping|fails?|failing|error)\b", re.I)


_NO_SLOT_OPENERS = frozenset({"it", "it's", "its", "this", "that", "that's", "these", "those", "they", "they're",
                              "there", "there's", "here", "here's", "life", "life's", "thank", "thanks", "don't", "just"})


def _bare(sentence: str) -> str:
    """``sentence`` without its opener ("By the way, …") or a one-word interjection or name before a
    comma ("Gotcha, …", "Yep, …"), which say nothing of what it states."""
    return re.sub(r"^[\w']+[,!]\s+", "", speech.strip_opener(sentence))


def _slot_statement(sentence: str, *, self_names: frozenset[str]) -> bool:
    """A sentence that states a value of a topic about the speaker, in a form the statement layer
    skips ("The front door has a Yale smart lock.", "Internet's with TalkTalk", "Liam is a
    firefighter"): no question, no request, no "you", a topic word."""
    bare = _bare(sentence)
    first = words_of(bare)[:1]
    named = bool(first) and first[0].removesuffix("'s") in self_names
    if _is_question(sentence) or re.search(r"\b(?:you\w*|please)\b", sentence, re.I) or not (
            topics_of(sentence) or named):
        return False
    # Words to the listener ("Take a look at this.", "Keep up the great work.") and a general
    # remark opening on a gerund or a pronoun ("Taking time for yourself is…", "It's been a dream…"; a
    # noun in -ing, "The wedding…", "Morning runs…", is no gerund)
    # state no value of the speaker's world.
    if speech.is_request(bare) or (first and (first[0] in _NO_SLOT_OPENERS or (
            first[0].endswith("ing") and first[0] not in self_names and speech.lexicon().mostly_verb(first[0])))):
        return False
    if _HYPOTHETICAL.search(sentence) or len(_content(sentence, self_names=self_names)) < 2:
        return False
    if not _STATIVE.search(sentence) or _TROUBLE.search(sentence):
        return False  # an action or a fault ("I restarted the router") is procedure, not a value
    return bool(first) and (first[0] in ("the", "our", "my", "we", "we're", "we've", "i", "i'm", "i've")
                            or first[0].removesuffix("'s") in self_names or sentence[0].isupper())


@dataclass(frozen=True)
class EpisodeChanges:
    """What the change reader makes of one episode: ``added``, the candidates it adds (statements
    of a slot the extractor skipped, change sentences it left out); ``probes``, for each change
    sentence the candidate that carries it (an extractor's own when one renders that sentence);
    ``remarks``, the sentences of a labelled turn it set aside (``episode_probes``)."""

    added: list[FactCandidate]
    probes: list[Probe]
    remarks: list[str]


def _names_holder(text: str, holder: str) -> bool:
    return re.search(rf"\b{re.escape(holder)}\b", text) is not None


def episode_probes(*, episode: Episode, candidates: Sequence[FactCandidate], display_names: Iterable[str] = ()
                   ) -> EpisodeChanges:
    """Read one new episode for changes. A labelled turn ("Rosa: ...", a conversation between
    people) gets only the change sentences that name their speaker, as the extractor's statements
    do: its statement layer has already read every sentence about the speaker, so a slot statement
    it skipped is a remark ("Board games are the best.") and so is a change sentence whose speaker
    is not in it ("Patience is everything now."). The end-user's own unlabelled turns get both
    ("The front door has a Yale smart lock.")."""
    labelled, text = speech.split_speaker(episode.text)
    holder = labelled or "User"
    names = frozenset(n.lower() for n in ([labelled] if labelled else ["user", *display_names]) if n)
    # A sentence is worded as the extractor words it: the end-user by display name, else "the user".
    writer = labelled or next((" ".join(n.split()) for n in display_names if n and n.strip()), "the user")
    family = speech.family_context(text)
    when = _when(episode.occurred_at)
    own = [c for c in candidates if episode.id in c.episode_ids]
    found = EpisodeChanges(added=[], probes=[], remarks=[])
    harsh_context = False
    sentences = speech.sentences(text)
    for n, sentence in enumerate(sentences):
        reading = change_read(sentence, self_names=names, harsh_context=harsh_context)
        harsh_context = harsh_context or bool(_CORRECTION.search(sentence))
        rendered = _rendered(sentence, holder=writer, family=family, when=when)
        carrier = _carrier(rendered, own)
        if reading is None and (effect := effect_sentence(sentence, sentences[n - 1] if n else None)) is not None:
            found.probes.append(_effect_probe(effect, carrier=carrier, found=found, episode=episode, holder=holder,
                                              writer=writer, family=family, when=when))
            continue
        done = (fulfilment_read(sentence, self_names=names) or abandonment_read(sentence, self_names=names)
                or _news_read(sentence, self_names=names)) if reading is None or reading.kind == NATURAL else None
        if reading is None and done is not None and carrier is not None:
            # Something done or given up, told in a fact the extractor wrote: it may end a plan
            # (``plan_target``); a telling the extractor left out adds no fact of its own.
            found.probes.append(Probe(candidate=carrier, reading=done, holder=holder, fulfilment=done))
            continue
        if carrier is None and reading is not None and reading.kind == HARSH:
            # "Actually, Arun is 8, not 7." the extractor read as a correction in words of its own
            carrier = _carrier(rendered, [c for c in own if c.change == HARSH], share=0.3)
        if (reading is None or reading.kind == NATURAL) and carrier is None and labelled \
                and (told := _subject_given(rendered, writer)) is not None \
                and (news := _news_read(sentence, self_names=names)) is not None:
            # "Researching adoption agencies - ...": a step, pause or animal of the speaker's with the
            # subject left out, as people say their own news; it may end, or be ended by, a later one
            carrier = FactCandidate(text=told, episode_ids=(episode.id,), confidence=0.7)
            found.added.append(carrier)
            # the news reader's reading stands: "got married" ends a stage of the bond, not any fact
            # that shares its topic ("my partner is pregnant")
            found.probes.append(Probe(candidate=carrier, reading=news, holder=holder, fulfilment=news))
            continue
        if carrier is None and speech.leans_back(_bare(sentence)):
            # "She lives with us on weekends": who "she" is was said before; alone it names no one.
            found.remarks.append(rendered)
            continue
        if reading is None:
            if carrier is None and plan_statement(sentence) and (not labelled or _EVENT_PLAN.match(sentence.replace("’", "'"))):
                # a plan of the end-user's own the extractor skipped, or a speaker's plan for an event
                # ("I'm going to a conference this month"): what a later telling may end
                found.added.append(FactCandidate(text=rendered, episode_ids=(episode.id,), confidence=0.7))
                continue
            if carrier is None and _slot_statement(sentence, self_names=names):
                if labelled:
                    found.remarks.append(rendered)
                else:
                    found.added.append(FactCandidate(text=rendered, episode_ids=(episode.id,), confidence=0.7))
            continue
        if carrier is None and (_is_question(sentence) or (speech.is_request(_bare(sentence))
                                                          and not speech.names_speaker(sentence))):
            # A question, or a request about nothing of the speaker's ("Take a look at this now"),
            # carries no fact; "Please don't send me the newsletter any more" does.
            continue
        if carrier is None:
            if labelled and not _names_holder(rendered, holder):
                found.remarks.append(rendered)
                continue
            carrier = FactCandidate(text=rendered, episode_ids=(episode.id,), confidence=0.7)
            found.added.append(carrier)
        found.probes.append(Probe(candidate=carrier, reading=reading, holder=holder, fulfilment=done))
    return found


def _effect_probe(effect: str, *, carrier: FactCandidate | None, found: EpisodeChanges, episode: Episode, holder: str,
                  writer: str, family: bool, when: datetime | None) -> Probe:
    """The probe of a thing's effect on the speaker (``effect_sentence``): carried by the extractor's
    fact of the sentence, else by one written with the thing said ("For Evan, PT has helped some")."""
    if carrier is None:
        said = _rendered(effect, holder=writer, family=family, when=when)
        if not _names_holder(said, writer):
            said = f"For {writer}, {said[:1].lower() + said[1:] if said[1:2].islower() else said}"
        carrier = FactCandidate(text=said, episode_ids=(episode.id,), confidence=0.7)
        found.added.append(carrier)
    reading = effect_read(effect)
    assert reading is not None  # (``effect`` is a sentence ``effect_sentence`` gave)
    return Probe(candidate=carrier, reading=reading, holder=holder, fulfilment=reading)


def _news_read(sentence: str, *, self_names: Iterable[str]) -> ChangeReading | None:
    """A step of a pursuit, a habit paused or an animal taken in, told by the speaker (the readers
    after a plan's fulfilment and abandonment)."""
    # (an effect is read beside the sentence before it, in ``episode_probes``)
    return step_read(sentence, self_names=self_names) or next(
        (r for read, _ in NEWS_READERS if read is not effect_read and (r := read(sentence, self_names=self_names))),
        None)


_GERUND_SUBJECT = re.compile(r"\s(?:is|was|sounds|seems|looks|would|could|can|will|takes|makes|must|might|"
                             r"feels|means)\b", re.I)


def _subject_given(rendered: str, writer: str) -> str | None:
    """``rendered`` with ``writer`` as its subject when it opens on a verb with none ("Researching
    the course" → "Kofi is researching the course", "Quit the choir" → "Kofi quit the choir"), else None."""
    rendered = _TAG_QUESTION.sub(".", rendered.rstrip(".")).replace("..", ".")  # "... last week - how about you?"
    words = words_of(rendered)
    if not words or not rendered[:1].isupper() or words[0] in _STOP and words[0] != "been" \
            or not (_is_verb_form(words[0]) or words[0] in speech._verbs()[0]) \
            or _GERUND_SUBJECT.search(_PHRASE_BREAK.split(rendered, maxsplit=1)[0]):
        return None  # ("Quitting the choir would be a mistake": the doing is the subject)
    verb = rendered[:1].lower() + rendered[1:]
    if words[0] == "been":  # "Been a mad month, got engaged ..."
        return f"{writer} has {verb}"
    return f"{writer} is {verb}" if words[0].endswith("ing") else f"{writer} {verb}"


def _carrier(rendered: str, own: Sequence[FactCandidate], *, share: float = 0.6) -> FactCandidate | None:
    """The extractor's candidate that says ``rendered`` (the same sentence, maybe cut or joined;
    ``share``: of the shorter one's words)."""
    target = set(words_of(rendered)) - _STOP
    best, best_share = None, 0.0
    for candidate in own:
        words = set(words_of(candidate.text)) - _STOP
        if not words or not target:
            continue
        overlap = len(words & target) / min(len(words), len(target))
        if overlap > best_share:
            best, best_share = candidate, overlap
    return best if best_share >= share else None


def _when(occurred_at: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(occurred_at.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def holder_of(text: str) -> str:
    labelled, _ = speech.split_speaker(text)
    return labelled or "User"


# A plan that came true: the speaker's plan or hope ("is going to the book fair", "is thinking about
# yoga", "a ski trip is on the cards") ended by a later telling of the plan's own thing as done
# ("went to the book fair", "I've started yoga"). Not a value replaced but a plan's fact ended by its
# outcome: the supersession's kind says so, and nothing else reads it as a change.
FULFILLED = "fulfilled"

_PLAN = re.compile(r"\b(?:going to|gonna|planning (?:to|on)|planning(?= (?:a|an|the|my|our)\b)|heading to|off to|"
                   r"signed up for|registered for|plans? to|thinking (?:about|of)|hop(?:es|ing) to|"
                   r"wants? to|intends? to|dying to|keen to|looking forward to|can't wait|will|'ll|"
                   r"on the cards)\b", re.I)
# What says the plan is still ahead: told again ("can't wait for ..."), or only prepared for.
_NOT_YET = re.compile(r"\b(?:will|'ll|going to|gonna|can't wait|counting (?:down|the days)|looking forward|next|soon|"
                      r"tomorrow|tonight|plan|plans|planning|hope|hoping|thinking|want|wants|wanna|yet|still|working on|"
                      r"booked|signed up|registered|enrolled|bought (?:the |our |my )?tickets?|reserved|"
                      r"practis(?:e|ed|ing)|training for|preparing|getting ready)\b", re.I)
# What says it did not happen, or not yet: put off, called off, given up, missed.
_NOT_DONE = re.compile(r"\b(?:postponed|put (?:\w+ ){0,3}off|pushed (?:\w+ ){0,3}back|rescheduled|delayed|called off|"
                       r"cancell?ed|decided (?:against|not)|gave up|given up|didn't|did not|never|couldn't|"
                       r"could not|wasn't|weren't|hasn't|haven't|not able|missed|pulled out|dropped out|backed out|"
                       r"skipped|fell through|no longer|not|(?:a|some) (?:break|time off|rest) from)\b", re.I)
# Another instance, done before the plan was made ("a conference last year", "years ago").
_EARLIER_ONE = re.compile(r"\b(?:last year|years? ago|back in|as a (?:kid|child|teen(?:ager)?)|"
                          r"when (?:i|we) (?:was|were) (?:a|an|young|little|kids|students|at (?:uni|school|college))|in (?:19|20)\d\d|at uni|another|a second|once before|always|ever since|used to)\b",
                          re.I)
_DONE_STATE = re.compile(r"\b(?:is|are|'s|was|were)\s+(?:\w+\s+)?(?:finished|done|complete|completed|over|behind (?:me|us))\b",
                         re.I)
# Words before an -ed form that make it an adjective ("I'm so excited", "feel settled"), not a past verb.
_NOT_PAST_BEFORE = frozenset("am is are 'm 're i'm we're you're they're be being so very really too feel feels felt "
                             "get gets getting a an the".split())
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday weekend spring summer autumn "
                      "fall winter".split())
# Where a noun phrase ends: a clause break.
_PHRASE_BREAK = re.compile(r"\s*[,;:!?.—–]\s*|\s+-\s+|\s+(?:so|but|because|which|since|while|though|although|as)\s+",
                           re.I)
DONE_WINDOW = 6  # the words after a past verb that tell what was done ("took the kids camping in the hills")


def _past_verbs(words: list[str]) -> list[int]:
    """The positions of past forms in ``words`` ("went", "we've started"), not adjectives after "is"."""
    lemmas, forms = speech._verbs()
    return [n for n, word in enumerate(words)
            if ((word in forms and word not in lemmas and not word.endswith(("ing", "s")) or word == "was")
                or (word.endswith("ed") and _is_verb_form(word)))
            and (n == 0 or words[n - 1] not in _NOT_PAST_BEFORE)
            # "has been playing": an activity going on, not one done
            and not (word == "been" and words[n + 1:n + 2] and words[n + 1].endswith("ing"))]


# Nouns that hold an activity as their kind ("an exercise routine", "a salsa class"): the word before
# them names what was done.
_HOLDERS = frozenset("routine regime class classes session sessions lesson lessons course plan programme program "
                     "habit schedule".split())


def _heads(words: list[str]) -> set[str]:
    """The nouns of ``words`` that head their phrase: not a modifier of the next noun ("a game
    avatar" is an avatar), unless that noun only holds an activity ("an exercise routine")."""
    return {_singular(w.removesuffix("'s")) for n, w in enumerate(words)
            if _is_noun(w, words[:n]) and not (n + 1 < len(words) and _is_noun(words[n + 1], words[:n + 1])
                                                and words[n + 1] not in _HOLDERS)}


def _done_things(clause: str) -> set[str]:
    """What ``clause`` tells as done, by the head nouns (``_heads``) of the words after a past verb, up
    to ``DONE_WINDOW`` within its phrase ("went to the book fair"), and of the subject of "was" or of
    a state of being done ("the mural is finished", "the fair was great")."""
    out: set[str] = set()
    for phrase in _PHRASE_BREAK.split(clause):
        words = words_of(phrase)
        for n in _past_verbs(words):
            out |= _heads(words[:n] if words[n] in ("was", "were") else words[n + 1:n + 1 + DONE_WINDOW])
        if (done := _DONE_STATE.search(phrase)) is not None:
            out |= _heads(words_of(phrase[:done.start()]))
    return out


def fulfilment_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """The telling of something the speaker did (``FULFILLED``) that may end a plan of theirs, or
    None: a question, a plan or hope said again, a step towards it, a thing put off, called off or
    missed, another person's doing, a habit, or one done long before."""
    names = frozenset(n.lower() for n in self_names if n)
    text = sentence.replace("’", "'").strip()
    if not text or _is_question(text) or _NOT_YET.search(text) or _EARLIER_ONE.search(text) \
            or _HYPOTHETICAL.search(text) or _GIVEN_UP.search(text) or _ABANDON.search(text):
        return None  # (a plan given up, "dropped the idea of ...", is read by ``abandonment_read``)
    found: list[ChangeReading] = []
    for clause in _clauses(_REPORTED.sub("", text)):
        core = _LEAD.sub("", clause)
        if _NOT_DONE.search(core) or not (_past_verbs(words_of(core)) or _DONE_STATE.search(core)):
            continue
        other, what = _subject(core, names)
        if what == "person":
            continue  # "my sister went to the fair": her outing
        found.append(ChangeReading(sentence=text, clause=clause, kind=FULFILLED, cue="", ends=True, other_subject=other,
                                   first_object=bool(_FIRST_OBJECT.search(core)), subject_kind=what))
    # A clause that only leads in ("What a summer it's been - I went to the fair")
    # names nothing done: the telling is the clause that does.
    return next((r for r in found if _done_things(_LEAD.sub("", r.clause))), found[0] if found else None)


# A plan given up ("decided against the ski trip", "we called off the fair", "dropped the idea of ..."):
# the plan's fact ends, as a change over time (``NATURAL``), by the thing named after the cue or, for a
# thing as subject, before it ("the fair was cancelled").
_ABANDON = re.compile(r"\b(?:decided (?:against|not to(?: \w+)?)|call(?:ed)? off|cancell?ed|gave up on|given up on|"
                      r"dropped the (?:idea|plan) of|scrapped|pulled out of|backed out of|(?:'m|am|'re|are) not "
                      r"going to(?= (?:a|an|the|do|go)\b)|changed (?:my|our) minds? about)\b", re.I)
# What says the plan was not given up: nearly, a hypothesis, a question, put off (``_NOT_DONE`` holds the rest).
_NOT_ABANDONED = re.compile(r"\b(?:almost|nearly|never|didn't|did not|haven't|have not|not yet|postponed|put off|"
                            r"pushed \w+ back|rescheduled|still on|if)\b", re.I)


def abandonment_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """A plan of the speaker's given up (``_ABANDON``), read for ``plan_target``, or None: a question, a
    hypothesis, nearly or not given up, put off, or given up by someone else."""
    for text, clause, core, (other, what) in _own_clauses(sentence, self_names, refuse=_NOT_ABANDONED):
        if (cue := _ABANDON.search(core)) is not None:
            return ChangeReading(sentence=text, clause=clause, kind=NATURAL, cue=cue.group(0).lower(), ends=True,
                                 other_subject=other, first_object=bool(_FIRST_OBJECT.search(core)), subject_kind=what)
    return None


def _own_clauses(sentence: str, self_names: Iterable[str], *, refuse: re.Pattern[str]):
    """The clauses of ``sentence`` whose subject is no other person ("my sister called off the
    fair": her plan), each as (text, clause, core without its lead-in, ``_subject``); none for a
    question, a hypothesis or a sentence ``refuse`` matches."""
    names = frozenset(n.lower() for n in self_names if n)
    text = sentence.replace("’", "'").strip()
    if not text or _is_question(text) or refuse.search(text) or _HYPOTHETICAL.search(text):
        return
    for clause in _clauses(_REPORTED.sub("", text)):
        core = _LEAD.sub("", clause)
        if (subject := _subject(core, names))[1] != "person":
            yield text, clause, core, subject


# A pursuit's steps, in order (looked into, applied, interviewed, accepted): a later step of the
# speaker's for the same thing ends the fact of an earlier one ("had an interview for the graduate
# scheme", then "got accepted for the scheme"), as a change over time.
_STEPS = (
    re.compile(r"\b(?:looking into|looked into|researching|researched)\s+", re.I),
    re.compile(r"\b(?:appl(?:y|ies|ied|ying) (?:to|for)|(?:sent|send|submitted) (?:off )?(?:my |an |the )?applications? "
               r"(?:to|for))\s+", re.I),
    re.compile(r"\b(?:(?:had|got|did|have|'ve had) (?:an?|my|the) interviews? (?:for|with|at)|interviewed (?:for|with|at))\s+",
               re.I),
    re.compile(r"\b(?:accepted (?:for|to|into|on|at|by)|offered (?:a|the|my) (?:place|job|position|role|spot)(?: on| at| in| for)?|"
               r"passed (?:the|my|our) (?=(?:[\w'-]+ ){0,3}interviews?\b))\s*", re.I),
)
_STEP_WORDS = frozenset("interview interviews application applications place offer spot position".split())


def _step(text: str) -> tuple[int, set[str]] | None:
    """(the latest step of a pursuit ``text`` tells, from 1, and the nouns of the thing pursued: those of
    the phrase after that step's words), or None."""
    for level in range(len(_STEPS), 0, -1):
        if (m := _STEPS[level - 1].search(text)) is not None:
            phrase = _PHRASE_BREAK.split(text[m.end():], maxsplit=1)[0]
            words = words_of(phrase)
            return level, {_singular(w) for n, w in enumerate(words) if w not in _STEP_WORDS and _is_noun(w, words[:n])}
    return None


def step_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """A step of a pursuit the speaker took (``_STEPS``), for ``step_target``, or None: a question, a
    hypothesis, a step not taken, someone else's."""
    for text, clause, core, _subject_read in _own_clauses(sentence, self_names, refuse=_NOT_DONE):
        if _step(core) is not None:
            return ChangeReading(sentence=text, clause=clause, kind=NATURAL, cue="step", ends=True,
                                 other_subject=None, first_object=bool(_FIRST_OBJECT.search(core)))
    return None


def step_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                told_at: str | None = None) -> Link | None:
    """The speaker's fact among ``facts`` that tells an earlier step of the pursuit ``reading``
    (``step_read``) takes further: a lower step for a thing sharing a noun, told before (not within
    ``SAME_SITTING``)."""
    names = frozenset(n.lower() for n in self_names if n)
    later = _step(_LEAD.sub("", reading.clause))
    if later is None:
        return None
    best: Link | None = None
    for fact in facts:
        earlier = _step(fact.text)
        if earlier is None or earlier[0] >= later[0] or not (_owners(fact.text) & names) \
                or _same_sitting(fact.valid_from, told_at) or _someone_elses(fact.text, names):
            continue
        if shared := earlier[1] & later[1]:
            link = Link(fact=fact, by="step", shared=tuple(sorted(shared)), score=2.0 + fact.cosine + len(shared))
            best = _better(best, link)
    return best


# A habit paused, given up or cut down ("I'm taking a break from the choir", "cutting down on crisps",
# "limiting myself to two biscuits a day"): the speaker's fact of doing or liking the thing ends, as a
# change over time. A bare verb counts only after "had to" or "needed to", not as a request.
_HABIT = re.compile(r"\b(?:(?:(?:had|have|'ve had|decided|needed|need) to )(?:take a (?:\w+ )?break from|give up|stop(?: doing)?|"
                    r"quit|cut (?:down|back) on)|(?:took|taking|taken|had|on|been on) a (?:\w+ )?break from|"
                    r"(?:(?:gave|giving|given) up|quit(?:ting)?|stopped)(?: doing| going to)?|cut(?:ting)? (?:down|back) on|"
                    r"cut out|limit(?:ing|ed) (?:myself|ourselves|themself|themselves) to|"
                    r"reduc(?:ed|ing)(?= (?:my|our)\b))\s+", re.I)
# What says the habit goes on: not done, hypothetical, long ago and taken up again, a pause within it.
_HABIT_KEPT = re.compile(r"\b(?:never|didn't|did not|don't|do not|won't|wouldn't|not|should|'d|(?<!cut )(?<!cutting )back "
                         r"(?:at|to|on|into)|"
                         r"again|years ago|as a (?:kid|child|teen(?:ager)?)|during)\b", re.I)
_NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten dozen couple few".split())


def _habit_thing(phrase: str) -> tuple[str, ...]:
    """The words naming the thing at the start of ``phrase`` (singular), after its determiners,
    numbers and adverbs, up to the first other word ("only two oat biscuits a week": oat biscuit;
    "pottery after I hurt my wrist": pottery), or () when none of them is a noun."""
    words = words_of(_PHRASE_BREAK.split(phrase, maxsplit=1)[0])
    n = 0
    while n < len(words) and (words[n] in _STOP or words[n] in _NUMBER_WORDS or words[n] in _DETERMINERS
                              or words[n] in _wordnet_other_only()):
        n += 1
    thing: list[str] = []
    for word in words[n:]:
        if word in _STOP or word in _GENERIC or word in _NUMBER_WORDS or word in _PREPOSITIONS \
                or word in _wordnet_other_only() or word in ("these", "those", "every", "last", "this"):
            break
        thing.append(_singular(word))
    noun = any(w in _wordnet_nouns() or w not in _wordnet_other() and not _is_verb_form(w) for w in thing)
    return tuple(thing) if noun else ()


def _holds_thing(fact: str, thing: tuple[str, ...], names: frozenset[str]) -> bool:
    """``fact`` names ``thing`` as its own phrase: the words in a row, not a modifier of another noun
    after them ("her pottery teacher"), unless that noun only holds the activity ("pottery class")."""
    words = [_singular(w.removesuffix("'s").rstrip("'")) for w in words_of(fact)
             if w.removesuffix("'s").rstrip("'") not in names]
    for n in range(len(words) - len(thing) + 1):
        if tuple(words[n:n + len(thing)]) == thing:
            after = words[n + len(thing)] if n + len(thing) < len(words) else ""
            if not after or after in _HOLDERS or not _noun_only(after):
                return True
    return False


def _owners(text: str) -> set[str]:
    """The words of ``text`` with a possessive's ending taken off ("Priya's", "James'")."""
    return {w.removesuffix("'s").rstrip("'") for w in words_of(text)}


def _anothers(fact: str, names: frozenset[str]) -> bool:
    """``_someone_elses``, but a fact opening on a day or month ("Thursday evenings are for ...") is
    no one's name."""
    first = words_of(fact)[:1]
    # "James' two dogs" is James's: the possessive written out as the subject reader knows it
    return _someone_elses(re.sub(r"\b(\w+s)'(?=\s)", r"\1's", fact), names) \
        and not (first and (first[0] in _WEEKDAYS or first[0] in MONTHS))


def habit_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """A habit of the speaker's paused, given up or cut down (``_HABIT``), for ``habit_target``, or
    None: a question, a hypothesis, a pause not taken, one long ago or ended, someone else's."""
    if _HABIT.match(sentence.strip()):
        sentence = sentence.strip()[:1].lower() + sentence.strip()[1:]  # "Quit bouldering last month": no name
    for text, clause, core, _subject_read in _own_clauses(sentence, self_names, refuse=_HABIT_KEPT):
        if (cue := _HABIT.search(core)) is not None and _habit_thing(core[cue.end():]):
            return ChangeReading(sentence=text, clause=clause, kind=NATURAL, cue="habit", ends=True,
                                 other_subject=None, first_object=bool(_FIRST_OBJECT.search(core)))
    return None


def habit_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                 told_at: str | None = None) -> Link | None:
    """The speaker's fact among ``facts`` of doing or liking the thing ``reading`` (``habit_read``)
    pauses or cuts down: one whose head nouns hold the thing's heads and whose words hold its other
    nouns ("made a vase in pottery class", "ginger snaps are her weakness"; not "her pottery
    teacher"), told before (not within ``SAME_SITTING``), not someone else's, not the same pause."""
    names = frozenset(n.lower() for n in self_names if n)
    core = _LEAD.sub("", reading.clause)
    cue = _HABIT.search(core)
    if cue is None:
        return None
    thing = _habit_thing(core[cue.end():])
    best: Link | None = None
    for fact in facts:
        if not (_owners(fact.text) & names) or _same_sitting(fact.valid_from, told_at) \
                or _anothers(fact.text, names) or _HABIT.search(fact.text) or _PLAN.search(fact.text):
            # (a plan is ended by being done or given up, ``plan_target``: a break from it is neither)
            continue
        if thing and _holds_thing(fact.text, thing, names):
            link = Link(fact=fact, by="habit", shared=thing, score=2.0 + fact.cosine + len(thing))
            best = _better(best, link)
    return best


# A count of the speaker's animals grown ("two dogs", then "adopted a puppy"): the fact of the count
# ends. Named animals ("Max and Daisy") stay: a new one joins them.
_YOUNG = {"puppy": "dog", "pup": "dog", "kitten": "cat", "kitty": "cat", "bunny": "rabbit", "foal": "horse",
          "chick": "chicken", "cub": "bear"}
_ANIMALS = frozenset("dog cat rabbit hamster budgie parrot horse pony tortoise turtle gecko lizard snake ferret "
                     "chicken hen goat fish guinea".split())
_ADOPTED = re.compile(r"\b(?:adopted|got|brought home|took in|rescued|welcomed)\s+(?:a|an|another|one more|"
                      r"a second|a third)\s+((?:[\w-]+\s+){0,2}[\w-]+)", re.I)
_NOT_OURS = re.compile(r"\b(?:fosters?|fostering|fostered|looking after|looked after|pet-?sitting|borrowed|"
                       r"never|didn't|did not|not)\b", re.I)
_COUNTED = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|\d+)\s+(?:[\w-]+\s+)?([a-z]+?)s\b", re.I)


def _adopted_kind(clause: str) -> str | None:
    if (m := _ADOPTED.search(clause)) is None:
        return None
    for word in words_of(m.group(1)):
        if word in _YOUNG or word in _ANIMALS:
            return _YOUNG.get(word, word)
    return None


def count_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """An animal the speaker took in ("adopted a pup", "we got another cat"), for ``count_target``,
    or None: a question, a hypothesis, fostering or minding one, someone else's."""
    text = sentence.replace("’", "'").strip()
    if not text or _is_question(text) or _NOT_OURS.search(text) or _HYPOTHETICAL.search(text):
        return None
    # each phrase apart: "Guess what, I've adopted a pup" is told by its second
    for piece in _PHRASE_BREAK.split(text):
        for _text, clause, core, _subject_read in _own_clauses(piece, self_names, refuse=_NOT_OURS):
            if _adopted_kind(core) is not None:
                return ChangeReading(sentence=text, clause=clause, kind=NATURAL, cue="count", ends=True,
                                     other_subject=None, first_object=bool(_FIRST_OBJECT.search(core)))
    return None


def count_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                 told_at: str | None = None) -> Link | None:
    """The speaker's fact among ``facts`` that counts their animals of the kind ``reading``
    (``count_read``) took in ("has two dogs"), told before (not within ``SAME_SITTING``)."""
    names = frozenset(n.lower() for n in self_names if n)
    kind = _adopted_kind(_LEAD.sub("", reading.clause))
    best: Link | None = None
    for fact in facts:
        if kind is None or not (_owners(fact.text) & names) \
                or _same_sitting(fact.valid_from, told_at) or _anothers(fact.text, names):
            continue
        if any(_YOUNG.get(m.group(1).lower(), m.group(1).lower()) == kind for m in _COUNTED.finditer(fact.text)):
            link = Link(fact=fact, by="count", shared=(kind,), score=2.0 + fact.cosine)
            best = _better(best, link)
    return best


# A bond grown ("my new partner", then "we got engaged", "got married"): the speaker's fact of the
# earlier stage ends, as a change over time. The partner is rarely named again, so no shared word.
_BOND_STAGES = (
    # (a bare "partner" may be a spouse: "my partner is pregnant" tells no stage)
    re.compile(r"\b(?:new (?:so|partner|girlfriend|boyfriend|other half)|girlfriend|boyfriend|"
               r"(?:started |been |am |'m |was |is |'s )(?:seeing|dating|going out with) (?:someone|a|an|this|\w+)|"
               r"(?:seeing|dating|going out with) (?:someone|somebody)|"
               r"met (?:this|a|an|the) (?:[\w-]+ ){0,3}(?:woman|man|girl|guy|lady))\b", re.I),
    re.compile(r"\b(?:fianc[eé]e?|(?:got|are|'re|am|'m|is|just) engaged)\b", re.I),
    re.compile(r"\b(?:(?:got|are|'re|am|'m|is|just|we|i) married|tied the knot)\b", re.I),
)
# A stage told as reached, not planned, nearly, someone else's or long ago.
_BOND_NEWS = re.compile(r"\b(?:got (?:engaged|married)|tied the knot|(?:'re|are|'m|am) (?:now )?(?:engaged|married) now)\b",
                        re.I)
_BOND_KEPT = re.compile(r"\b(?:nearly|almost|never|not|didn't|did not|years ago|anniversary|wedding plans|will|'ll|"
                        r"going to|next)\b", re.I)


def _bond_stage(text: str) -> int | None:
    """The latest stage of a bond ``text`` names (1 seeing someone or a partner, 2 engaged, 3 married)."""
    return next((n + 1 for n in range(len(_BOND_STAGES) - 1, -1, -1) if _BOND_STAGES[n].search(text)), None)


def bond_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """The speaker telling a bond of theirs grown ("we got engaged", "got married last week"), for
    ``bond_target``, or None: a question, a hypothesis, nearly, long ago, someone else's."""
    if _BOND_NEWS.search(sentence) is None:
        return None
    for piece in _PHRASE_BREAK.split(sentence.strip()):  # "Been a mad month, got engaged ...": the second
        for _text, clause, core, _subject_read in _own_clauses(piece, self_names, refuse=_BOND_KEPT):
            if _BOND_NEWS.search(core) is not None:
                return ChangeReading(sentence=sentence.replace("’", "'").strip(), clause=clause, kind=NATURAL,
                                     cue="bond", ends=True, other_subject=None,
                                     first_object=bool(_FIRST_OBJECT.search(core)))
    return None


def _own_bond(fact: str, names: frozenset[str]) -> bool:
    """The bond ``fact`` names is the speaker's: their partner as the subject ("Priya's fiancé and Priya
    ..."), or a fact of theirs whose bond word no one else's possessive holds ("her sister's boyfriend")."""
    words = [w.rstrip("'") if w.endswith("s'") else w for w in words_of(fact)]
    if not ({w.removesuffix("'s") for w in words} & names):
        return False
    first = words[0].removesuffix("'s") if words else ""
    if first not in names and _subject(fact, names)[1] == "person":
        return False
    return not any(w.endswith("'s") and w.removesuffix("'s") not in names and _BOND_STAGES[0].match(" ".join(words[n + 1:n + 3]))
                   for n, w in enumerate(words))


def bond_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                told_at: str | None = None) -> Link | None:
    """The speaker's fact among ``facts`` of an earlier stage of the bond ``reading`` (``bond_read``)
    tells grown, told before (not within ``SAME_SITTING``)."""
    names = frozenset(n.lower() for n in self_names if n)
    later = _bond_stage(reading.clause)
    if later is None:
        return None
    best: Link | None = None
    for fact in facts:
        earlier = _bond_stage(fact.text)
        if earlier is None or earlier >= later or _same_sitting(fact.valid_from, told_at) \
                or not _own_bond(fact.text, names):
            continue
        link = Link(fact=fact, by="bond", shared=(), score=2.0 + fact.cosine + later - earlier)
        best = _better(best, link)
    return best


# A new home of the speaker's ("we rented a house by the park", "moved in together"): their fact about
# their own flat, house or place ends. Not a stay (a cottage for a week, a flat for the conference).
_HOME_WORDS = r"(?:flat|apartment|house|place|home|cottage|studio|bungalow|condo|maisonette)"
_NEW_HOME = re.compile(rf"\b(?:(?:rented|bought|moved into|found|got|signed (?:a lease|for)(?: on)?) (?:a|an|our|my|the) "
                       rf"(?:[\w-]+ ){{0,2}}{_HOME_WORDS}\b|moved in together)", re.I)
_NO_NEW_HOME = re.compile(r"\b(?:never|didn't|did not|haven't|have not|not (?:yet|going|moving)|nearly|almost)\b", re.I)
_STAY = re.compile(r"\b(?:for (?:the|a|our|my) (?:conference|holiday|trip|weekend|week|festival|wedding|summer|night)|"
                   r"nights?|holiday|vacation|airbnb|getaway|break)\b", re.I)


def home_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """The speaker telling a new home of theirs (``_NEW_HOME``), for ``home_target``, or None: a
    question, a hypothesis, a stay (``_STAY``, ``_TEMPORARY``), someone else's."""
    text = sentence.replace("’", "'").strip()
    if _NEW_HOME.search(text) is None or _STAY.search(text) or _TEMPORARY.search(text):
        return None
    for said, clause, core, _subject_read in _own_clauses(text, self_names, refuse=_NO_NEW_HOME):
        if _NEW_HOME.search(core) is not None:
            return ChangeReading(sentence=said, clause=clause, kind=NATURAL, cue="home", ends=True,
                                 other_subject=None, first_object=bool(_FIRST_OBJECT.search(core)))
    return None


def home_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                told_at: str | None = None) -> Link | None:
    """The speaker's fact among ``facts`` about their own home ("the heating in Ana's flat", "James'
    apartment lost power"), told before (not within ``SAME_SITTING``), not a plan."""
    names = frozenset(n.lower() for n in self_names if n)
    owners = "|".join([*(rf"{re.escape(n)}(?:'s|')" for n in sorted(names)), "my", "our"])
    own = re.compile(rf"\b(?:{owners}) (?:[\w-]+ ){{0,2}}{_HOME_WORDS}\b", re.I)
    best: Link | None = None
    for fact in facts:
        if not (_owners(fact.text) & names) or _same_sitting(fact.valid_from, told_at) or _PLAN.search(fact.text) \
                or _anothers(fact.text, names) or (m := own.search(fact.text.replace("’", "'"))) is None:
            continue
        link = Link(fact=fact, by="home", shared=(m.group(0).split()[-1].lower(),), score=2.0 + fact.cosine)
        best = _better(best, link)
    return best


# A plan or a thought told done by its effect ("Physio for my shoulder is on the cards", then "Physio has
# helped a lot"; "thinking about trying yoga", then "Yoga's a great start. It's helped me sleep"): the
# thing, the subject of the effect (for "it", the subject of the sentence before), ends the plan's fact.
_EFFECT = re.compile(r"^(?P<thing>(?:[\w-]+ )?[\w-]+?)(?:'s| has| have|'ve)(?: (?:really|definitely|already|honestly|"
                     r"actually|totally|so|truly))? (?:helped|been (?:great|brilliant|amazing|a (?:big |huge |real )?help)|"
                     r"made a (?:real |big |huge )?difference|worked wonders)(?P<rest>.*)$", re.I)
# Whom it helped: the speaker, or no one named ("helped a lot"); not "helped her back", "helped the kids".
_EFFECT_ON = re.compile(r"^(?:\s+(?:me|us|my|our|some|a lot|a bit|loads|so much|heaps|with|for me|for us|"
                        r"(?:really|so) much)\b|\s*[,.;!]|\s*$)", re.I)
_EFFECT_KEPT = re.compile(r"\b(?:might|would|could|may|if|never|not|hasn't|haven't|didn't|won't|yet)\b", re.I)
_SUBJECT_BEFORE = re.compile(r"^(?P<thing>(?:[\w-]+ )?[\w-]+?)(?:'s| is| was| has been)\b", re.I)


def effect_sentence(sentence: str, before: str | None) -> str | None:
    """``sentence`` with its thing said when it tells an effect on the speaker of a thing ("PT has
    helped some"; "It's helped me" after "Yoga's a great start": "Yoga has helped me"), else None."""
    text = _bare(sentence.replace("’", "'").strip())
    if (m := _EFFECT.match(text)) is None or _is_question(text) or _EFFECT_KEPT.search(text) \
            or not _EFFECT_ON.match(m.group("rest")):
        return None
    thing = m.group("thing")
    if thing.lower() in ("it", "that", "this"):
        said = _SUBJECT_BEFORE.match(_bare((before or "").replace("’", "'").strip()))
        if said is None:
            return None
        thing = said.group("thing")
        text = thing + text[m.end("thing"):]
    if {w.lower() for w in thing.split()} & (_PERSON_NOUNS | _STOP | {"he", "she", "they", "you", "we", "i"}):
        return None
    return text


def effect_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """A thing's effect on the speaker (``effect_sentence``, its thing said), for ``effect_target``."""
    if (text := effect_sentence(sentence, None)) is None:
        return None
    return ChangeReading(sentence=text, clause=text, kind=FULFILLED, cue="effect", ends=True, other_subject=None,
                         first_object=bool(_FIRST_OBJECT.search(text)))


def effect_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                  told_at: str | None = None) -> Link | None:
    """The speaker's plan or thought among ``facts`` (``_PLAN``) whose phrase names the thing
    ``reading`` (``effect_read``) tells the effect of, told before (not within ``SAME_SITTING``)."""
    names = frozenset(n.lower() for n in self_names if n)
    m = _EFFECT.match(reading.clause)
    thing = _singular(words_of(m.group("thing"))[-1]) if m and words_of(m.group("thing")) else None
    best: Link | None = None
    for fact in facts:
        plan = _PLAN.search(fact.text)
        if thing is None or plan is None or not (_owners(fact.text) & names) \
                or _same_sitting(fact.valid_from, told_at) \
                or _someone_elses(fact.text, names) and _subject(fact.text, names)[0] != thing:
            continue  # ("Physio for Ana's shoulder is on the cards": the thing, not a person, opens it)
        said = fact.text[:plan.start()] if plan.group(0).lower() == "on the cards" else fact.text[plan.end():]
        if thing in {_singular(w) for w in words_of(_PHRASE_BREAK.split(said.strip(), maxsplit=1)[0])}:
            link = Link(fact=fact, by="effect", shared=(thing,), score=2.0 + fact.cosine)
            best = _better(best, link)
    return best


# A diet begun ("I'm on a diet", "started a new diet") after cutting down on a food or drink ("reducing
# my crisps intake"): the step taken further ends the speaker's fact of cutting down.
_DIET_NEWS = re.compile(r"\b(?:on|started|start|began|begun|went on|gone on) (?:a|my|the|this|our) (?:[\w-]+ )?diet\b",
                        re.I)
_DIET_KEPT = re.compile(r"\b(?:never|not|didn't|did not|might|will|'ll|going to|gonna|next|thinking|want|wants|should|"
                        r"would|could|if|again|years ago|used to|off)\b", re.I)
_CUT_DOWN = re.compile(r"\b(?:cut(?:ting)? (?:down|back) on|cut(?:ting)? out|reduc(?:e|es|ed|ing)|limit(?:s|ed|ing)? "
                       r"[\w']+ to|less)\s+(?P<thing>[^,;.!?]*)", re.I)


def diet_read(sentence: str, *, self_names: Iterable[str] = ()) -> ChangeReading | None:
    """The speaker telling a diet begun (``_DIET_NEWS``), for ``diet_target``, or None: a question, a
    hypothesis, a plan, one given up or long ago, someone else's."""
    if _DIET_NEWS.search(sentence) is None:
        return None
    for said, clause, core, _subject_read in _own_clauses(sentence, self_names, refuse=_DIET_KEPT):
        if _DIET_NEWS.search(core) is not None:
            return ChangeReading(sentence=said, clause=clause, kind=NATURAL, cue="diet", ends=True,
                                 other_subject=None, first_object=bool(_FIRST_OBJECT.search(core)))
    return None


def diet_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                told_at: str | None = None) -> Link | None:
    """The speaker's fact among ``facts`` of cutting down on a food or drink (a WordNet food among the
    words after ``_CUT_DOWN``), told before (not within ``SAME_SITTING``), not a plan, not another's."""
    names = frozenset(n.lower() for n in self_names if n)
    best: Link | None = None
    for fact in facts:
        cut = _CUT_DOWN.search(fact.text)
        if cut is None or not (_owners(fact.text) & names) or _same_sitting(fact.valid_from, told_at) \
                or _PLAN.search(fact.text) or _anothers(fact.text, names) or _DIET_NEWS.search(fact.text):
            continue
        foods = tuple(w for w in words_of(cut.group("thing")) if speech.lexicon().lexname(w, "n") == "noun.food")
        if foods:
            link = Link(fact=fact, by="diet", shared=foods, score=2.0 + fact.cosine + len(foods))
            best = _better(best, link)
    return best


# The news readers after a step, each with its target, in the order ``services._change_link`` tries
# them, and the cues of all the news (a plan's end is not read from them).
NEWS_READERS = ((habit_read, habit_target), (count_read, count_target), (bond_read, bond_target),
                (home_read, home_target), (effect_read, effect_target), (diet_read, diet_target))
NEWS_CUES = ("step", "habit", "count", "bond", "home", "effect", "diet")
# The words of the facts a bond grown, a new home or a diet ends, which its telling seldom shares ("got married"
# and "my new SO", "rented an apartment" and "my flat"): a lexical search for its neighbours adds them.
_NEWS_WORDS = ((bond_read, "girlfriend boyfriend partner SO fiance fiancé fiancée engaged seeing dating met"),
               (home_read, "flat apartment house place home cottage studio"),
               (diet_read, "cutting cut reducing reduce limiting less intake"))


def neighbour_words(probe: Probe | None) -> str:
    """The words of the facts a bond grown, a new home or a diet ends (``_NEWS_WORDS``) when
    ``probe`` reads as one, else ""."""
    if probe is None:
        return ""
    names = [probe.holder.lower()]
    return " ".join(words for read, words in _NEWS_WORDS if read(probe.reading.sentence, self_names=names))


def neighbour_searches(text: str, probe: Probe | None) -> tuple[str, str]:
    """The two lexical searches for the stored facts ``text``'s change may end: the text with
    ``neighbour_words``, and those words alone ("" when ``probe`` reads as no change told in other
    words). The readers run once for both."""
    words = neighbour_words(probe)
    return " ".join(filter(None, [text, words])), words


def neighbour_text(text: str, probe: Probe | None) -> str:
    """``text`` as the lexical search for the stored facts its change may end: with
    ``neighbour_words`` when ``probe`` reads as a change told in other words."""
    return neighbour_searches(text, probe)[0]


_DETERMINERS = frozenset("a an the my our his her their this that these those some".split())


def _is_noun(word: str, before: Sequence[str] = ()) -> bool:
    """A noun that can name a plan's thing: one WordNet knows as a noun, or a word it does not know
    at all (a "triathlon"); a word mostly a verb ("test") only after a determiner ("my driving test")."""
    w = word.removesuffix("'s")
    if w in _STOP or w in _GENERIC or w in _WEEKDAYS or w in MONTHS or len(w) <= 2 or w[0].isdigit() \
            or w in _wordnet_other_only():
        return False
    known = w in _wordnet_nouns() or _singular(w) in _wordnet_nouns()
    if not known:
        return w not in _wordnet_other() and not _is_verb_form(w) and w not in speech._verbs()[0]
    return not speech.lexicon().mostly_verb(w) or bool(_DETERMINERS & set(before[-2:]))


def _plan_things(fact: str, *, self_names: frozenset[str]) -> tuple[set[str], tuple[str, str] | None]:
    """(the head nouns of the plan ``fact`` tells, its first phrase after the plan's marker: "a
    transgender conference" gives "conference", "fashion bloggers" "blogger"; and its activity with
    the word after it: ("ask", "her") for "thinking of asking her out"), or (set(), None) when it
    tells no plan."""
    match = _PLAN.search(fact)
    if match is None:
        return set(), None
    # the thing comes before the marker in "a ski trip is on the cards"
    said = fact[:match.start()] if match.group(0).lower() == "on the cards" else fact[match.end():]
    phrase = _PHRASE_BREAK.split(said.strip(), maxsplit=1)[0]
    # the speaker's name as a possessive is a determiner ("Elspeth's driving test"); otherwise no thing
    words = ["my" if w.endswith("'s") and w.removesuffix("'s") in self_names else w for w in words_of(phrase)
             if not (w in self_names or w == "user")]
    activity = None
    for n, word in enumerate(words[:-1]):
        lemma = _lemma(word)
        # a verb as a verb: first in the phrase, after "to" or "and", or a gerund ("a dance studio" is no dancing)
        as_verb = n == 0 or words[n - 1] in ("to", "and") or word.endswith("ing")
        if as_verb and lemma not in _DULL_VERBS and lemma in speech._verbs()[0] and speech.lexicon().mostly_verb(word) \
                and lemma not in ("try", "start", "create", "become", "see"):
            activity = (lemma, words[n + 1])
            break
    # the first noun phrase only: a preposition after a noun starts its complement ("an organizer
    # of tournaments", "a strategy game like Civilization")
    for n in range(1, len(words)):
        if words[n] in _PREPOSITIONS and _is_noun(words[n - 1], words[:n - 1]):
            words = words[:n]
            break
    return _heads(words), activity


_PREPOSITIONS = frozenset("of for in at on with about from by like into onto over through after before during "
                          "near than".split())


def _plan_kinds(fact: str, head: str, *, self_names: frozenset[str]) -> set[str]:
    """The nouns just before ``head`` in the plan ``fact`` ("baseball" in "a baseball game"): a kind of
    the thing the telling must name too ("streamed a game" is no baseball game)."""
    words = ["my" if w.endswith("'s") and w.removesuffix("'s") in self_names else w for w in words_of(fact)
             if not (w in self_names or w == "user")]
    out: set[str] = set()
    for n, word in enumerate(words):
        if _singular(word.removesuffix("'s")) == head:
            m = n - 1
            while m >= 0 and _is_noun(words[m], words[:m]) and words[m] not in _HOLDERS:
                out.add(_singular(words[m]))
                m -= 1
            break
    return out


_OTHERS_CLOSE = _PERSON_NOUNS | frozenset("flatmate roommate housemate team band club group class".split())


def _someone_elses(fact: str, names: frozenset[str]) -> bool:
    """The plan ``fact`` tells is another's: "Priya's brother is going to ...", "Priya's flatmate ..."."""
    # (before the plan's marker: "going to the fair with Priya's uncle" is still hers)
    marker = _PLAN.search(fact)
    words = words_of(fact[:marker.start()] if marker else fact)
    return _subject(fact, names)[1] == "person" or any(
        w.endswith("'s") and w.removesuffix("'s") in names and _singular(nxt) in _OTHERS_CLOSE
        for w, nxt in zip(words, words[1:], strict=False))


@functools.cache
def _wordnet_other_only() -> frozenset[str]:
    """Adjectives and adverbs WordNet does not know as nouns ("regularly", "nearby")."""
    return frozenset(w for w in _wordnet_other() if w not in _wordnet_nouns())


_OWN_PLAN = re.compile(r"^\W*(?:(?:so|and|well|also|now),?\s+)?(?:i|i'm|i am|we|we're|we are|i've|we've|my|our)\b", re.I)


# A plan for an event, said by the speaker ("I'm going to a conference", "we've signed up for the
# marathon"): a noun phrase right after the marker, not a verb ("I'm going to try harder").
_EVENT_PLAN = re.compile(r"^\W*(?:(?:so|and|well|also|now|thanks|yeah|yes)\W*\s+)?(?:i'm|i am|we're|we are|i've|we've|i|we)\s+"
                         r"(?:(?:also|finally|really|just|actually)\s+)?(?:going to|heading to|off to|signed up for|"
                         r"registered for|planning(?: on)?)\s+(?:a|an|the|this|that|my|our)\s+", re.I)


def plan_statement(sentence: str) -> bool:
    """``sentence`` tells a plan or hope of the speaker's own about a thing ("I'm thinking about a
    sprint triathlon this summer", "My driving test is on the cards"): not a question, not to the
    listener, not a plan given up or turned down ("was going to", "not going to")."""
    text = sentence.replace("’", "'").strip()
    if _is_question(text) or re.search(r"\b(?:you\w*|please)\b", text, re.I) or _GIVEN_UP.search(text) \
            or re.search(r"\b(?:not|never|won't|no)\b", text, re.I) or not _OWN_PLAN.match(text):
        return False
    heads, _ = _plan_things(text, self_names=frozenset())
    return bool(heads)


# Verbs that tell any plan done ("finished the kitchen", "did the triathlon", "been to"); another verb must be
# the plan's own activity ("planning to run the marathon", "ran it").
_GENERAL_DONE = frozenset("finish do complete start go have get pass attend manage be".split())
_MONTH_YEAR = re.compile(r"\b(" + "|".join(MONTHS) + r")\s+((?:19|20)\d\d)\b", re.I)


def _not_due(fact: str, told_at: str | None) -> bool:
    """The plan names a month still ahead when the telling is told ("an art show in September 2023",
    told in August): what was done then is not that plan."""
    when = _when(told_at or "")
    return when is not None and any((int(m.group(2)), MONTHS[m.group(1).lower()]) > (when.year, when.month)
                                    for m in _MONTH_YEAR.finditer(fact))


def plan_target(reading: ChangeReading, facts: Sequence[StoredFact], *, self_names: Iterable[str] = (),
                told_at: str | None = None) -> Link | None:
    """The speaker's plan among ``facts`` that ``reading`` (``fulfilment_read``) tells as done, or
    None: a fact telling a plan or hope (``_PLAN``) of the speaker (it names one of ``self_names``)
    whose own thing is what the telling says was done (a head noun of the plan's phrase among
    ``_done_things``, or its activity with the same object: "asking her out", "asked her"), told
    later than the plan (not within ``SAME_SITTING``)."""
    names = frozenset(n.lower() for n in self_names if n)
    given_up = reading.kind != FULFILLED
    # a plan given up names its thing anywhere in the clause ("called off the fair", "the fair was cancelled")
    done = set().union(*(_heads(words_of(p)) for p in _PHRASE_BREAK.split(_LEAD.sub("", reading.clause)))) \
        if given_up else _done_things(_LEAD.sub("", reading.clause))
    told = words_of(reading.clause)
    said = {_singular(w.removesuffix("'s")) for w in told}
    best: Link | None = None
    for fact in facts:
        fact_words = {w.removesuffix("'s") for w in words_of(fact.text)}
        if not (fact_words & names) or _same_sitting(fact.valid_from, told_at) or _someone_elses(fact.text, names) \
                or (_not_due(fact.text, told_at) and not given_up):  # a plan can be given up before it is due
            continue
        heads, activity = _plan_things(fact.text, self_names=names)
        shared = {h for h in heads & done if _plan_kinds(fact.text, h, self_names=names) <= said}
        if shared and activity is not None and not given_up and not _DONE_STATE.search(reading.clause) and not (
                {_lemma(told[n]) for n in _past_verbs(told)} & (_GENERAL_DONE | {activity[0]})):
            shared = set()  # "going to show my paintings", then "made a painting": another doing of the thing
        if not shared and activity is not None and not given_up and any(
                _lemma(told[n]) == activity[0] and told[n + 1:n + 2] == [activity[1]] for n in _past_verbs(told)):
            shared = {activity[0]}
        if not shared:
            continue
        link = Link(fact=fact, by="plan", shared=tuple(sorted(shared)), score=2.0 + fact.cosine + len(shared))
        best = _better(best, link)
    return best
