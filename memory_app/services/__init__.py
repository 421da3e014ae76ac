"""Memory writes, one module per concern: the shared store step, episodes, facts and playbooks,
supersession, forget and erase, import, and the rebuilds of an index migration.

Every write here validates its input before anything is written (ValidationFailed: nothing
stored); writes through the writer credential, with tenant_id/user_id from the subject, never the
payload; reads a document through the subject's own DLS key before changing it (what the subject
cannot see is NotFound); returns once a following recall can see it (it refreshes, or with
``defer_refresh`` marks the subject's next read to, ``memory_app.freshness``); and undoes what it
did before raising when a multi-document operation fails part-way.
"""
