import getpass

from django.core.management.base import BaseCommand, CommandError

from engram_core.errors import EngramError
from memory_app.outbox.operator import failed_entries, outbox_entry_discard, outbox_entry_retry
from tenants.models import Tenant


class Command(BaseCommand):
    help = ("Writes that ended failed in the outbox: `list` them, `retry` one (back in its end-user's "
            "queue, once the cause is fixed) or `discard` one (its content deleted). Retries and "
            "discards are audited.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        listing = sub.add_parser("list", help="failed writes, the latest first")
        listing.add_argument("--tenant", help="a tenant's slug")
        listing.add_argument("--limit", type=int, default=50)
        for name in ("retry", "discard"):
            action = sub.add_parser(name, help=f"{name} failed writes by operation id")
            action.add_argument("operations", nargs="+", metavar="OPERATION_ID")
            action.add_argument("--actor", default=None, help="who does it, for the audit log (default: the OS user)")

    def handle(self, *args, action, **options):
        if action == "list":
            tenant = None
            if options["tenant"]:
                tenant = Tenant.objects.filter(slug=options["tenant"]).first()
                if tenant is None:
                    raise CommandError(f"unknown tenant {options['tenant']!r}")
            entries = list(failed_entries(tenant=tenant)[:options["limit"]])
            for e in entries:
                error = e.last_error or {}
                self.stdout.write(f"{e.uid}  {e.tenant.slug}/{e.external_id}  {e.operation}  attempts={e.attempts}  "
                                  f"failed_at={e.processed_at.isoformat() if e.processed_at else '-'}  {error.get('code')}: "
                                  f"{error.get('message', '')}")
            self.stdout.write(f"{len(entries)} failed write(s)")
            return
        actor = f"manage.py outbox ({options['actor'] or getpass.getuser()})"
        act = outbox_entry_retry if action == "retry" else outbox_entry_discard
        problems = 0
        for uid in options["operations"]:
            try:
                entry = act(uid=uid, actor=actor)
            except EngramError as exc:
                problems += 1
                self.stderr.write(f"{uid}: {exc.message}")
                continue
            self.stdout.write(f"{entry.uid}: {entry.status}")
        if problems:
            raise CommandError(f"{problems} of {len(options['operations'])} operation(s) left as they were")
