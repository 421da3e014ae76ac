"""Verify every audit chain (or one) against its latest checkpoint and name what broke."""

from django.core.management.base import BaseCommand, CommandError

from tenants.selectors import audit_verify


class Command(BaseCommand):
    help = ("Verify the audit log: each chain's keyed hashes from its first event, its length and head against "
            "its latest signed checkpoint, every chain the checkpoints know of, and the database's refusal of "
            "UPDATE and DELETE. Exit status 1 and what broke when anything fails.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="tenant slug (default: every chain, including events without a tenant)")

    def handle(self, *args, tenant=None, **options):
        result = audit_verify(chains=None if tenant is None else [tenant])
        for report in result.reports:
            self.stdout.write(report.summary())
        self.stdout.write(f"checkpoints: {result.store}" + (f": UNAVAILABLE: {result.store_error}"
                                                             if result.store_error else ""))
        self.stdout.write("database: refuses UPDATE and DELETE of audit events" if result.triggers else
                          "database: the triggers refusing UPDATE and DELETE of audit events are MISSING "
                          "(run manage.py migrate)")
        broken = [r.label for r in result.reports if not r.ok]
        if broken or not result.ok:
            raise CommandError(f"audit log not verified: {len(broken)} chain(s) broken"
                               + (f" ({', '.join(broken)})" if broken else "")
                               + ("; checkpoints unavailable" if result.store_error else "")
                               + ("; triggers missing" if not result.triggers else ""))
