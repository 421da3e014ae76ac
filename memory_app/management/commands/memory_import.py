import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engram_core.errors import EngramError
from engram_core.validation import clean_external_id
from memory_app.services.imports import episodes_import
from tenants.models import Tenant
from tenants.services.subjects import subject_get_or_create
from tenants.services.keys import KeyLifetimes


class Command(BaseCommand):
    help = ("Bulk-import historical episodes for one end-user from a JSON Lines file (one object per "
            'line: {"text", "occurred_at", optional "role", "session_id", "context", "metadata", "id"}), '
            "keeping their original timestamps. All-or-nothing: a bad line or a failed write keeps nothing.")

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="JSON Lines file, or - for standard input")
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--subject", required=True, help="the end-user's external id (created if new)")

    def handle(self, *args, file: Path, tenant: str, subject: str, **options):
        try:
            tenant_obj = Tenant.objects.get(slug=tenant)
        except Tenant.DoesNotExist:
            raise CommandError(f"unknown tenant {tenant!r}") from None
        lines = sys.stdin if str(file) == "-" else file.open()
        episodes = []
        for n, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    episodes.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise CommandError(f"line {n}: not JSON ({exc.msg})") from None
        step = max(1, len(episodes) // 20)

        def progress(done: int, total: int) -> None:
            if done % step == 0 or done == total:
                self.stdout.write(f"  {done}/{total} episodes written")

        try:
            target = subject_get_or_create(tenant=tenant_obj, external_id=clean_external_id(subject),
                                           actor="memory_import", lifetimes=KeyLifetimes.from_settings())
            ids = episodes_import(subject=target, episodes=episodes, progress=progress)
        except EngramError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        self.stdout.write(self.style.SUCCESS(f"imported {len(ids)} episodes for {tenant}/{subject}"))
