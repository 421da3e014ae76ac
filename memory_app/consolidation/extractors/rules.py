"""The offline, deterministic extractor: what rules do well, and nothing else.

- First-person attributes and preferences: "my X is Y", "I live in", "I moved to", "I work as/at",
  "I prefer X (over Y)", "I like/love X", "I'm allergic to X", "I was born in", "I drive a".
- Change cues: "now", "new", "no longer", "anymore", "moved to", "switched from X to Y" (natural);
  "actually", "sorry, I meant", "correction" (harsh, an explicit correction). A bare correction
  ("actually, it's Y") applies to the last fact stated in the same session.
- Problem → steps → outcome: a problem statement, the steps the user reports taking, then
  "that worked" / "still broken"; the outcome updates a playbook's counters or proposes a new one.

Speaker-labelled turns ("Caroline: I moved to Boston") name the fact's holder; otherwise the
holder is "User". Sentence splitting is a regex splitter (abbreviation-aware enough for chat);
dates are normalised with python-dateutil so the resolver can compare them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .base import Episode, Extraction, FactCandidate, PlaybookCandidate

VERSION = "rules-1"

_SPEAKER = re.compile(r"^(?P<name>[A-Z][\w.'-]{0,20}(?: [A-Z][\w.'-]{0,20})?):\s+")
_SENTENCE = re.compile(r"(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bvs\.)(?<!\bMrs\.)(?<!\b[A-Z]\.)"
                       r"(?<=[.!?])\s+|\n+")
# Clause boundaries inside a sentence: "..., and my X", "... but I", "; ".
_CLAUSE = re.compile(r"(?:,\s*|\s+)(?:and|but|so|though|because)\s+(?=(?:I|I'm|I've|my|My)\b)|;\s*|\s+-\s+")
_LEAD = re.compile(r"^(?:(?:oh|well|so|also|anyway|btw|by the way|hey|hi|ok|okay|yeah|yes|fyi|just so you know|"
                   r"quick update|update|heads up|and|as i said|like i said|as i mentioned|as mentioned|remember|guess what|"
                   r"funny enough|honestly|to be honest|for the record|fun fact)\b[,:!]?\s*)+", re.I)
_CORRECTION = re.compile(r"^(?:actually|correction|sorry|oops|no wait|wait|my mistake|i misspoke|to correct myself)"
                         r"\b[,:!]?\s*", re.I)
_TRAIL = re.compile(r"\s*(?:\b(?:now|these days|nowadays|anymore|any more|at the moment|currently|lately|"
                    r"for now|though|too|as well|btw|haha|lol|last \w+|this \w+|yesterday|today|recently|"
                    r"(?:a few|a couple of|\w+) (?:days|weeks|months|years) ago|in (?:19|20)\d\d)\b\s*)+$", re.I)
_VALUE_STOP = re.compile(r"\s*(?:[,;:!?()]|\.(?:\s|$)| because | since | which | who | where | but | when | if "
                         r"| so that | and (?:I|my|it|we|she|he|they)\b)", re.I)

_BAD_ATTRS = {"problem", "question", "issue", "point", "guess", "bad", "pleasure", "turn", "fault", "day", "week",
              "bet", "advice", "plan", "idea", "thought", "thoughts", "mind", "head", "life", "experience",
              "goal", "hope", "dream", "concern", "worry", "understanding", "impression", "feeling"}
_VAGUE = re.compile(r"^(?:not|so|too|very|really|pretty|quite|kind of|sort of|a bit|just|also|still|going|"
                    r"fine|ok|okay|good|great|bad|here|there|this|that|it|the same|different|busy|better|worse)\b",
                    re.I)
_PRONOUN = re.compile(r"\b(?:me|you|your|yours|myself|i|i'm|we|us)\b", re.I)

_SUCCESS = re.compile(r"\b(?:(?:that|it|this|which)(?: finally| actually)? (?:worked|did the trick|fixed it|solved it|"
                      r"sorted it)|works now|working (?:again|now)|fixed now|problem solved|all good now|back to normal|"
                      r"is fixed|it's fixed|resolved now)\b", re.I)
_FAILURE = re.compile(r"\b(?:still (?:broken|not working|doesn't work|does not work|won't|isn't|not|the same|failing|"
                      r"dead|stuck)|(?:that|it|this) didn't (?:work|help|fix)|did not (?:work|help)|no luck|"
                      r"didn't help|made no difference|no change)\b", re.I)
_PROBLEM = re.compile(r"\b(?:isn't|is not|won't|doesn't|does not|can't|cannot|can not|stopped|keeps|kept|not working|"
                      r"broken|broke|fails|failing|failed|won't|error|problem with|issue with|trouble with|"
                      r"went offline|is offline|is dead|beeping|flashing)\b", re.I)
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
    if not value or len(value.split()) > 8 or _VAGUE.match(value) or _PRONOUN.search(value):
        return None
    if not allow_ing and re.match(r"^\w+ing\b", value) and not re.match(r"^(?:king|ring|spring|morning|evening|wedding)\b", value, re.I):
        return None
    return value


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


def _attr(m: re.Match, holder: str):
    attr = _words(m["attr"]).lower()
    if attr.split()[-1] in _BAD_ATTRS or attr.split()[0] in _BAD_ATTRS or len(attr.split()) > 4:
        return None
    value = _clean_value(m["value"])
    if value is None:
        return None
    change = "natural" if (m["new"] or m["now"]) else None
    attr = re.sub(r"^(?:new|current)\s+", "", attr)
    verb = m["verb"].replace("'s", "is")
    return f"{_possessive(holder)} {attr} {verb} {value}.", f"attr:{_slot_key(attr)}", value, change


def _simple(template: str, slot: str | Callable[[str], str] | None, change: str | None = None,
            allow_ing: bool = False):
    def build(m: re.Match, holder: str):
        value = _clean_value(m["value"], allow_ing=allow_ing)
        if value is None:
            return None
        key = slot(value) if callable(slot) else slot
        return template.format(h=holder, v=value), key, value, change

    return build


def _prefer(m: re.Match, holder: str):
    value = _clean_value(m["value"], allow_ing=True)
    other = _clean_value(m["other"], allow_ing=True) if m["other"] else None
    if value is None:
        return None
    if other:
        return (f"{holder} prefers {value} over {other}.", "prefers:" + "|".join(sorted([_slot_key(value),
                                                                                         _slot_key(other)])),
                value, None)
    return f"{holder} prefers {value}.", f"prefers:{_slot_key(value).split('_')[-1]}", value, None


def _unlike(m: re.Match, holder: str):
    value = _clean_value(m["value"], allow_ing=True)
    if value is None:
        return None
    change = "natural" if re.search(r"no longer|stopped|anymore|any more", m.group(0), re.I) else None
    return f"{holder} no longer likes {value}." if change else f"{holder} does not like {value}.", \
        f"likes:{_slot_key(value)}", f"not {value}", change


_I = r"^I(?:'m| am)?"
PATTERNS: list[_Pattern] = [
    _Pattern(re.compile(r"^my (?P<new>new |current )?(?P<attr>[a-z][a-z' -]{1,40}?) (?P<verb>is|are|'s) "
                        r"(?P<now>now |actually )?(?P<value>.+)$", re.I), _attr),
    _Pattern(re.compile(r"^I(?:'ve| have)? (?:just |finally |recently )?(?:moved|relocated)(?: back)? to "
                        r"(?P<value>.+)$", re.I), _simple("{h} lives in {v}.", "home", "natural")),
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
_SWITCH = re.compile(r"^I(?:'ve| have)? (?:just )?(?:switched|changed|moved|went|upgraded) from (?P<old>.+?) to "
                     r"(?P<value>.+)$", re.I)
_BARE = re.compile(r"^(?:it's|it is|it was|that's|that is|i meant|i mean|make that|it should be)\s+(?P<value>.+)$", re.I)


@dataclass
class _Session:
    last: tuple[FactCandidate, Callable[[str], str]] | None = None
    problem: tuple[str, str] | None = None  # (trigger, episode id)
    steps: list[tuple[str, str]] = field(default_factory=list)  # (step, episode id)


def _rerender(previous: FactCandidate, value: str) -> str | None:
    # The previous fact's sentence with the corrected value in place of the old one.
    if previous.value and previous.value in previous.text:
        return previous.text.replace(previous.value, value, 1)
    return None


def _clauses(text: str) -> list[str]:
    out = []
    for sentence in _SENTENCE.split(text):
        for clause in _CLAUSE.split(sentence.strip()):
            clause = clause.strip().strip('"').strip()
            if clause:
                out.append(clause)
    return out


def _split_speaker(text: str) -> tuple[str, str]:
    m = _SPEAKER.match(text)
    if m and m["name"].lower() not in ("note", "update", "correction", "ps", "fyi"):
        return m["name"], text[m.end():]
    return "User", text


class RulesExtractor:
    name = "rules"
    version = VERSION

    def extract(self, *, episodes: list[Episode], context: list[Episode]) -> Extraction:
        out = Extraction()
        sessions: dict[str | None, _Session] = {}
        new_ids = {e.id for e in episodes}
        for episode in sorted([*context, *episodes], key=lambda e: (e.occurred_at, e.id)):
            if episode.role != "user":
                continue
            state = sessions.setdefault(episode.session_id, _Session())
            facts, playbooks = self._episode(episode, state)
            if episode.id in new_ids:
                out.facts += facts
                out.playbooks += playbooks
        return out

    def _episode(self, episode: Episode, state: _Session) -> tuple[list[FactCandidate], list[PlaybookCandidate]]:
        holder, text = _split_speaker(episode.text)
        facts: list[FactCandidate] = []
        playbooks: list[PlaybookCandidate] = []
        for raw in _clauses(text):
            harsh = bool(_CORRECTION.match(raw))
            clause = _LEAD.sub("", _CORRECTION.sub("", _LEAD.sub("", raw))).strip()
            clause = _LEAD.sub("", clause).rstrip(".!? ")
            if not clause:
                continue
            if _PROBLEM.search(clause) or _SUCCESS.search(clause) or _FAILURE.search(clause):
                # Trouble and its outcome are procedure, not durable facts ("my hub is offline").
                playbook = self._procedure(clause, episode, state)
                if playbook is not None:
                    playbooks.append(playbook)
                continue
            fact = self._fact(clause, holder, episode, state, harsh=harsh)
            if fact is not None:
                facts.append(fact)
                continue
            playbook = self._procedure(clause, episode, state)
            if playbook is not None:
                playbooks.append(playbook)
        return facts, playbooks

    def _fact(self, clause: str, holder: str, episode: Episode, state: _Session, *, harsh: bool
              ) -> FactCandidate | None:
        ids = (episode.id,)
        if m := _SWITCH.match(clause):
            old, value = _clean_value(m["old"]), _clean_value(m["value"])
            if old and value:
                fact = FactCandidate(text=f"{holder} switched from {old} to {value}.", episode_ids=ids, slot=None,
                                     value=value, change="harsh" if harsh else "natural", replaces=old)
                state.last = None
                return fact
        for pattern in PATTERNS:
            m = pattern.regex.match(clause)
            if not m:
                continue
            built = pattern.build(m, holder)
            if built is None:
                return None
            text, slot, value, change = built
            fact = FactCandidate(text=text, episode_ids=ids, slot=slot, value=value,
                                 change="harsh" if harsh else change)
            state.last = (fact, lambda v, previous=fact: _rerender(previous, v))
            return fact
        if harsh and state.last is not None and (m := _BARE.match(clause)):
            value = _clean_value(m["value"])
            previous, render = state.last
            if value and previous.slot:
                text = render(value)
                if text:
                    fact = FactCandidate(text=text, episode_ids=ids, slot=previous.slot, value=value, change="harsh")
                    state.last = (fact, render)
                    return fact
        return None

    @staticmethod
    def _procedure(clause: str, episode: Episode, state: _Session) -> PlaybookCandidate | None:
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
            if state.problem is not None:
                step = m["step"].rstrip(".!")
                state.steps.append((step[0].upper() + step[1:], episode.id))
            return None
        if _PROBLEM.search(clause) and re.search(r"\b(?:my|the|our)\b", clause, re.I):
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
