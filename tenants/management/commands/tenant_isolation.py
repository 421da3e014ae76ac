from django.core.management.base import BaseCommand, CommandError

from engram_core.errors import EngramError
from tenants.models import Tenant
from tenants.services.isolation_move import tenant_isolation_set


class Command(BaseCommand):
    help = ("Move a tenant's memories between the shared indices and its own dedicated ones: copy "
            "(scroll + bulk), verify the counts, switch, remove the old copies. Writes of the tenant "
            "are accepted into the outbox meanwhile and applied after. Running it again for the tenant's "
            "current mode removes copies a failed earlier move left behind. One move of a tenant at a time.")

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("isolation", choices=Tenant.Isolation.values)
        parser.add_argument("--take-over", action="store_true",
                            help="run although a move of the tenant is marked running (its process died)")

    def handle(self, *args, tenant: str, isolation: str, take_over: bool, **options):
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"no tenant {tenant!r}")
        try:
            result = tenant_isolation_set(tenant=found, isolation=isolation, actor="tenant_isolation",
                                          take_over=take_over)
        except EngramError as exc:
            raise CommandError(f"{exc.code}: {exc.message} {exc.details or ''}") from exc
        copied = ", ".join(f"{k} {v}" for k, v in result.copied.items()) or "nothing to copy"
        self.stdout.write(f"{result.tenant}: {result.source} -> {result.target}; copied: {copied}; "
                          f"old copies removed: {result.removed}")
