"""The access log of agent tokens: every read of an end-user's memory through a token is counted.

Counts go to ``TokenRead``, one row per token, end-user, kind of read and hour; the first read of
each row, and every export, is also a ``token.read`` audit event (content-free: the kind and how
many memories), naming the staff user who minted the token when one did (``details.staff``), so
the staff access log shows what staff read through tokens they minted. docs/compliance.md.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from tenants.models import AgentToken, Subject, TokenRead
from tenants.services.audit import audit_record


def token_read_record(*, token: AgentToken, subject: Subject, kind: str, memories: int) -> None:
    """Count one read of ``subject``'s memory through ``token`` that showed ``memories`` memories.

    Raises what the database raises: a read that cannot be logged must not be served (callers
    record before they answer)."""
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    row = {"token": token, "subject": subject, "kind": kind, "hour": hour}
    bump = {"reads": F("reads") + 1, "memories": F("memories") + memories, "last_at": now}
    with transaction.atomic():
        first = False
        if not TokenRead.objects.filter(**row).update(**bump):
            try:
                with transaction.atomic():
                    TokenRead.objects.create(**row, reads=1, memories=memories, first_at=now, last_at=now)
                first = True
            except IntegrityError:  # another request made the row first: count there
                TokenRead.objects.filter(**row).update(**bump)
        if first or kind == TokenRead.Kind.EXPORT:
            audit_record(actor=token, action="token.read", subject=subject, target_id=token.prefix,
                         details={"kind": kind, "memories": memories, **token_minter(token)})


def token_minter(token: AgentToken) -> dict[str, str]:
    """Who minted ``token``, as audit details name them: ``staff`` for a staff user, ``minted_by``
    for a system job (a command, the demo seed)."""
    if token.created_by_name.startswith("staff:"):  # the name as it was, should the user be deleted
        return {"staff": token.created_by_name.removeprefix("staff:")}
    return {"minted_by": token.created_by_name} if token.created_by_name else {}
