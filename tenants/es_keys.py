"""Elasticsearch API keys for Engram: per-subject read keys carrying the subject's
document-level-security query, and the writer key, minted by the keys credential.

Both get the exact index actions Engram's request paths call, never the ``read``/``write`` groups
(which would allow term statistics across tenants), no cluster privilege, and an expiry;
``ROLE_VERSION`` names the grant, and a key minted under an older one is rotated by ``es_setup``."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from elasticsearch import ApiError, Elasticsearch, NotFoundError, TransportError

from engram_core.errors import ServiceUnavailable
from engram_core.es.client import admin_client, keys_client
from engram_core.es.schema import all_aliases, index_base

from .models import Subject
from .selectors import memory_scope, memory_scope_filter


@dataclass(frozen=True)
class MintedKey:
    key_id: str
    secret: str
    expires_at: datetime


def encoded_api_key(key_id: str, secret: str) -> str:
    return base64.b64encode(f"{key_id}:{secret}".encode()).decode()


# Bump when a grant below changes: every key minted under an older version gets rotated.
# 1: the `read` / `read` + `write` privilege groups.  2: the action lists below.  3: + refresh for
# the writer.  4: minted (and owned) by the keys credential instead of the admin credential.
# 5: + refresh on the concrete indices for the writer (see writer_role_descriptors).
ROLE_VERSION = 5

# What subject keys are used for: recall (_msearch), visibility checks and history (_mget),
# export (search + scroll + clear scroll). Searches and mgets fan out to shard-level actions
# (`...[shard]`, `...[phase/query]`), which Elasticsearch authorises through the parent action.
SUBJECT_ACTIONS = (
    "indices:data/read/search",
    "indices:data/read/msearch",
    "indices:data/read/get",
    "indices:data/read/mget",
    "indices:data/read/scroll",
    "indices:data/read/scroll/clear",
)
# The writer: create/index, partial update (OCC), delete, bulk; plus the reads a write needs
# (mget: a first use-count bump checks the fact still exists; get: whether a turn written without
# waiting is searchable yet; scan for erase); and refresh, which makes such a turn visible to the
# next recall on demand (memory_app.freshness).
WRITER_ACTIONS = (
    *SUBJECT_ACTIONS,
    "indices:data/write/index",
    "indices:data/write/update",
    "indices:data/write/delete",
    "indices:data/write/bulk",
    "indices:admin/refresh",
)


def subject_role_descriptors(*, subject: Subject, prefix: str) -> dict:
    return {
        "engram_subject_read": {
            "cluster": [],
            "indices": [{
                "names": all_aliases(prefix=prefix),
                "privileges": list(SUBJECT_ACTIONS),
                "query": memory_scope_filter(subject=subject),
                "allow_restricted_indices": False,
            }],
        }
    }


def writer_role_descriptors(*, prefix: str) -> dict:
    # No `create_index`, no `manage`, no statistics APIs (see WRITER_ACTIONS). A refresh through an
    # alias reaches each shard copy as `indices:admin/refresh[s]` on the concrete index, and a node
    # holding a copy authorises it there: refresh alone is granted on the prefix's versioned indices
    # (it reads and changes no document), or every refresh on a cluster with replicas is a 403.
    return {
        "engram_writer": {
            "cluster": [],
            "indices": [{"names": all_aliases(prefix=prefix), "privileges": list(WRITER_ACTIONS),
                         "allow_restricted_indices": False},
                        {"names": [f"{index_base(prefix=prefix)}-v*"], "privileges": ["indices:admin/refresh"],
                         "allow_restricted_indices": False}],
        }
    }


def mint_subject_key(*, subject: Subject, prefix: str, ttl: timedelta) -> MintedKey:
    scope = memory_scope(subject=subject)
    return _mint(
        name=f"engram-subject-{scope['tenant_id']}-{subject.pk}",
        role_descriptors=subject_role_descriptors(subject=subject, prefix=prefix),
        metadata={"engram": True, "kind": "subject", "tenant": scope["tenant_id"], "user_id": scope["user_id"],
                  "subject_id": subject.pk, "index_prefix": prefix, "role_version": ROLE_VERSION},
        ttl=ttl,
    )


def mint_writer_key(*, prefix: str, ttl: timedelta) -> MintedKey:
    return _mint(
        name="engram-writer",
        role_descriptors=writer_role_descriptors(prefix=prefix),
        metadata={"engram": True, "kind": "writer", "index_prefix": prefix, "role_version": ROLE_VERSION},
        ttl=ttl,
    )


def _mint(*, name: str, role_descriptors: dict, metadata: dict, ttl: timedelta) -> MintedKey:
    try:
        response = keys_client().security.create_api_key(
            name=name, role_descriptors=role_descriptors, metadata=metadata,
            expiration=f"{int(ttl.total_seconds())}s",
            # Refresh now: without it the new key is invisible to an invalidation for up to a
            # second, and invalidate_api_key reports an unseen id as nothing to do.
            refresh=True,
        )
    except TransportError as exc:
        raise ServiceUnavailable("could not mint an Elasticsearch API key: cluster unreachable",
                                 details={"error": str(exc)}) from exc
    expires_at = datetime.fromtimestamp(response["expiration"] / 1000, tz=UTC)
    return MintedKey(key_id=response["id"], secret=response["api_key"], expires_at=expires_at)


def expire_key_in(*, key_id: str, seconds: int) -> None:
    """Make Elasticsearch itself refuse the key after ``seconds`` (the rotation grace).

    Enforced by the cluster, so the old key dies on time even if the maintenance task is late.
    """
    expiration = f"{max(seconds, 1)}s"
    try:
        try:
            keys_client().security.update_api_key(id=key_id, expiration=expiration)
        except ApiError as exc:
            # Only the owner may update a key: one minted by the admin credential (role version < 4).
            if not _separate_keys_credential() or exc.meta.status not in (403, 404):
                raise
            admin_client().security.update_api_key(id=key_id, expiration=expiration)
    except TransportError as exc:
        raise ServiceUnavailable("could not shorten an Elasticsearch API key: cluster unreachable",
                                 details={"error": str(exc)}) from exc


def invalidate_keys(*, key_ids: list[str]) -> None:
    """Invalidate keys now. Raises ServiceUnavailable unless every key is invalid afterwards;
    a key the cluster no longer knows (purged after expiry) counts as invalid."""
    if not key_ids:
        return
    try:
        left = set(key_ids)
        if _separate_keys_credential():
            # manage_own_api_key invalidates by id only with owner=true: the keys it minted.
            left -= _invalidated(keys_client(), ids=key_ids, owner=True)
        if not left:
            return
        # Keys the keys credential does not own (minted by the admin credential before it existed),
        # or not yet visible to it: the admin credential sees every key, and checks what is left.
        es = admin_client()
        left -= _invalidated(es, ids=sorted(left), owner=False)
        # An id the invalidation did not see may still be live (e.g. not yet searchable): check it.
        for key_id in sorted(left):
            if _live(es, key_id):
                raise ServiceUnavailable("an API key could not be invalidated", details={"key_id": key_id})
    except TransportError as exc:
        raise ServiceUnavailable("could not invalidate Elasticsearch API keys: cluster unreachable",
                                 details={"error": str(exc)}) from exc


def _separate_keys_credential() -> bool:
    return bool(settings.ES_KEYS_USERNAME) and settings.ES_KEYS_USERNAME != settings.ES_ADMIN_USERNAME


def _invalidated(es: Elasticsearch, *, ids: list[str], owner: bool) -> set[str]:
    """Invalidate ``ids``; returns the ids now invalid (invalidated now or before)."""
    response = es.security.invalidate_api_key(ids=ids, owner=owner or None)
    if response.get("error_count"):
        raise ServiceUnavailable("Elasticsearch refused to invalidate some API keys",
                                 details={"errors": response.get("error_details", [])})
    return set(response["invalidated_api_keys"]) | set(response["previously_invalidated_api_keys"])


def _live(es, key_id: str) -> bool:
    try:
        found = es.security.get_api_key(id=key_id)["api_keys"]
    except NotFoundError:
        return False
    return any(not k["invalidated"] for k in found)
