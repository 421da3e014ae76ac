"""A forget, step by step: the order of the steps is here and nowhere else."""

from __future__ import annotations

from typing import Any

from engram_core.errors import NotFound
from engram_core.es.schema import MemoryType
from memory_app import selectors
from memory_app.services.context import ContextOptions
from memory_app.services.forget import audit, contexts, copies, documents
from memory_app.services.forget import cascade as derived
from memory_app.services.forget.cascade import Cascade
from memory_app.services.forget.forgetting import Forgetting
from memory_app.validation import ForgetFields
from tenants.models import Subject
from tenants.services.audit import Actor


def memory_forget(*, subject: Subject, memory_id: str, reason: str, actor: Actor, note: str | None = None,
                  cascade: bool = True, context_options: ContextOptions | None = None) -> dict[str, Any]:
    """``forget_apply`` for a caller with no edge (the eval, a command, a test): the forget's
    reason, note and cascade are cleaned first (``ForgetFields.clean``, as the edge cleans a
    forget write's); ``context_options``: read here when not given."""
    request = ForgetFields.clean({"reason": reason, "note": note, "cascade": cascade})
    return forget_apply(subject=subject, memory_id=memory_id, request=request, actor=actor,
                        context_options=context_options or ContextOptions.from_settings())


def forget_apply(*, subject: Subject, memory_id: str, request: ForgetFields, actor: Actor,
                 context_options: ContextOptions) -> dict[str, Any]:
    """Hard-delete one of the subject's memories and every copy of it; leave a content-free
    tombstone in the audit log (``request``, as cleaned: the reason's code; its note, the caller's own words, is kept
    beside it, outside the chain).

    Forgetting an episode takes with it, in the same call, what was derived from it: a fact or
    playbook none of whose supporting episodes is left is forgotten too (audited as a cascade of
    this forget); one with support left keeps only that support and is flagged for review
    (``metadata.review``). ``request.cascade`` False keeps them as they are (minus this episode's id), and
    the audit event says so. Forgetting a fact or playbook never touches its episodes.

    Returns ``{"id", "memory_type", "cascade"}``. Raises NotFound when the memory is not the
    subject's (an episode forgotten before still has its cascade completed first).
    ``context_options``: how changed contexts are embedded again (read at the entry).
    """
    reason, note, follow = request.reason, request.note, request.cascade
    try:
        visible = selectors.visible_document(subject=subject, memory_id=memory_id)
    except NotFound:
        # Forgotten before, perhaps by a call that failed part-way: what was derived from it
        # still follows it.
        _cascade_step(subject=subject, gone=memory_id, reason=reason, actor=actor, follow=follow,
                      options=context_options)
        raise
    forgetting = Forgetting.of(subject=subject, visible=visible, reason=reason, actor=actor, context=context_options)
    episode = forgetting.memory_type is MemoryType.EPISODIC
    # 1. copies, before the delete too: a forget cut short after its delete finds the memory
    #    missing when retried, its text gone with it.
    copies.copies_purge(forgetting)
    # 2. contexts, before the delete: a failure here leaves the episode in place to forget again;
    #    the other order could leave its text in another episode with nothing left to forget.
    if episode:
        contexts.contexts_forget(forgetting)
    # 3. delete (NotFound when it went meanwhile), and its use counter.
    documents.document_delete(forgetting)
    documents.counter_drop(forgetting)
    # 4. cascade, after the delete: a fact derived from this episode by a run that read it just
    #    before is either found here or finds the episode gone when it is written (facts.fact_write).
    followed = (_cascade_step(subject=subject, gone=memory_id, reason=reason, actor=actor, follow=follow,
                              options=context_options) if episode else Cascade())
    # 5. copies again (one made meanwhile), and this process's cached vectors.
    copies.copies_purge(forgetting)
    copies.vectors_drop()
    # 6. audit, last: the tombstone once the memory and its copies are gone, and the caller's
    #    note beside it, written without the memory's phrases (as the purge leaves every note).
    audit.forget_audit(forgetting, note=note, cascade=follow, derived=followed.ids() if episode else None)
    return {"id": memory_id, "memory_type": forgetting.memory_type.value, "cascade": followed.as_dict()}


def _cascade_step(*, subject: Subject, gone: str, reason: str, actor: Actor, follow: bool,
                  options: ContextOptions) -> Cascade:
    # Looked up on the module at each call: a test cuts a forget short here.
    return derived.derived_follow(subject=subject, gone={gone}, reason=reason, actor=actor, cascade=follow,
                                  context_options=options)
