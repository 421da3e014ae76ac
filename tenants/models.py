import uuid
from datetime import UTC

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from engram_core.validation import validate_new_external_id


class Tenant(models.Model):
    """An organisation deploying agents. Its ``slug`` is the ``tenant_id`` stored on every memory."""

    class Isolation(models.TextChoices):
        # Memories in the indices every shared tenant uses: cheap, but relevance statistics
        # (idf, average lengths) are computed over all tenants' documents.
        SHARED = "shared", "Shared indices"
        # Memories in the tenant's own indices: its relevance statistics are its own.
        DEDICATED = "dedicated", "Dedicated indices"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Change only through tenants.services.isolation_move.tenant_isolation_set (it moves the documents).
    isolation = models.CharField(max_length=16, choices=Isolation.choices, default=Isolation.SHARED)
    # Set while the tenant's documents are being copied to the other mode: writes wait (503).
    isolation_moving_to = models.CharField(max_length=16, choices=Isolation.choices, blank=True, default="")

    class Meta:
        # A dedicated tenant's indices are named after its slug in lower case (Elasticsearch's
        # index names are): two slugs that differ only in case would share them.
        constraints = [models.UniqueConstraint(Lower("slug"), name="tenant_slug_unique_ignoring_case",
                                               violation_error_message="A tenant with this slug in another case "
                                                                       "exists already.")]

    def __str__(self) -> str:
        return self.name


class Subject(models.Model):
    """An end-user whose memory is stored, identified inside its tenant by ``external_id``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="subjects")
    external_id = models.CharField(max_length=200, validators=[validate_new_external_id])
    # The ``user_id`` stored on this subject's memories: opaque and stable, never the external id.
    user_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    display_name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when erasing begins: from then on no key is minted and no memory written for this
    # end-user; the row stays, a content-free tombstone, once the erase is done.
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "external_id"], name="subject_unique_in_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.external_id}"


class Membership(models.Model):
    """A staff user's role in one tenant."""

    class Role(models.TextChoices):
        SUPPORT = "support", "Support"
        TENANT_ADMIN = "tenant_admin", "Tenant admin"
        COMPLIANCE = "compliance", "Compliance"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant.slug}: {self.role}"


class SubjectKeyQuerySet(models.QuerySet):
    def active(self) -> "SubjectKeyQuerySet":
        """Keys in use for new reads: neither rotated out nor revoked (expiry is checked separately)."""
        return self.filter(rotated_at__isnull=True, revoked_at__isnull=True)

    def live(self) -> "SubjectKeyQuerySet":
        """Keys Elasticsearch still accepts as far as we know: not yet invalidated (includes keys in grace)."""
        return self.filter(revoked_at__isnull=True)


class SubjectKey(models.Model):
    """An end-user's Elasticsearch API key: read-only, with the document-level-security query of its subject.

    Lifecycle: active -> rotated (``rotated_at``; still valid until ``grace_until``) -> revoked
    (``revoked_at``: invalidated in Elasticsearch). A revoke skips the grace period.
    """

    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="keys")
    es_key_id = models.CharField(max_length=64, unique=True)
    # Fernet token (tenants.crypto) of the API key secret; never shown anywhere.
    secret_encrypted = models.TextField()
    # The index prefix whose aliases the key's privileges name: a key for another prefix is useless.
    index_prefix = models.CharField(max_length=200)
    # tenants.es_keys.ROLE_VERSION the key was minted under; older keys get rotated.
    role_version = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    rotated_at = models.DateTimeField(null=True, blank=True)
    grace_until = models.DateTimeField(null=True, blank=True)
    superseded_by = models.OneToOneField("self", null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="supersedes")
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = SubjectKeyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subject"],
                condition=models.Q(rotated_at__isnull=True, revoked_at__isnull=True),
                name="subject_key_one_active",
            )
        ]
        indexes = [models.Index(fields=["revoked_at", "grace_until"]), models.Index(fields=["expires_at"])]

    def __str__(self) -> str:
        return f"{self.subject} key {self.es_key_id}"

    @property
    def state(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.rotated_at:
            return "in grace"
        return "active"


class WriterKey(models.Model):
    """Engram's narrowly privileged writer credential (the write actions and the reads they need, on the memory aliases of one prefix)."""

    es_key_id = models.CharField(max_length=64, unique=True)
    secret_encrypted = models.TextField()
    index_prefix = models.CharField(max_length=200)
    # tenants.es_keys.ROLE_VERSION the key was minted under; older keys get rotated.
    role_version = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    rotated_at = models.DateTimeField(null=True, blank=True)
    grace_until = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["index_prefix", "rotated_at", "revoked_at"])]

    def __str__(self) -> str:
        return f"writer key {self.es_key_id} ({self.index_prefix})"


class AgentToken(models.Model):
    """A tenant-scoped bearer token for agents. The plaintext is shown once; only its hash is stored."""

    class Scope(models.TextChoices):
        MEMORY_READ = "memory:read"
        MEMORY_WRITE = "memory:write"
        MEMORY_FORGET = "memory:forget"
        SUBJECT_ERASE = "subject:erase"  # erase whole end-users, and nothing else (tenant:admin may too)
        TENANT_ADMIN = "tenant:admin"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agent_tokens")
    name = models.CharField(max_length=200)
    # Public lookup handle, also the visible part of the token ("eng_<prefix>_<secret>").
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)  # sha256 hex of the whole token
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Who minted it: the staff user (reads through the token are attributed to them too), and
    # their name as it was, or the system job's name when no staff user did.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_by_name = models.CharField(max_length=200, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.name} ({self.prefix})"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("audit events are append-only")

    def delete(self):
        raise TypeError("audit events are append-only")


class AuditEvent(models.Model):
    """Append-only record of a security-relevant action. Never carries memory content.

    ``tenant_slug``/``subject_ref`` snapshot who it was about, so the record reads the same after
    the end-user is erased (an erased end-user's row stays, as a tombstone). The database refuses
    UPDATE and DELETE of these rows (migration 0006), so a tenant or end-user that has events is
    never deleted: the foreign keys protect them.
    """

    class ActorType(models.TextChoices):
        USER = "user"
        AGENT_TOKEN = "agent_token"
        SYSTEM = "system"

    # Set explicitly (not auto_now_add) because the chain hash covers it.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_type = models.CharField(max_length=20, choices=ActorType.choices)
    actor = models.CharField(max_length=200)  # "alice", "<token prefix> (<name>)", "key-maintenance"
    action = models.CharField(max_length=100, db_index=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    tenant_slug = models.CharField(max_length=64, blank=True)
    subject = models.ForeignKey(Subject, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    subject_ref = models.CharField(max_length=64, blank=True)  # the subject's opaque user_id
    target_id = models.CharField(max_length=200, blank=True)
    details = models.JSONField(default=dict, blank=True)
    # Tamper evidence (tenants.audit_chain): position in the tenant's chain, the chained hashes and
    # the id of the ENGRAM_AUDIT_KEYS key that signed the hash ("": an event from before the chain was keyed).
    chain = models.CharField(max_length=64, blank=True, default="")
    seq = models.PositiveBigIntegerField(default=0)
    prev_hash = models.CharField(max_length=64, blank=True, default="")
    hash = models.CharField(max_length=64, blank=True, default="")
    key_id = models.CharField(max_length=32, blank=True, default="")

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["chain", "seq"], name="audit_chain_seq_unique")]
        indexes = [models.Index(fields=["tenant_slug", "-created_at"], name="tenants_aud_tenant__idx"),
                   models.Index(fields=["subject_ref"], name="tenants_aud_subject_idx")]

    def chain_fields(self) -> dict:
        """The content-free fields the chain hash covers (tenants.audit_chain.KEYED_FIELDS)."""
        return {"chain": self.chain, "seq": self.seq,
                "created_at": self.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
                "actor_type": self.actor_type, "actor": self.actor, "action": self.action,
                "tenant_slug": self.tenant_slug, "subject_ref": self.subject_ref, "target_id": self.target_id,
                "details": self.details, "key_id": self.key_id}

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor}: {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("audit events are append-only")


class TokenRead(models.Model):
    """The access log of agent tokens: how many times a token read an end-user's memory, per kind
    of read and hour (``tenants.services.token_reads``). The first read of each row is also an
    audit event (``token.read``), attributed to the staff user who minted the token."""

    class Kind(models.TextChoices):
        EXPORT = "export"
        RECALL = "recall"
        GET = "get"
        HISTORY = "history"
        TURN = "turn"  # a turn's recall
        OUTCOME = "outcome"  # the playbook a reported outcome answers with
        DRY_RUN = "consolidation_dry_run"
        LIST = "list"  # a page of one type of memory (GET subjects/{id}/memories)

    token = models.ForeignKey(AgentToken, on_delete=models.PROTECT, related_name="reads")
    subject = models.ForeignKey(Subject, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    hour = models.DateTimeField()  # the hour the reads fell in (UTC, truncated)
    reads = models.PositiveIntegerField(default=0)
    memories = models.PositiveBigIntegerField(default=0)  # memories shown, summed over the reads
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["token", "subject", "kind", "hour"], name="token_read_unique")]
        indexes = [models.Index(fields=["token", "-hour"]), models.Index(fields=["subject", "-hour"])]

    def __str__(self) -> str:
        return f"{self.token_id} read {self.subject_id} ({self.kind}) x{self.reads} at {self.hour:%Y-%m-%d %H:00}"
