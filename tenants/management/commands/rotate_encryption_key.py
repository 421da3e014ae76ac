from django.core.management.base import BaseCommand

from tenants.services.encryption import encryption_key_rotate


class Command(BaseCommand):
    help = ("Re-encrypt every stored secret with the first key of ENGRAM_ENCRYPTION_KEYS. "
            "Put the new key first, run this, then remove the old key.")

    def handle(self, *args, **options):
        count = encryption_key_rotate(actor="rotate_encryption_key")
        self.stdout.write(f"re-encrypted {count} secret(s) with the primary key")
