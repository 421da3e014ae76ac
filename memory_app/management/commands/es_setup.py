from functools import partial

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from engram_core.es.capabilities import probe_capabilities
from engram_core.es.client import admin_client
from engram_core.es.schema import audit_checkpoints_index, ensure_indices
from memory_app.services.migration import migration_rekey
from memory_app.usage import usage_migrate
from tenants.services.audit_checkpoints import audit_store_check
from tenants.services.isolation_move import dedicated_indices_ensure
from tenants.services.keys import KeyLifetimes, keys_upgrade


class Command(BaseCommand):
    help = ("Probe the cluster, create or migrate Engram's indices (shared and dedicated tenants'; re-embedding "
            "their documents when the embedder changed) and rotate keys minted under an older grant. Idempotent: "
            "run it on every deploy.")

    def handle(self, *args, **options):
        caps = probe_capabilities()
        if not caps.reachable:
            raise CommandError("; ".join(caps.errors))
        self.stdout.write(
            f"elasticsearch {caps.version}, licence {caps.licence} ({caps.licence_status}), "
            f"security {'on' if caps.security else 'off'}, document-level security "
            f"{'available' if caps.dls else 'UNAVAILABLE'}"
        )
        for warning in caps.errors:
            self.stderr.write(self.style.WARNING(warning))
        rekey = partial(migration_rekey, concepts=settings.ENGRAM_CONCEPTS)
        for result in ensure_indices(es=admin_client(), rekey=rekey):
            extra = (f" ({result.copied} documents copied{', vectors computed by the new embedder' if result.revectored else ''})"
                     if result.action == "migrated" else "")
            self.stdout.write(f"{result.alias}: {result.action} -> {result.index}{extra}")
        # Dedicated tenants' own indices follow the same schema and migrations.
        dedicated = dedicated_indices_ensure(es=admin_client())
        for prefix in dedicated:
            self.stdout.write(f"{prefix}-*: dedicated tenant indices current")
        # Use counts stored in fact documents before they moved to the database (memory_app.usage).
        if moved := usage_migrate(es=admin_client(), prefixes=[settings.ES_INDEX_PREFIX, *dedicated]):
            self.stdout.write(f"use counts moved from fact documents to the database: {moved}")
        # Keys minted under an older, wider grant are rotated (tenants.es_keys.ROLE_VERSION).
        if caps.security:
            upgraded = keys_upgrade(actor="es_setup", lifetimes=KeyLifetimes.from_settings())
            self.stdout.write(f"keys rotated to the current grant: {upgraded['subject_keys']} subject, "
                              f"{upgraded['writer_prefixes']} writer prefix(es)")
        # The audit checkpoint store: created here, and refused when a credential could rewrite it.
        if caps.security:
            if problems := audit_store_check(es_admin=admin_client()):
                raise CommandError("audit checkpoint store: " + "; ".join(problems))
            self.stdout.write(f"{audit_checkpoints_index()}: audit checkpoints, create-only")
