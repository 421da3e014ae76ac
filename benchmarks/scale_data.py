"""The scale benchmark's pure parts: the corpus plan per size, the seeded synthetic text, the
Markdown table, the plots and the median of several runs. No Django, no Elasticsearch
(tests/benchmarks/test_scale_data.py covers them).

The corpus at ``size`` memories: 2% tenant catalog entries, spread over the tenants; 20% (by
default) one heavy end-user's; the rest shared by ``tenants x users_per_tenant`` ordinary
end-users. Every end-user's share is 10% facts, 3% playbooks and the rest episodes. The heavy
end-user therefore holds 200 memories at 1k, 2,000 at 10k and 20,000 at 100k. Plans grow
monotonically, so a run loads 1k, measures, adds the difference up to 10k, and so on.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

CATALOG_SHARE = 0.02
FACT_SHARE = 0.10
PLAYBOOK_SHARE = 0.03
HEAVY = "heavy"


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


# ---------------------------------------------------------------- report

_RECALL_ROWS = [("recall, new question", "recall_new"), ("recall, repeated question", "recall_repeated"),
                ("recall, heavy end-user, new question", "heavy_new"),
                ("recall, heavy end-user, repeated question", "heavy_repeated"),
                ("turn (write + pre-recall)", "turn"), ("fact write superseding one fact", "fact_supersede")]


def _ms(p: dict | None) -> str:
    return " / ".join(f"{p[k]:.1f}" for k in ("p50", "p95", "p99")) if p else "n/a"


def markdown_table(rows: list[dict]) -> str:
    """One column per corpus size; latencies as p50 / p95 / p99 ms."""
    head = "| | " + " | ".join(f"{r['memories']:,} memories" for r in rows) + " |"
    lines = [head, "|---|" + "---:|" * len(rows)]
    lines.append("| heavy end-user's memories | " + " | ".join(f"{r['heavy_memories']:,}" for r in rows) + " |")
    for label, key in _RECALL_ROWS:
        lines.append(f"| {label}, p50 / p95 / p99 ms | " + " | ".join(_ms(r.get(key)) for r in rows) + " |")
    for label, key, fmt in [("bulk import, all end-users (one call each), episodes/s", "import_eps", "{:.0f}"),
                            ("bulk import, calls of >= 1,000 episodes only, episodes/s", "import_eps_large", "{:.0f}"),
                            ("index size on disk, MB", "store_mb", "{:.1f}"),
                            ("Engram process RSS, MB", "rss_mb", "{:.0f}"),
                            ("Elasticsearch heap used / max, MB", "heap", "{}")]:
        lines.append(f"| {label} | " + " | ".join("n/a" if r.get(key) is None else fmt.format(r[key])
                                                   for r in rows) + " |")
    return "\n".join(lines)


def plots(rows: list[dict], http: list[dict], *, out: Path, label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (title, key) in zip(axes, [("ordinary end-users", "recall_new"), ("heavy end-user", "heavy_new")],
                                strict=True):
        for p, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ax.plot(sizes, [r[key][p] for r in rows], style, label=f"new question {p}")
        ax.plot(sizes, [r[key.replace("new", "repeated")]["p50"] for r in rows], "x-", label="repeated question p50")
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
        ax.set_xlabel("memories in the corpus")
        ax.set_title(f"recall, {title}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("latency, ms")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Engram recall latency vs corpus size (service level) — {label}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "scale_latency.png", dpi=110)
    plt.close(fig)
    if not http:
        return
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    clients = [r["clients"] for r in http]
    ax.plot(clients, [r["throughput_rps"] for r in http], "o-", color="tab:blue", label="requests/s (all)")
    ax.set_xlabel("concurrent HTTP clients")
    ax.set_ylabel("requests/s", color="tab:blue")
    ax.set_xticks(clients)
    ax2 = ax.twinx()
    for kind, style in (("recall", "s--"), ("turn", "^:")):
        ax2.plot(clients, [r[kind]["p95_ms"] for r in http], style, color="tab:red", label=f"{kind} p95 ms")
    ax2.set_ylabel("p95 latency, ms", color="tab:red")
    handles = [h for a in (ax, ax2) for h in a.get_legend_handles_labels()[0]]
    ax2.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8)
    ax.set_title(f"HTTP at {sizes[-1]:,} memories — {label}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "scale_throughput.png", dpi=110)
    plt.close(fig)


_CPU_FEATURES = [("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"),
                 ("amx_tile", "AMX")]


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, ..., utime at [11],
    stime at [12]); None if the process is gone or unreadable."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_description(cpuinfo: str) -> str:
    """The CPU model and the vector instruction sets onnxruntime's kernels care about, from the
    text of ``/proc/cpuinfo`` (its first processor): e.g. "AMD EPYC; AVX2, AVX-512, AVX-512 VNNI"."""
    model, flags = "unknown CPU", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    features = [name for flag, name in _CPU_FEATURES if flag in flags]
    return f"{model}; {', '.join(features) or 'no AVX2'}"


def median_of_runs(runs: list[dict]) -> dict:
    """One ``scale.json`` from several: every number the median of the runs' (sizes, client
    counts and sample counts must match), the heap as the median used over the largest maximum.
    ``runs`` keeps each run's label, duration and headline figures."""
    def merge(values: list):
        first = values[0]
        if isinstance(first, dict):
            if set().union(*values) != set(first):
                raise ValueError("the runs measured different things")
            return {key: merge([v.get(key) for v in values]) for key in first}
        if isinstance(first, list):
            if len({len(v) for v in values}) != 1:
                raise ValueError("the runs measured different sizes or client counts")
            return [merge(list(items)) for items in zip(*values, strict=True)]
        if first is None or isinstance(first, bool):
            return first if all(v == first for v in values) else None
        if all(isinstance(v, int) for v in values):  # sizes, counts and whole-ms latencies stay whole
            return round(statistics.median(values))
        if isinstance(first, (int, float)):
            return statistics.median(values)
        if isinstance(first, str) and " / " in first:  # heap "used / max"
            used = statistics.median(float(v.split(" / ")[0]) for v in values)
            return f"{used:.0f} / {max(float(v.split(' / ')[1]) for v in values):.0f}"
        return first if all(v == first for v in values) else " | ".join(values)

    for group, key in (("rows", "memories"), ("http", "clients")):
        shapes = {tuple(item[key] for item in run[group]) for run in runs}
        if len(shapes) > 1:
            raise ValueError(f"the runs measured different {key}: {sorted(shapes)}")
    return {"label": f"median of {len(runs)} runs", "rows": merge([r["rows"] for r in runs]),
            "http": merge([r["http"] for r in runs]) if all(r["http"] for r in runs) else [],
            "runs": [{"label": r["label"], "minutes": r.get("minutes"), "machine": r.get("machine"),
                      "recall_new": [row["recall_new"] for row in r["rows"]],
                      "heavy_new": [row["heavy_new"] for row in r["rows"]],
                      "import_eps": [row["import_eps"] for row in r["rows"]]} for r in runs]}
