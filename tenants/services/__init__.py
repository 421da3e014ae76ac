"""Tenant writes, one module per concern: the audit log, the document-level-security guard, the
Elasticsearch clients per credential, end-users, their keys and the writer key, encryption keys,
agent tokens, and a tenant's move between shared and dedicated indices."""
