"""Demo data: one tenant, a few end-users with memories of every type, and staff logins.

One end-user (Dana) holds only a conversation, over three sessions, consolidated after each: the
inspector opens on facts derived from it with their supporting turns, supersessions produced by a
correction and by a change, a playbook whose counters came from "that worked" / "still broken",
and finished runs in the consolidation panel. Another (Alice) holds a support history of 16
dated threads, each a problem and how it ended, which the scheduled consolidation reads.

Idempotent: existing rows and documents (fixed ids) are left as they are. Staff passwords are
generated once into the state dir, never hard-coded.
"""

import secrets
from datetime import UTC, datetime, timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from engram_core.errors import Conflict, NotFound
from memory_app.consolidation.services import consolidation_run
from memory_app.models import ConsolidationRun
from memory_app.selectors import memory_get
from memory_app.services.episodes import episode_write
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_outcome_record, playbook_write
from memory_app.services.imports import episodes_import
from tenants.models import AgentToken, Membership, Tenant
from tenants.selectors import subject_find
from tenants.services.subjects import subject_get_or_create
from tenants.services.tokens import agent_token_create
from tenants.services.keys import KeyLifetimes

TENANT = ("acme-home", "Acme Smart Home Support")
STAFF = [("support", Membership.Role.SUPPORT), ("admin", Membership.Role.TENANT_ADMIN),
         ("compliance", Membership.Role.COMPLIANCE)]
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)

# (external_id, display name, memories): (type, text, extra fields)
SUBJECTS = [
    ("alice@example.com", "Alice", [
        ("episodic", "My living-room thermostat keeps dropping to 16 degrees at night. Also, the kitchen smoke alarm beeps every few minutes.", {}),
        ("episodic", "I have a cat, so please no loud alarms after 10pm.", {}),
        ("semantic", "Alice has a cat and wants no loud alarms after 22:00.", {"confidence": 0.9}),
        ("semantic", "Alice's thermostat model is the Acme T3.", {"confidence": 0.8}),
        # Her thermostat playbook is the one consolidation derives from her threads (HISTORY).
    ]),
    ("bob@example.com", "Bob", [
        ("episodic", "The front door lock did not unlock with my phone this morning.", {}),
        ("semantic", "Bob uses an Android phone with the Acme app 4.2.", {"confidence": 0.9}),
        ("procedural", "Smart lock does not respond to phone", {
            "trigger": "lock not responding to the app",
            "steps": "1. Check Bluetooth is on. 2. Replace the lock batteries. 3. Re-pair the lock.",
            "success_count": 5, "failure_count": 0}),
    ]),
    ("carol@example.com", "Carol", [
        ("episodic", "I moved to a new flat and need to set up the hub again.", {}),
        ("semantic", "Carol lives in a flat and has one Acme hub.", {"confidence": 0.7}),
    ]),
]
CATALOG = [
    ("Hub factory reset", "Hold the hub's reset button for 10 seconds until the light blinks blue to factory reset it."),
    ("Battery guidance", "Smart locks use four AA lithium batteries; replace them when the app warns at 20%."),
]


def demo_password() -> str:
    path = settings.STATE_DIR / "secrets" / "demo-password"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


class Command(BaseCommand):
    help = "Create the demo tenant, end-users with memories of every type, and staff logins (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--print-logins", action="store_true", help="only print the demo logins")

    def handle(self, *args, print_logins=False, **options):
        password = demo_password()
        token_file = settings.STATE_DIR / "secrets" / "demo-agent-token"
        if print_logins:
            for username, role in STAFF:
                self.stdout.write(f"    {username:<11} {role.label:<13} password {password}")
            self.stdout.write(f"    {'superuser':<11} {'(all)':<13} password {password}")
            if token_file.exists():
                self.stdout.write(f"    agent token (all scopes, tenant {TENANT[0]}): {token_file.read_text().strip()}")
            return
        tenant = self._seed_database(password)
        if not AgentToken.objects.filter(tenant=tenant, name="demo").exists():
            _token, plaintext = agent_token_create(tenant=tenant, name="demo", actor="demo",
                                                   scopes=["memory:read", "memory:write", "memory:forget",
                                                           "tenant:admin"])
            token_file.write_text(plaintext + "\n")
            token_file.chmod(0o600)
        written = self._seed_memories(tenant)
        written += seed_history(tenant)
        written += seed_conversation(tenant)
        self.stdout.write(f"demo data: tenant {tenant.slug}, {len(SUBJECTS) + 1} end-users, {written} memories written"
                          + (" (already seeded)" if not written else ""))

    @transaction.atomic
    def _seed_database(self, password: str) -> Tenant:
        User = get_user_model()
        tenant, _ = Tenant.objects.get_or_create(slug=TENANT[0], defaults={"name": TENANT[1]})
        for username, role in STAFF:
            user, created = User.objects.get_or_create(username=username, defaults={"is_staff": True})
            if created:
                user.set_password(password)
                user.save()
            Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": role})
        if not User.objects.filter(username="superuser").exists():
            User.objects.create_superuser("superuser", "", password)
        return tenant

    def _seed_memories(self, tenant: Tenant) -> int:
        """Write through the real services (keys minted, embeddings computed); fixed ids make
        a second run a no-op."""
        external_id, name, memories = SUBJECTS[-1]
        last = subject_find(tenant=tenant, external_id=external_id)
        if last is not None:  # memories are written in order: if the last one exists, all do
            try:
                memory_get(subject=last, memory_id=f"demo-{name.lower()}-{len(memories) - 1}")
                return 0
            except NotFound:
                pass
        created = 0
        for n, (title, text) in enumerate(CATALOG):
            created += _once(partial(catalog_entry_write, tenant=tenant, title=title, text=text,
                                     memory_id=f"demo-catalog-{n}", source="demo"))
        for external_id, name, memories in SUBJECTS:
            subject = subject_get_or_create(tenant=tenant, external_id=external_id, display_name=name, actor="demo",
                                            lifetimes=KeyLifetimes.from_settings())
            for n, (memory_type, text, extra) in enumerate(memories):
                common = {"subject": subject, "memory_id": f"demo-{name.lower()}-{n}", "source": "demo"}
                if memory_type == "episodic":
                    write = partial(episode_write, text=text, occurred_at=NOW - timedelta(days=30 * n),
                                    **common, **extra)
                elif memory_type == "semantic":
                    write = partial(fact_write, text=text, **common, **extra)
                else:
                    write = partial(_playbook, **common, **extra)
                created += _once(write)
        return created


def _once(write) -> int:
    try:
        write()
    except Conflict:  # seeded by an earlier run
        return 0
    return 1


def _playbook(*, subject, memory_id: str, source: str, trigger: str, steps: str, success_count: int,
              failure_count: int) -> None:
    playbook_write(subject=subject, trigger=trigger, steps=steps, memory_id=memory_id, source=source)
    for success, times in ((True, success_count), (False, failure_count)):
        for _ in range(times):
            playbook_outcome_record(subject=subject, playbook_id=memory_id, success=success)


# ---------------------------------------------------------------- history for the inspector

# Alice's support history: threads (one session each, a problem and how it ended, some over two
# days), dated back from today so "the past month" finds the recent ones. Each turn is
# (minutes after the thread's start, text); ids are demo-alice-t<thread>-<turn>.
HISTORY = [
    (64, 9, [  # 0: setting up
        (0, "Hi, I just got the Acme starter kit: a hub, a T3 thermostat, a smart lock and two motion sensors."),
        (2, "Our house is a two-storey terrace, and the router sits in the hallway."),
        (3, "How do I add the thermostat to the hub?"),
        (9, "Found the pairing code on the back of the T3, the thermostat is in the app now."),
        (11, "Please set the living room to 20 degrees every day, that's what I'm used to."),
        (15, "Great, the schedule shows 20 all day. Thanks!"),
    ]),
    (60, 22, [  # 1: the thermostat drops at night (the outcome comes the next morning)
        (0, "My living-room thermostat keeps dropping to 16 degrees around 2am."),
        (2, "The night schedule in the app says 19 all night."),
        (5, "Eco mode is on, I never turned that on myself."),
        (8, "I disabled eco mode and re-synced the schedule."),
        (9, "I'll check how it goes tonight."),
        (570, "Good morning! It stayed at 19 all night, that worked."),
    ]),
    (55, 7, [  # 2: the hub offline after a power cut
        (0, "The hub is offline after the power cut last night, its light is flashing red."),
        (4, "I waited ten minutes but nothing changed."),
        (6, "I turned the router off and on, and then the hub."),
        (10, "That did the trick, the light is solid green again."),
    ]),
    (50, 8, [  # 3: the front door lock
        (0, "The front door lock won't open from the app."),
        (1, "I had to use the key to get in this morning."),
        (2, "Can you check the front door lock for me?"),
        (12, "I tried four new AA lithium batteries in the lock."),
        (14, "That sorted it, thanks!"),
    ]),
    (46, 13, [  # 4: working from home
        (0, "I started working from home this month."),
        (3, "Could the weekday schedule be 21 degrees from 8am to 6pm? I work in the living room."),
        (6, "I see the new weekday schedule in the app, thank you."),
    ]),
    (42, 21, [  # 5: the hallway motion sensor, not fixed in this thread
        (0, "The hallway motion sensor isn't working, the hall light stays off at night."),
        (3, "I tried a new battery in it."),
        (5, "Still not working."),
        (9, "I removed it from the hub and re-paired it."),
        (12, "No luck, the app says the sensor is unreachable."),
        (15, "OK, I will send it back for a replacement under the warranty."),
    ]),
    (38, 18, [  # 6: the kitchen smoke alarm
        (0, "The kitchen smoke alarm keeps chirping every few minutes."),
        (2, "Is that the battery?"),
        (6, "I tried a new battery in the kitchen smoke alarm."),
        (7, "It's quiet now, problem solved."),
    ]),
    (34, 17, [  # 7: the garage door sensor
        (0, "The garage door sensor keeps showing open although the door is shut."),
        (4, "I cleaned the sensor and the magnet and tightened the bracket."),
        (6, "That fixed it, it shows closed now."),
    ]),
    (30, 10, [  # 8: the replacement hallway sensor (thread 5 continued)
        (0, "The replacement for the hallway motion sensor arrived today."),
        (5, "I paired the new sensor with the hub and the hall light comes on again when I walk past."),
        (6, "Thanks for sending it so quickly."),
    ]),
    (27, 23, [  # 9: the cat and the living-room motion sensor
        (0, "The living-room motion sensor keeps turning the lights on in the middle of the night."),
        (1, "I think it's my cat Miso walking past it."),
        (2, "Can the sensor ignore pets?"),
        (5, "I enabled pet immunity in the sensor settings."),
        (540, "The lights stayed off all night, that solved it."),
    ]),
    (23, 19, [  # 10: the bedroom lights routine
        (0, "I would like the bedroom lights to fade in at 6:30 on weekdays."),
        (4, "I set up the wake-up routine in the app the way you described."),
        (720, "The bedroom lights came on at 6:30 this morning, exactly as I wanted."),
    ]),
    (18, 20, [  # 11: cooler nights
        (0, "I sleep better when it is cooler, so I want 19 degrees at night and 21 during the day."),
        (3, "Please make the night temperature 19 degrees from 11pm to 7am."),
        (5, "Perfect, thank you."),
    ]),
    (14, 12, [  # 12: too many notifications
        (0, "The app sent me a notification every time the front door opened today, that's too many."),
        (2, "I only want notifications when the house is set to away."),
        (5, "I changed the notification settings to away mode only."),
        (6, "Much better, thanks."),
    ]),
    (9, 16, [  # 13: the hub offline after a new router
        (0, "The hub is offline again since my internet provider's new router went in an hour ago."),
        (3, "I turned the router off and on, and then the hub."),
        (6, "Still not working, the light keeps flashing red."),
        (9, "I tried the hub onboarding in the app again with the new Wi-Fi name and password."),
        (13, "That worked, the light is solid green and the sensors report again."),
    ]),
    (4, 7, [  # 14: the thermostat drops at night again, after a firmware update
        (0, "My living-room thermostat keeps dropping to 16 degrees at night again."),
        (2, "The app says the thermostat got a firmware update two days ago."),
        (4, "Eco mode was back on after the update."),
        (6, "I disabled eco mode again and re-synced the schedule."),
        (1440, "It held 19 degrees all night, that worked again."),
    ]),
    (1, 18, [  # 15: a question about an earlier thread
        (0, "What did we decide about the night temperature last time?"),
        (2, "Thanks, that's all for today."),
    ]),
]

# Alice's living-room fact, superseded twice (natural, then harsh): a 3-version chain, each
# version supported by the turn that says it.
FACT_CHAIN = [
    ("Alice keeps the living room at 20 degrees.", "natural", 0.8, "demo-alice-t00-04"),
    ("Alice keeps the living room at 21 degrees since she started working from home.", "natural", 0.9,
     "demo-alice-t04-01"),
    ("Alice keeps the living room at 19 degrees at night and 21 during the day.", "harsh", 1.0, "demo-alice-t11-00"),
]
PLAYBOOK_CHAIN = [
    ("hub offline after a power cut", "1. Wait two minutes. 2. Power-cycle the router."),
    ("hub offline after a power cut", "1. Power-cycle the router. 2. Power-cycle the hub. 3. Check the LED is solid green."),
    ("hub offline after a power cut or a router change",
     ("1. Power-cycle the router, then the hub. 2. If the Wi-Fi changed, re-run hub onboarding in the app. "
      "3. Check the LED is solid green and devices report within a minute.")),
]
# Reported outcomes (True = success) per playbook version, oldest first: the last version is the reliable one.
OUTCOMES = [[False, True, False], [True, False, True, True], [True, True, False, True, True, True, True]]


def history_episodes(now: datetime) -> list[dict]:
    """Alice's history as episodes to import (``HISTORY``, dated back from ``now``)."""
    episodes = []
    for thread, (days_ago, hour, turns) in enumerate(HISTORY):
        start = (now - timedelta(days=days_ago)).replace(hour=hour, minute=0, second=0, microsecond=0)
        for n, (minutes, text) in enumerate(turns):
            episodes.append({"id": f"demo-alice-t{thread:02d}-{n:02d}", "text": text,
                             "session_id": f"demo-alice-thread-{thread:02d}",
                             "occurred_at": (start + timedelta(minutes=minutes)).isoformat(), "role": "user"})
    return episodes


def seed_history(tenant: Tenant) -> int:
    """Alice gets her support history (``HISTORY``), a 3-version fact chain and a 3-version
    playbook chain with outcome history (each outcome is an audit event). Idempotent (fixed ids)."""
    subject = subject_find(tenant=tenant, external_id=SUBJECTS[0][0])
    if subject is None:
        return 0
    try:
        memory_get(subject=subject, memory_id=f"demo-playbook-v{len(PLAYBOOK_CHAIN) - 1}")
        return 0
    except NotFound:
        pass
    written = 0
    try:
        written += len(episodes_import(subject=subject, episodes=history_episodes(datetime.now(UTC))))
    except Conflict:  # imported by an earlier, interrupted run
        pass
    previous: list[str] = []
    for n, (text, contradiction, confidence, support) in enumerate(FACT_CHAIN):
        written += _once(partial(fact_write, subject=subject, text=text, confidence=confidence,
                                 supersedes=previous or None, contradiction=contradiction, source="demo",
                                 supporting_episode_ids=[support], memory_id=f"demo-fact-v{n}"))
        previous = [f"demo-fact-v{n}"]
    previous = []
    for n, (trigger, steps) in enumerate(PLAYBOOK_CHAIN):
        memory_id = f"demo-playbook-v{n}"
        if _once(partial(playbook_write, subject=subject, trigger=trigger, steps=steps,
                         supersedes=previous or None, source="demo", memory_id=memory_id)):
            written += 1
            for success in OUTCOMES[n]:
                playbook_outcome_record(subject=subject, playbook_id=memory_id, success=success,
                                        actor="demo")
        previous = [memory_id]
    return written


# ---------------------------------------------------------------- a conversation, consolidated

CONVERSATION_SUBJECT = ("dana@example.com", "Dana")
# (days before NOW, turns) per session; consolidation runs after each session.
CONVERSATION = [
    (40, ["Hi! I just moved to Leeds last week and I'm setting up the hub in the new flat.",
          "It's me, my partner Sam and our daughter Ivy who is 6.",
          "Our internet provider is Virgin Media.",
          "The hub won't connect to the wifi.",
          "I restarted the hub.",
          "Still not working.",
          "I moved the hub next to the router and re-ran onboarding in the app.",
          "That worked, thanks!"]),
    (20, ["The hub won't connect to the wifi again after the power cut on Sunday.",
          "I moved the hub next to the router and re-ran onboarding.",
          "Still broken.",
          "I power cycled the router and then the hub.",
          "That did the trick.",
          "I work as a nurse, mostly night shifts, so no loud alarms before noon please."]),
    (5, ["Actually, Ivy is 7, not 6 - her birthday was in March.",
         "We switched from Virgin Media to BT last week.",
         "I'm allergic to dust, so please remind me about the air purifier filter."]),
]


def seed_conversation(tenant: Tenant) -> int:
    """Dana's sessions written as her turns, each session consolidated by the offline extractor
    as the scheduler would. Idempotent: nothing is written once her runs exist."""
    external_id, name = CONVERSATION_SUBJECT
    subject = subject_get_or_create(tenant=tenant, external_id=external_id, display_name=name, actor="demo",
                                    lifetimes=KeyLifetimes.from_settings())
    if ConsolidationRun.objects.filter(subject=subject, status=ConsolidationRun.Status.SUCCEEDED).exists():
        return 0
    written = 0
    for session, (days_ago, turns) in enumerate(CONVERSATION):
        start = NOW - timedelta(days=days_ago)
        for n, text in enumerate(turns):
            written += _once(partial(episode_write, subject=subject, text=text, source="demo",
                                     occurred_at=start + timedelta(minutes=2 * n), session_id=f"dana-{session}",
                                     memory_id=f"demo-dana-s{session}-{n:02d}"))
        consolidation_run(subject=subject, trigger=ConsolidationRun.Trigger.MANUAL)
    return written
