"""Signed checkpoints of the audit chains, written apart from the database that holds the log.

A checkpoint pins a chain's length and head hash at a time, the SHA-256 of the events since the
checkpoint before it, that checkpoint, and the chain's keying event; it is signed with the Ed25519
key valid then and goes to the checkpoint index through a credential that may only create
documents there. A chain's first checkpoint pins its keying event, written when that event commits. Each checkpoint's id is its chain and its predecessor's seq, so the store
itself refuses a second successor: checkpoints cannot fork.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Max
from django.utils import timezone
from elasticsearch import ConflictError

from engram_core.es.client import audit_client
from engram_core.es.schema import audit_checkpoints_ensure, audit_checkpoints_index
from tenants import audit_chain
from tenants.crypto import audit_keyring, audit_public_keys, audit_signing_keys
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
    """Checkpoint each chain (every one, by default) that moved since its latest checkpoint; a chain
    without one gets its keying event pinned first.

    The events since that checkpoint are verified first: a chain that is broken (a changed,
    missing or unsigned event, or fewer events than the checkpoint pins) is refused, never signed
    over. Raises ImproperlyConfigured without the checkpoint credential or the signing keys, and
    CheckpointStoreError when the store cannot be read."""
    es = _writer()
    heads = dict(AuditEvent.objects.values("chain").annotate(head=Max("seq")).values_list("chain", "head"))
    names = sorted(heads) if chains is None else sorted(chains)
    latest = audit_checkpoints_latest(chains=names)
    return [_checkpoint(es, chain, heads.get(chain, 0), latest.get(chain, [])) for chain in names]


def audit_keying_pin(*, chain: str) -> CheckpointResult:
    """Pin the chain's keying event (its first keyed event) by its first checkpoint, now: called
    when that event commits, so that nothing written before it can be rewritten unseen afterwards.
    Idempotent; raises as ``audit_checkpoint_write``."""
    es = _writer()
    newest = audit_checkpoints_latest(chains=[chain]).get(chain, [])
    first = next((cp for cp in newest if cp.get("previous_seq") == 0), None)
    if first is not None:
        return CheckpointResult(chain, "unchanged", first)
    return _pin(es, chain)


def _writer():
    es = audit_client()
    if es is None:
        raise ImproperlyConfigured("ES_AUDIT_USERNAME is not set: no audit checkpoint can be written")
    return es


def _records(chain: str, *, since: int, until: int | None = None) -> list[dict]:
    events = AuditEvent.objects.filter(chain=chain, seq__gte=since)
    if until is not None:
        events = events.filter(seq__lte=until)
    return [audit_export_record(e) for e in events.order_by("seq").iterator(chunk_size=2000)]


def _sign_and_store(es, chain: str, *, records: list[dict], previous: dict | None, keyed_at: int) -> dict | None:
    """Sign a checkpoint of ``records`` (the events since ``previous``) and store it; None when
    another process stored this checkpoint's successor first."""
    head = records[-1]
    checkpoint = audit_chain.checkpoint_sign(
        chain=chain, seq=head["seq"], head_hash=head["hash"], previous=previous, keyed_at=keyed_at,
        created_at=timezone.now().isoformat(timespec="microseconds"), events_digest=audit_chain.events_sha256(records),
        signing=audit_signing_keys())
    try:
        es.create(index=audit_checkpoints_index(), id=f"{chain}:{checkpoint['previous_seq']}", document=checkpoint,
                  refresh="wait_for")
    except ConflictError:
        return None
    return checkpoint


def _pin(es, chain: str) -> CheckpointResult:
    """The chain's first checkpoint, pinning its keying event (the events up to it verified first)."""
    keyed_at = (AuditEvent.objects.filter(chain=chain).exclude(key_id="").order_by("seq")
                .values_list("seq", flat=True).first())
    if keyed_at is None:
        return CheckpointResult(chain, "refused", None, "no event of the chain is keyed: re-anchor it first "
                                                        "(manage.py audit_reanchor)")
    records = _records(chain, since=1, until=keyed_at)
    report = audit_chain.verify_chain(records, chain=chain, keyring=audit_keyring(), public=audit_public_keys(),
                                      keying_pinned=False)
    if not report.ok:
        return CheckpointResult(chain, "refused", None, report.reason)
    checkpoint = _sign_and_store(es, chain, records=records, previous=None, keyed_at=keyed_at)
    if checkpoint is None:  # pinned by another process meanwhile
        return CheckpointResult(chain, "unchanged", None)
    return CheckpointResult(chain, "written", checkpoint)


def _checkpoint(es, chain: str, head: int, newest: list[dict]) -> CheckpointResult:
    public = audit_public_keys()
    valid = [cp for cp in newest if not audit_chain.checkpoint_problem(cp, public)]
    previous = valid[0] if valid else None
    if newest and newest[0] is not previous:
        return CheckpointResult(chain, "refused", previous, f"the newest checkpoint (seq {newest[0]['seq']}) "
                                                            "is not signed by a valid key")
    pinned_now = False
    if previous is None:
        if not head:
            return CheckpointResult(chain, "unchanged", None)
        pinned = _pin(es, chain)
        if pinned.state != "written":
            return pinned
        previous, pinned_now = pinned.checkpoint, True
    records = _records(chain, since=previous["seq"])
    report = audit_chain.verify_chain(records, [previous], chain=chain, keyring=audit_keyring(), public=public,
                                      origin=previous)
    if not report.ok:
        return CheckpointResult(chain, "refused", previous, report.reason)
    if len(records) <= 1:  # nothing since the previous checkpoint
        return CheckpointResult(chain, "written" if pinned_now else "unchanged", previous)
    checkpoint = _sign_and_store(es, chain, records=records[1:], previous=previous, keyed_at=previous["keyed_at"])
    if checkpoint is None:  # another process wrote this checkpoint's successor first
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
        user, granted = _granted(writer, index, ["create_doc", *_REWRITE])
        if not granted.get("create_doc"):
            problems.append(f"the checkpoint credential ({user}) may not create documents in {index}")
        if more := sorted(p for p in _REWRITE if granted.get(p)):
            problems.append(f"the checkpoint credential ({user}) holds {', '.join(more)} on {index}: it must hold "
                            "create_doc only")
    if more := sorted(p for p in _REWRITE if _granted(es_admin, index, _REWRITE)[1].get(p)):
        problems.append(f"the admin credential holds {', '.join(more)} on {index}: whoever holds it could rewrite "
                        "or remove the checkpoints (give it create_index, view_index_metadata and read there only)")
    return problems


def _granted(es, index: str, privileges: list[str]) -> tuple[str, dict[str, bool]]:
    """The user the cluster checked (who the credential is) and which of ``privileges`` it holds on ``index``."""
    answer = es.security.has_privileges(index=[{"names": [index], "privileges": privileges}])
    return answer["username"], answer["index"][index]
