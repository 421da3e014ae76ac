"""Forget and erase: a memory, or every memory and key of an end-user, goes from every store that
holds a copy of it, leaving a content-free tombstone in the audit log.

``pipeline.forget_apply`` is the order of a forget in one place; each step is a function of its
own module writing one store: ``copies`` (the database's copies: stored responses, outbox
payloads, notes; and this process's cached vectors), ``contexts`` (the other episodes' contexts
that quote it), ``documents`` (the memory's Elasticsearch document, and a fact's use counter),
``cascade`` (the facts and playbooks derived from a forgotten episode, each forgotten by the same
steps), ``audit`` (the tombstone). ``erase`` removes a whole end-user."""

from memory_app.services.forget.cascade import Cascade, derived_follow, derived_support_check
from memory_app.services.forget.contexts import contexts_redact
from memory_app.services.forget.copies import copies_redacted, memory_copies_purge
from memory_app.services.forget.erase import subject_erase
from memory_app.services.forget.pipeline import forget_apply, memory_forget

__all__ = ["Cascade", "contexts_redact", "copies_redacted", "derived_follow", "derived_support_check",
           "forget_apply", "memory_copies_purge", "memory_forget", "subject_erase"]
