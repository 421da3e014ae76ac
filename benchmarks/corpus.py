"""The benchmarks' corpus: seeded synthetic text, and how many memories of each kind every
end-user holds at a size (benchmarks/loading.py puts it into Engram).

At ``size`` memories: 2% tenant catalog entries, spread over the tenants; 20% (by default) one
heavy end-user's; the rest shared by ``tenants x users_per_tenant`` ordinary end-users. Every
end-user's share is 10% facts, 3% playbooks and the rest episodes (the heavy end-user holds
20,000 memories at 100k). Plans grow monotonically: a run loads 1k, measures, adds the
difference up to 10k, and so on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

CATALOG_SHARE = 0.02
FACT_SHARE = 0.10
PLAYBOOK_SHARE = 0.03
HEAVY = "heavy"
START = datetime(2024, 1, 1, tzinfo=UTC)  # the synthetic conversations' first day


@dataclass(frozen=True)
class Counts:
    episodes: int = 0
    facts: int = 0
    playbooks: int = 0

    @property
    def total(self) -> int:
        return self.episodes + self.facts + self.playbooks


@dataclass(frozen=True)
class Plan:
    size: int
    catalog: tuple[int, ...]  # per tenant
    users: dict[tuple[int, str], Counts]  # (tenant index, external id) -> counts

    @property
    def total(self) -> int:
        return sum(self.catalog) + sum(c.total for c in self.users.values())


def spread(total: int, n: int, *, offset: int = 0) -> list[int]:
    """``total`` split over ``n`` slots as evenly as possible; the remainder goes to the slots
    from ``offset`` on (so different kinds do not pile on the same first slots). Monotonic in
    ``total``: each slot's share never shrinks when ``total`` grows."""
    base, extra = divmod(total, n)
    return [base + ((i - offset) % n < extra) for i in range(n)]


def _kinds(total: int) -> Counts:
    facts, playbooks = round(total * FACT_SHARE), round(total * PLAYBOOK_SHARE)
    return Counts(episodes=total - facts - playbooks, facts=facts, playbooks=playbooks)


def plan(size: int, *, tenants: int = 100, users_per_tenant: int = 4, heavy_share: float = 0.2) -> Plan:
    catalog = round(size * CATALOG_SHARE)
    heavy = round(size * heavy_share)
    normal = _kinds(size - catalog - heavy)
    n_users = tenants * users_per_tenant
    episodes = spread(normal.episodes, n_users)
    facts = spread(normal.facts, n_users, offset=n_users // 3)
    playbooks = spread(normal.playbooks, n_users, offset=2 * n_users // 3)
    users = {(0, HEAVY): _kinds(heavy)}
    for n in range(n_users):
        users[(n // users_per_tenant, f"user-{n}")] = Counts(episodes[n], facts[n], playbooks[n])
    return Plan(size=size, catalog=tuple(spread(catalog, tenants)), users=users)


# ---------------------------------------------------------------- synthetic text

_PEOPLE = ["my wife", "my husband", "my son Tom", "my daughter Mia", "my neighbour", "my manager", "my sister Anna",
           "my brother Karl", "my mother", "my dad", "my colleague Priya", "our babysitter", "my landlord",
           "my friend Jonas", "my partner", "my grandmother"]
_DEVICES = ["router", "thermostat", "dishwasher", "smart plug", "doorbell camera", "e-bike", "laptop", "heat pump",
            "robot vacuum", "smart speaker", "washing machine", "solar inverter", "baby monitor", "car charger",
            "tablet", "printer", "TV box", "garage door opener", "water heater", "smoke detector"]
_PROBLEMS = ["keeps disconnecting", "shows error E{n}", "makes a clicking noise", "drains the battery overnight",
             "will not turn on", "restarts every few hours", "is stuck on the update screen", "runs very hot",
             "lost all its settings", "blinks orange", "is much slower than before", "ignores the schedule"]
_PLACES = ["Hamburg", "Lisbon", "the cabin", "the office", "Lyon", "Kraków", "Bologna", "Oslo", "my parents' house",
           "Valencia", "Edinburgh", "the lake house", "Vienna", "Rotterdam", "Ghent", "Porto"]
_PAST = ["yesterday", "last Tuesday", "two weeks ago", "this morning", "on Sunday evening", "last month",
         "over the weekend", "a few days ago", "in March", "right after the holidays", "last night"]
_FUTURE = ["next Friday", "in two weeks", "tomorrow", "at the end of the month", "in June", "this weekend",
           "next spring", "on Monday morning", "after the school break"]
_ACTIVITIES = ["hiking", "baking sourdough", "marathon training", "learning Spanish", "playing the cello",
               "rock climbing", "woodworking", "birdwatching", "a pottery class", "open-water swimming", "chess",
               "gardening", "photography", "a coding bootcamp"]
_FOODS = ["mushrooms", "spicy food", "oat milk", "sushi", "peanuts", "lentil soup", "dark chocolate", "coriander",
          "goat cheese", "black coffee", "shellfish", "gluten"]
_TASKS = ["pay the electricity bill", "call the plumber", "renew my passport", "book the car service",
          "send the warranty form", "cancel the gym membership", "order new filters", "back up the photos",
          "water the plants", "pick up the parcel"]
_PLANS = ["Basic", "Plus", "Family", "Pro", "Business Starter"]
_BRANDS = ["Nordlicht", "Kestrel", "Avalon", "Brightwave", "Tundra", "Helio", "Quokka", "Marlin"]
_CHANNELS = ["email", "phone", "chat", "SMS"]
_DAYPARTS = ["morning", "afternoon", "evening"]
_RELATIONS = ["wife", "husband", "son", "daughter", "dog", "cat", "manager", "sister", "brother"]
_NAMES = ["Lena", "Omar", "Sofia", "Björn", "Aiko", "Mateo", "Zoe", "Ravi", "Nina", "Felix", "Ines", "Pablo"]

_EPISODES = [
    "{past} the {device} {problem} again.",
    "I'm travelling to {place} {future} and need the {device} to work while I'm away.",
    "{person_cap} started {activity} {past} and loves it.",
    "Can you remind me to {task} {future}?",
    "My {brand} {device} order #{num} still hasn't arrived.",
    "I tried resetting the {device} {past} but it {problem}.",
    "We're planning a family weekend in {place} {future}.",
    "I really don't like {food}, but {person} eats it every day.",
    "The firmware update to version {major}.{minor} on my {device} {outcome}.",
    "My budget for a new {device} is around {amount} euros.",
    "{person_cap} is allergic to {food}, please keep that in mind.",
    "Since {past} the {device} in the {room} {problem}.",
    "I switched to the {plan} plan {past}; is the {device} covered by it?",
    "Please use {channel} to reach me, ideally in the {daypart}.",
    "I moved from {place} to {place2} {past}.",
    "{person_cap} borrowed my {device} {past} and now it {problem}.",
    "The technician came {past} and replaced the {part} of the {device}.",
    "I have a meeting in {place} {future}, can you block the {daypart}?",
    "Our {device} is in the {room}, right next to the {device2}.",
    "Is it normal that the {device} uses {amount} watts at night?",
    "I've been into {activity} since {past}, so I'm out most evenings.",
    "Thanks, the {device} works now after I {fix}.",
    "My warranty number for the {device} is {brand_up}-{num}.",
    "{person_cap} wants a {brand} {device} for their birthday {future}.",
]
_ROOMS = ["kitchen", "hallway", "basement", "living room", "garage", "attic", "bedroom", "home office"]
_PARTS = ["power supply", "fan", "display", "filter", "main board", "antenna", "door seal", "sensor"]
_OUTCOMES = ["went fine", "failed halfway", "made it slower", "fixed the noise", "reset my schedule"]
_FIXES = ["unplugged it for a minute", "moved it closer to the window", "updated the app", "changed the channel",
          "cleaned the filter", "re-paired it with my phone"]
_FACTS = [
    "User's {relation} is called {name}.", "User lives in {place}.",
    "User prefers {channel} contact in the {daypart}.", "User owns a {brand} {device}.",
    "User is allergic to {food}.", "User is on the {plan} plan.", "User's hobby is {activity}.",
    "User keeps the {device} in the {room}.", "User works from {place} on {weekday}s.",
    "User's budget for home devices is {amount} euros.", "User does not eat {food}.",
    "User's {device} was bought in {year}.",
]
_PLAYBOOK_STEPS = [
    "Ask whether the status light is on", "Power-cycle the {device} for 30 seconds",
    "Check the app for a firmware update", "Move the {device} closer to the router",
    "Reset to factory settings (hold the button 10 s)", "Re-pair it in the app", "Check the fuse and the socket",
    "Collect the serial number and open a ticket", "Clean the {part}", "Offer a technician visit",
]
_QUESTIONS = [
    "What did I tell you about my {device}?", "When am I going to {place}?", "What is {person} doing these days?",
    "Which plan am I on?", "What food should you avoid suggesting to me?", "Did the {device} problem come back?",
    "How do I fix the {device} when it {problem}?", "What did I ask you to remind me about?",
    "Where do I live now?", "How should you contact me?", "What is my budget for a new {device}?",
    "What did the technician replace?", "Who is allergic to {food}?", "What are my hobbies?",
    "Is my {brand} {device} still under warranty?", "What happened after the firmware update?",
]
# Questions that gather over time ("has"/"have": memory_app.recall.read.query_gathers), which take
# the second hop; the latency suite times them in a row of their own.
_GATHERING = [
    "Which places have I travelled to?", "What has {person} been doing lately?",
    "What problems has the {device} had?", "Which devices have given me trouble?",
    "What has the technician replaced so far?", "What have I asked you to remind me about?",
    "Which firmware updates have I installed on the {device}?", "What has {person} borrowed from me?",
]
_LEADS = ["", "", "Quick question: ", "Hey, ", "Remind me, ", "Sorry to ask again, ", "Before I call {person}: "]
_TAILS = ["", "", " I think it was {past}.", " It's about the one in the {room}.", " I need it for {future}.",
          " {person_cap} asked me.", " The {brand} one, I mean."]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def _fill(template: str, rng: random.Random) -> str:
    person = rng.choice(_PEOPLE)
    slots = {
        "past": rng.choice(_PAST), "future": rng.choice(_FUTURE), "device": rng.choice(_DEVICES),
        "device2": rng.choice(_DEVICES), "problem": rng.choice(_PROBLEMS).replace("{n}", str(rng.randrange(10, 99))),
        "place": rng.choice(_PLACES), "place2": rng.choice(_PLACES), "person": person,
        "person_cap": person[0].upper() + person[1:], "activity": rng.choice(_ACTIVITIES), "food": rng.choice(_FOODS),
        "task": rng.choice(_TASKS), "brand": rng.choice(_BRANDS), "brand_up": rng.choice(_BRANDS).upper()[:3],
        "num": rng.randrange(10000, 99999), "major": rng.randrange(1, 9), "minor": rng.randrange(0, 30),
        "outcome": rng.choice(_OUTCOMES), "amount": rng.choice([40, 80, 150, 300, 450, 600, 1200]),
        "room": rng.choice(_ROOMS), "plan": rng.choice(_PLANS), "channel": rng.choice(_CHANNELS),
        "daypart": rng.choice(_DAYPARTS), "part": rng.choice(_PARTS), "fix": rng.choice(_FIXES),
        "relation": rng.choice(_RELATIONS), "name": rng.choice(_NAMES), "weekday": rng.choice(_WEEKDAYS),
        "year": rng.randrange(2015, 2026),
    }
    text = template.format(**slots)
    return text[:1].upper() + text[1:]


class Synth:
    """Seeded text: the same (seed, owner, kind, n) always gives the same text, whatever order the
    corpus is built in."""

    def __init__(self, seed: int = 7):
        self.seed = seed

    def _rng(self, owner: str, kind: str, n: int) -> random.Random:
        return random.Random(f"{self.seed}/{owner}/{kind}/{n}")

    def episode(self, owner: str, n: int, *, start: datetime) -> dict:
        """The ``n``th episode of ``owner``: text, a time within the two years after ``start``
        (later ``n`` later in time) and a session of six consecutive turns."""
        rng = self._rng(owner, "episode", n)
        text = _fill(rng.choice(_EPISODES), rng)
        if rng.random() < 0.3:  # a second sentence now and then: real turns vary in length
            text += " " + _fill(rng.choice(_EPISODES), rng)
        occurred = start + timedelta(minutes=n * 37 + rng.randrange(30))
        return {"text": text, "occurred_at": occurred.isoformat(), "session_id": f"{owner}-s{n // 6}"}

    def fact(self, owner: str, n: int) -> str:
        rng = self._rng(owner, "fact", n)
        return _fill(rng.choice(_FACTS), rng)

    def playbook(self, owner: str, n: int) -> tuple[str, str]:
        rng = self._rng(owner, "playbook", n)
        device = rng.choice(_DEVICES)
        trigger = f"the {device} {rng.choice(_PROBLEMS).replace('{n}', str(rng.randrange(10, 99)))}"
        steps = rng.sample(_PLAYBOOK_STEPS, rng.randrange(3, 6))
        return trigger, "\n".join(f"{i}. {s.format(device=device, part=rng.choice(_PARTS))}"
                                  for i, s in enumerate(steps, 1))

    def catalog(self, owner: str, n: int) -> tuple[str, str]:
        rng = self._rng(owner, "catalog", n)
        device, brand = rng.choice(_DEVICES), rng.choice(_BRANDS)
        title = f"{brand} {device}: {rng.choice(['setup', 'troubleshooting', 'warranty', 'energy use', 'reset'])}"
        text = " ".join(_fill(rng.choice(_PLAYBOOK_STEPS), rng) + "." for _ in range(3))
        return title, f"{brand} {device}. {text}"

    def question(self, n: int) -> str:
        rng = self._rng("questions", "question", n)
        lead, question = _fill(rng.choice(_LEADS), rng), _fill(rng.choice(_QUESTIONS) + rng.choice(_TAILS), rng)
        return lead + question[0].lower() + question[1:] if lead else question

    def gathering_question(self, n: int) -> str:
        """The ``n``th question gathering over time (one that takes recall's second hop)."""
        rng = self._rng("questions", "gathering", n)
        lead, question = _fill(rng.choice(_LEADS), rng), _fill(rng.choice(_GATHERING), rng)
        return lead + question[0].lower() + question[1:] if lead else question
