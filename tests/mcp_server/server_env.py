"""Set up and tear down the database and indices of a server process started by the end-to-end test.

Runs in the server's own environment (its DATABASE_URL, ES_INDEX_PREFIX, encryption key):

    python -m tests.mcp_server.server_env setup      # migrate, create indices, tenants, tokens; print tokens as JSON
    python -m tests.mcp_server.server_env teardown   # invalidate every key the server minted, drop the indices
"""

from __future__ import annotations

import json
import sys

import django


def setup() -> dict[str, str]:
    from django.core.management import call_command

    from engram_core.es.client import admin_client
    from engram_core.es.schema import ensure_indices
    from tenants.models import Tenant
    from tenants.services.tokens import agent_token_create

    call_command("migrate", interactive=False, verbosity=0)
    ensure_indices(es=admin_client())
    acme = Tenant.objects.create(slug="acme", name="Acme")
    globex = Tenant.objects.create(slug="globex", name="Globex")
    every = ["memory:read", "memory:write", "memory:forget"]
    specs = {"acme": (acme, every), "acme_read": (acme, ["memory:read"]), "globex": (globex, every)}
    return {name: agent_token_create(tenant=tenant, name=f"e2e {name}", scopes=scopes, actor="e2e")[1]
            for name, (tenant, scopes) in specs.items()}


def teardown() -> None:
    from django.conf import settings

    from engram_core.es.client import admin_client
    from engram_core.es.schema import drop_indices
    from tenants.es_keys import invalidate_keys
    from tenants.models import SubjectKey, WriterKey

    ids = list(SubjectKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
    ids += list(WriterKey.objects.filter(revoked_at__isnull=True).values_list("es_key_id", flat=True))
    invalidate_keys(key_ids=ids)
    drop_indices(es=admin_client(), prefix=settings.ES_INDEX_PREFIX)


if __name__ == "__main__":
    django.setup()
    if sys.argv[1:] == ["setup"]:
        print(json.dumps(setup()))
    elif sys.argv[1:] == ["teardown"]:
        teardown()
    else:
        sys.exit(__doc__)
