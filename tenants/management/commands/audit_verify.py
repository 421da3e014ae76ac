"""Verify the tamper-evident audit chain of every tenant (or one) and name the first broken link."""

from django.core.management.base import BaseCommand, CommandError

from tenants.models import AuditEvent
from tenants.selectors import audit_chain_verify


class Command(BaseCommand):
    help = "Verify the audit log's hash chains; exit status 1 and the first broken link when one fails."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="tenant slug (default: every chain, including events without a tenant)")

    def handle(self, *args, tenant=None, **options):
        chains = [tenant] if tenant is not None else sorted(set(AuditEvent.objects.values_list("chain", flat=True)))
        broken = 0
        for chain in chains:
            report = audit_chain_verify(chain=chain)
            label = chain or "(no tenant)"
            if report.ok:
                self.stdout.write(f"{label}: OK, {report.checked} events")
            else:
                broken += 1
                self.stdout.write(f"{label}: BROKEN after {report.checked} good events; first broken link: "
                                  f"seq {report.broken_seq} (event id {report.broken_id}): {report.reason}")
        if broken:
            raise CommandError(f"{broken} audit chain(s) broken")
