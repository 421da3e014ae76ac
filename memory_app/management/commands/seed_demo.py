"""Demo data: one tenant, a few end-users with memories of every type, and staff logins.

Idempotent: existing rows and documents (fixed ids) are left as they are. Staff passwords are
generated once into the state dir, never hard-coded.
"""

import secrets
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from elasticsearch import helpers

from memory_app.embeddings import get_embedder
from memory_app.es.client import admin_client
from memory_app.es.schema import MemoryType, alias_name
from tenants.models import Membership, Subject, Tenant

TENANT = ("acme-home", "Acme Smart Home Support")
STAFF = [("support", Membership.Role.SUPPORT), ("admin", Membership.Role.TENANT_ADMIN),
         ("compliance", Membership.Role.COMPLIANCE)]
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)

# (external_id, display name, memories): (type, text, extra fields)
SUBJECTS = [
    ("alice@example.com", "Alice", [
        ("episodic", "My living-room thermostat keeps dropping to 16 degrees at night.", {"role": "user"}),
        ("episodic", "I have a cat, so please no loud alarms after 10pm.", {"role": "user"}),
        ("semantic", "Alice has a cat and wants no loud alarms after 22:00.", {"confidence": 0.9}),
        ("semantic", "Alice's thermostat model is the Acme T3.", {"confidence": 0.8}),
        ("procedural", "Thermostat drops temperature at night", {
            "trigger": "thermostat lowers temperature overnight",
            "steps": "1. Check the night schedule in the app. 2. Disable eco mode. 3. Re-sync the schedule.",
            "success_count": 3, "failure_count": 1}),
    ]),
    ("bob@example.com", "Bob", [
        ("episodic", "The front door lock did not unlock with my phone this morning.", {"role": "user"}),
        ("semantic", "Bob uses an Android phone with the Acme app 4.2.", {"confidence": 0.9}),
        ("procedural", "Smart lock does not respond to phone", {
            "trigger": "lock not responding to the app",
            "steps": "1. Check Bluetooth is on. 2. Replace the lock batteries. 3. Re-pair the lock.",
            "success_count": 5, "failure_count": 0}),
    ]),
    ("carol@example.com", "Carol", [
        ("episodic", "I moved to a new flat and need to set up the hub again.", {"role": "user"}),
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
        if print_logins:
            for username, role in STAFF:
                self.stdout.write(f"    {username:<11} {role.label:<13} password {password}")
            self.stdout.write(f"    {'superuser':<11} {'(all)':<13} password {password}")
            return
        tenant = self._seed_database(password)
        written = self._seed_memories(tenant)
        self.stdout.write(f"demo data: tenant {tenant.slug}, {len(SUBJECTS)} end-users, {written} memories")

    @transaction.atomic
    def _seed_database(self, password: str) -> Tenant:
        User = get_user_model()
        tenant, _ = Tenant.objects.get_or_create(slug=TENANT[0], defaults={"name": TENANT[1]})
        for external_id, name, _memories in SUBJECTS:
            Subject.objects.get_or_create(tenant=tenant, external_id=external_id, defaults={"display_name": name})
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
        docs = []
        for external_id, _name, memories in SUBJECTS:
            subject = Subject.objects.get(tenant=tenant, external_id=external_id)
            for n, (memory_type, text, extra) in enumerate(memories):
                at = (NOW - timedelta(days=30 * n)).isoformat()
                docs.append((MemoryType(memory_type), f"demo-{subject.user_id.hex[:12]}-{n}", text, {
                    "user_id": str(subject.user_id), "occurred_at": at, "created_at": at, "last_used_at": at,
                    "use_count": 0, "source": "demo", **extra}))
        for n, (title, text) in enumerate(CATALOG):
            docs.append((MemoryType.CATALOG, f"demo-catalog-{n}", text, {"title": title, "created_at": NOW.isoformat(),
                                                                         "source": "demo"}))
        vectors = get_embedder().embed_documents([text for _, _, text, _ in docs])
        actions = (
            {"_op_type": "create", "_index": alias_name(memory_type), "_id": doc_id,
             "_source": {"tenant_id": tenant.slug, "memory_type": memory_type.value, "text": text,
                         "embedding": vector, **fields}}
            for (memory_type, doc_id, text, fields), vector in zip(docs, vectors, strict=True)
        )
        created = 0
        for ok, item in helpers.streaming_bulk(admin_client(), actions, raise_on_error=False, refresh="wait_for"):
            status = next(iter(item.values()))["status"]
            if ok:
                created += 1
            elif status != 409:  # 409: already seeded
                raise RuntimeError(f"demo seeding failed: {item}")
        return created
