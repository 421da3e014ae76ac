"""Sign a checkpoint of every audit chain that moved (what the periodic task does), now."""

from django.core.management.base import BaseCommand, CommandError

from tenants.selectors import CheckpointStoreError
from tenants.services.audit_checkpoints import audit_checkpoint_write


class Command(BaseCommand):
    help = ("Checkpoint every audit chain that moved since its latest checkpoint (or one tenant's): verify the "
            "events since, sign the head and store it in the checkpoint index. Exit status 1 when a chain is "
            "refused (it is broken) or the store cannot be reached.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="tenant slug (default: every chain)")

    def handle(self, *args, tenant=None, **options):
        try:
            results = audit_checkpoint_write(chains=None if tenant is None else [tenant])
        except CheckpointStoreError as exc:
            raise CommandError(str(exc)) from None
        refused = 0
        for result in results:
            cp = result.checkpoint
            if result.state == "refused":
                refused += 1
                self.stdout.write(f"{result.label}: NOT checkpointed: {result.reason}")
            elif result.state == "written":
                self.stdout.write(f"{result.label}: checkpoint written at seq {cp['seq']} (head {cp['head_hash'][:12]}…)")
            else:
                where = f"seq {cp['seq']}, {cp['created_at']}" if cp else "no events"
                self.stdout.write(f"{result.label}: unchanged since the latest checkpoint ({where})")
        if refused:
            raise CommandError(f"{refused} audit chain(s) not checkpointed: verify them (manage.py audit_verify)")
