"""Print the audit log's public keys, with their windows, for auditors."""

import json

from django.core.management.base import BaseCommand

from tenants.audit_chain import generate_signing_key
from tenants.crypto import audit_public_keys


class Command(BaseCommand):
    help = ("Print the Ed25519 public keys that checkpoints and exports are signed with (the signing keys' and "
            "the retired ones of ENGRAM_AUDIT_PUBLIC_KEYS), each with its window, as JSON: what "
            "`python -m tenants.audit_chain --public-key FILE export.jsonl` reads. --new-signing-key prints a new "
            "private key instead (for ENGRAM_AUDIT_SIGNING_KEYS).")

    def add_arguments(self, parser):
        parser.add_argument("--new-signing-key", action="store_true", help="print a new Ed25519 private key")

    def handle(self, *args, new_signing_key=False, **options):
        if new_signing_key:
            self.stdout.write(generate_signing_key())
            return
        self.stdout.write(json.dumps(audit_public_keys().as_json(), indent=2))
