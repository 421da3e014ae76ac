"""Key an audit chain begun before the audit keys, after an operator has verified it."""

from django.core.management.base import BaseCommand, CommandError

from tenants.selectors import audit_chain_verify
from tenants.services.audit import audit_reanchor
from tenants.services.audit_checkpoints import audit_keying_pin


class Command(BaseCommand):
    help = ("Append a keyed audit.reanchored event after a chain's unkeyed events (a chain begun by a release "
            "without audit keys) and pin it by a checkpoint at once. Its unkeyed events rest on the database "
            "alone: run this only after checking them. Engram never does it by itself, since a chain rewritten "
            "without the keys looks the same.")

    def add_arguments(self, parser):
        parser.add_argument("chain", help="the chain: a tenant slug, or '' for events without a tenant")

    def handle(self, *args, chain, **options):
        try:
            event = audit_reanchor(chain=chain, actor="manage.py audit_reanchor")
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        result = audit_keying_pin(chain=chain)
        self.stdout.write(f"{chain or '(no tenant)'}: keyed at seq {event.seq}; "
                          + (f"pinned by the checkpoint of {result.checkpoint['created_at']}" if result.checkpoint
                             else f"NOT pinned: {result.reason}"))
        self.stdout.write(audit_chain_verify(chain=chain).summary())
