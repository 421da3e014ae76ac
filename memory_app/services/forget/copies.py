"""The copies step of a forget: what the database keeps of a forgotten memory outside its
document (stored API responses, outbox payloads and results, forget notes), and this process's
cache of embedded texts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from language.phrases import phrases_redacted
from memory_app.models import ForgetNote, IdempotencyRecord, OutboxEntry
from memory_app.providers import get_embedder
from memory_app.services.forget.forgetting import Forgetting
from tenants.models import Subject


def copies_purge(forgetting: Forgetting) -> int:
    """The database's copies of the memory's texts and objects, redacted (``memory_copies_purge``)."""
    return memory_copies_purge(subject=forgetting.subject, memory_id=forgetting.memory_id,
                               phrases=forgetting.phrases)


def vectors_drop() -> None:
    """Empty this process's cache of embedded texts (a turn's text and sentences go through it,
    keyed by digest): a forgotten text's vector must not outlive the forget here. Other processes'
    entries expire after ENGRAM_EMBEDDER_QUERY_CACHE_SECONDS."""
    if (cache := getattr(get_embedder(), "query_cache", None)) is not None:
        cache.clear()


# Keys whose strings are someone's own words about other memories (a client's context, a note): a
# quote of a forgotten memory there is replaced, phrase by phrase; other keys' strings are data
# of their own memory (another turn's text stays as it was, whatever it says).
_FREE_TEXT_KEYS = frozenset({"context", "derived_context", "note"})
_FORGOTTEN_OBJECT = "forgotten"


def copies_redacted(value: Any, *, memory_id: str, redact: Callable[[str], str], objects: bool = True,
                    top: bool = True, quoting: bool = False) -> tuple[Any, bool]:
    """``value`` (a stored JSON document) without its copies of the forgotten memory ``memory_id``,
    and whether anything changed. With ``objects`` (a stored response): a memory object of
    ``memory_id`` below the top level becomes ``{"id", "forgotten": true}``, and a response about
    the memory itself (its id at the top level: the answer to its own write) has its texts
    redacted (``redact``: the forgotten phrases replaced on word boundaries). Everywhere, a
    free-text field (``_FREE_TEXT_KEYS``) is redacted, and nothing else of it. Every other value is
    returned as it was."""
    if isinstance(value, dict):
        if objects and not top and value.get("id") == memory_id and len(value) > 1:
            reduced = {"id": memory_id, _FORGOTTEN_OBJECT: True}
            return reduced, value != reduced
        about = quoting or (objects and top and value.get("id") == memory_id)
        changed, out = False, {}
        for k, v in value.items():
            out[k], c = copies_redacted(v, memory_id=memory_id, redact=redact, objects=objects, top=False,
                                        quoting=(about and k != "id") or k in _FREE_TEXT_KEYS)
            changed |= c
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        pairs = [copies_redacted(v, memory_id=memory_id, redact=redact, objects=objects, top=False,
                                 quoting=quoting) for v in value]
        return ([p[0] for p in pairs], True) if any(p[1] for p in pairs) else (value, False)
    if isinstance(value, str) and quoting:
        new = redact(value)
        return new, new != value
    return value, False


def memory_copies_purge(*, subject: Subject, memory_id: str, phrases: Sequence[str]) -> int:
    """Redact every copy Engram keeps of a forgotten memory outside Elasticsearch (``copies_redacted``):
    the stored API responses of the subject's Idempotency-Keys (a turn's answer carries recalled
    memories), the outbox's payloads (a queued write's context may quote it; the write itself is
    kept whole, whatever memory it is about) and results, and forget notes that quote it. A
    redacted response is still replayed (its status and the rest of its body), so a retried write
    is not run again. Returns how many rows changed."""
    redact = partial(phrases_redacted, phrases=phrases)
    changed = 0
    own = {"tenant": subject.tenant, "external_id": subject.external_id}
    for rows, column, objects in ((IdempotencyRecord.objects.filter(**own), "response_body", True),
                                  (OutboxEntry.objects.filter(**own), "payload", False),
                                  (OutboxEntry.objects.filter(**own), "result", True),
                                  (ForgetNote.objects.filter(subject=subject), "note", False)):
        for row in rows.only("pk", column):
            value, dirty = copies_redacted(getattr(row, column), memory_id=memory_id, redact=redact,
                                           objects=objects, quoting=column == "note")
            if dirty:
                rows.model.objects.filter(pk=row.pk).update(**{column: value})
                changed += 1
    return changed
