"""Signed checkpoints of the audit chains, written apart from the database that holds the log.

A checkpoint pins a chain's length and head hash at a time, names the checkpoint before it and is
signed under the audit key; it goes to the checkpoint index through a credential that may only
create documents there. Each checkpoint's id is its chain and its predecessor's seq, so the store
itself refuses a second successor: checkpoints cannot fork.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Max
from django.utils import timezone
from elasticsearch import ConflictError

from engram_core.es.client import audit_client
from engram_core.es.schema import audit_checkpoints_ensure, audit_checkpoints_index
from tenants import audit_chain
from tenants.crypto import audit_keyring
from tenants.models import AuditEvent
from tenants.selectors import audit_checkpoints_latest, audit_export_record


@dataclass(frozen=True)
class CheckpointResult:
    chain: str
    state: str  # "written", "unchanged" or "refused"
    checkpoint: dict | None = None  # the chain's latest checkpoint after the call
    reason: str = ""  # why it was refused

    @property
    def label(self) -> str:
        return self.chain or "(no tenant)"


def audit_checkpoint_write(*, chains: list[str] | None = None) -> list[CheckpointResult]:
    """Checkpoint each chain (every one, by default) that moved since its latest checkpoint.

    The events since that checkpoint are verified first: a chain that is broken (a changed,
    missing or unsigned event, or fewer events than the checkpoint pins) is refused, never signed
    over. Raises ImproperlyConfigured without the checkpoint credential, and CheckpointStoreError
    when the store cannot be read."""
    es = audit_client()
    if es is None:
        raise ImproperlyConfigured("ES_AUDIT_USERNAME is not set: no audit checkpoint can be written")
    keyring = audit_keyring()
    heads = dict(AuditEvent.objects.values("chain").annotate(head=Max("seq")).values_list("chain", "head"))
    names = sorted(heads) if chains is None else sorted(chains)
    latest = audit_checkpoints_latest(chains=names)
    return [_checkpoint(es, chain, heads.get(chain, 0), latest.get(chain, []), keyring) for chain in names]


def _checkpoint(es, chain: str, head: int, newest: list[dict], keyring: audit_chain.Keyring) -> CheckpointResult:
    valid = [cp for cp in newest if not audit_chain.checkpoint_problem(cp, keyring)]
    previous = valid[0] if valid else None
    if newest and newest[0] is not previous:
        return CheckpointResult(chain, "refused", previous, f"the newest checkpoint (seq {newest[0]['seq']}) "
                                                            "is not signed by a configured key")
    records = (audit_export_record(e) for e in AuditEvent.objects.filter(
        chain=chain, seq__gte=previous["seq"] if previous else 1).order_by("seq").iterator(chunk_size=2000))
    report = audit_chain.verify_chain(records, [previous] if previous else [], chain=chain, keyring=keyring,
                                      origin=previous)
    if not report.ok:
        return CheckpointResult(chain, "refused", previous, report.reason)
    if head == (previous["seq"] if previous else 0):
        return CheckpointResult(chain, "unchanged", previous)
    head_hash = AuditEvent.objects.filter(chain=chain, seq=head).values_list("hash", flat=True).get()
    checkpoint = audit_chain.checkpoint_sign(chain=chain, seq=head, head_hash=head_hash,
                                             created_at=timezone.now().isoformat(timespec="microseconds"),
                                             previous=previous, keyring=keyring)
    try:
        es.create(index=audit_checkpoints_index(), id=f"{chain}:{checkpoint['previous_seq']}", document=checkpoint,
                  refresh="wait_for")
    except ConflictError:  # another process wrote this checkpoint's successor first
        return CheckpointResult(chain, "unchanged", previous)
    return CheckpointResult(chain, "written", checkpoint)


# Index privileges that would let a credential rewrite or remove what the checkpoint store holds.
_REWRITE = ["index", "create", "write", "delete", "manage", "delete_index", "all"]


def audit_store_check(*, es_admin) -> list[str]:
    """Create the checkpoint index if missing and check who may do what there: the checkpoint
    credential may create documents and nothing more, the admin credential may not rewrite or
    remove them. Returns the problems, [] when the store is as it must be (a missing checkpoint
    credential is one)."""
    index = audit_checkpoints_ensure(es=es_admin)
    problems = []
    writer = audit_client()
    if writer is None:
        problems.append("ES_AUDIT_USERNAME is not set: no audit checkpoint can be written")
    else:
        granted = _granted(writer, index, ["create_doc", *_REWRITE])
        if not granted.get("create_doc"):
            problems.append(f"the checkpoint credential ({settings.ES_AUDIT_USERNAME}) may not create documents in "
                            f"{index}")
        if more := sorted(p for p in _REWRITE if granted.get(p)):
            problems.append(f"the checkpoint credential ({settings.ES_AUDIT_USERNAME}) holds {', '.join(more)} on "
                            f"{index}: it must hold create_doc only")
    if more := sorted(p for p in _REWRITE if _granted(es_admin, index, _REWRITE).get(p)):
        problems.append(f"the admin credential holds {', '.join(more)} on {index}: whoever holds it could rewrite "
                        "or remove the checkpoints (give it create_index, view_index_metadata and read there only)")
    return problems


def _granted(es, index: str, privileges: list[str]) -> dict[str, bool]:
    answer = es.security.has_privileges(index=[{"names": [index], "privileges": privileges}])
    return answer["index"][index]
