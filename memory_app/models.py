"""Database state of the memory domain: the write outbox and the API's idempotency records.

Memories themselves live in Elasticsearch; these tables hold what must survive an
Elasticsearch outage (acknowledged writes not yet applied) and what makes retries safe.
"""

import uuid

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from memory_app.validation import MEMORY_ID_MAX_CHARS
from tenants.models import AgentToken, Tenant


class OutboxQuerySet(models.QuerySet):
    def pending_for(self, *, tenant: Tenant, external_id: str) -> bool:
        """Whether the end-user has writes waiting: a new one queues behind them."""
        return self.filter(tenant=tenant, external_id=external_id, status=OutboxEntry.Status.PENDING).exists()


class OutboxEntry(models.Model):
    """One acknowledged subject write waiting to be applied to Elasticsearch.

    Entries of one subject (tenant + external_id) are applied in ``id`` order; a subject with a
    pending entry gets its new writes queued behind it. ``memory_id`` is the id the write's
    memory will have (assigned before the first attempt), which makes a replay of a create
    that already landed recognisable.
    """

    class Operation(models.TextChoices):
        EPISODE = "episode"
        FACT = "fact"
        PLAYBOOK = "playbook"
        OUTCOME = "outcome"
        FORGET = "forget"
        IMPORT = "import"
        ERASE = "erase"

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"  # could not be applied; kept (payload too) for an operator to retry or discard
        CANCELLED = "cancelled"  # an erase of the end-user made it moot, or an operator discarded it

    class Reason(models.TextChoices):
        OUTAGE = "outage"  # Elasticsearch was unreachable
        BACKLOG = "backlog"  # earlier writes of the subject were still queued
        BACKGROUND = "background"  # too big to apply within the request (large imports)

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=200)
    operation = models.CharField(max_length=20, choices=Operation.choices)
    memory_id = models.CharField(max_length=MEMORY_ID_MAX_CHARS, blank=True)
    payload = models.JSONField(encoder=DjangoJSONEncoder)
    token = models.ForeignKey(AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.CharField(max_length=200)
    reason = models.CharField(max_length=20, choices=Reason.choices)
    # The synchronous attempt failed part-way: the write may already be (partly) applied.
    after_failure = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    # The W3C traceparent of the request that queued it: its replay joins that request's trace.
    traceparent = models.CharField(max_length=64, blank=True, default="")

    objects = OutboxQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["status", "tenant", "external_id", "id"], name="outbox_pending_subject")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.external_id} #{self.pk} {self.operation} ({self.status})"


class OutboxLease(models.Model):
    """A named lease: only one outbox replayer runs at a time (keeps per-subject order trivial)."""

    name = models.CharField(max_length=50, primary_key=True)
    holder = models.CharField(max_length=64)
    expires_at = models.DateTimeField()


class IdempotencyRecord(models.Model):
    """The first response to a write sent with an ``Idempotency-Key``, per agent token.

    Inserted before the write runs (the unique constraint makes the first writer win), completed
    with the response. A record without a response is either in progress (``locked_at`` recent)
    or released after a server error, in which case a retry runs the write again with the same
    pre-assigned ``memory_id``, so it cannot create a second memory.
    """

    token = models.ForeignKey(AgentToken, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # The end-user the request was about, if any: erasing them drops their stored responses.
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=200, blank=True)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=2000)
    fingerprint = models.CharField(max_length=64)  # sha256 of the canonical request data
    memory_id = models.CharField(max_length=MEMORY_ID_MAX_CHARS)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    response_headers = models.JSONField(default=dict, blank=True)
    locked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["token", "key"], name="idempotency_key_unique_per_token")]
        indexes = [models.Index(fields=["tenant", "external_id"], name="idempotency_subject")]

    def __str__(self) -> str:
        return f"{self.token_id}:{self.key} {self.method} {self.path} -> {self.status_code}"


class ConsolidationRun(models.Model):
    """One consolidation of one end-user: what it read, wrote and dropped.

    Holds ids and counts, never memory text (a forget must leave nothing behind here); a dry
    run's proposals go to its caller only.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        DRY_RUN = "dry_run"  # proposed changes returned to the caller, nothing written

    class Trigger(models.TextChoices):
        API = "api"
        SCHEDULE = "schedule"
        ADMIN = "admin"
        INSPECTOR = "inspector"
        EVAL = "eval"
        MANUAL = "manual"

    subject = models.ForeignKey("tenants.Subject", on_delete=models.CASCADE, related_name="consolidation_runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    extractor = models.CharField(max_length=20)
    extractor_version = models.CharField(max_length=50, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    episodes_read = models.PositiveIntegerField(default=0)
    candidates = models.PositiveIntegerField(default=0)
    candidates_dropped = models.PositiveIntegerField(default=0)  # not grounded in their episodes
    facts_created = models.PositiveIntegerField(default=0)
    facts_merged = models.PositiveIntegerField(default=0)
    facts_superseded = models.PositiveIntegerField(default=0)
    facts_unchanged = models.PositiveIntegerField(default=0)
    facts_flagged = models.PositiveIntegerField(default=0)  # every supporting episode forgotten
    playbooks_created = models.PositiveIntegerField(default=0)
    outcomes_recorded = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # Ids only: facts/playbooks written or changed, superseded ids, drop reasons by count.
    details = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The W3C traceparent of what queued it: the run's own trace links to it.
    traceparent = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["subject", "-created_at"], name="consolidation_run_subject")]

    def __str__(self) -> str:
        return f"{self.subject} consolidation #{self.pk} ({self.status})"


class ConsolidationLease(models.Model):
    """Per end-user: at most one consolidation writes at a time. A lease past ``expires_at`` is
    free (its holder died); a redelivered task takes over its own lease at once (same holder)."""

    subject = models.OneToOneField("tenants.Subject", on_delete=models.CASCADE, primary_key=True,
                                   related_name="+")
    holder = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)


class FactUsage(models.Model):
    """How often recall returned one semantic fact, and when it last did.

    Kept here rather than in the fact's Elasticsearch document: there a bump was a partial
    update, which rewrites the whole document, vector included, and re-indexes it. A row update
    is one statement, atomic (``use_count + n``), so concurrent recalls need no
    optimistic-concurrency rounds. Ids and counts only, never memory text; a forget or an
    erase deletes the rows with the facts.
    """

    memory_id = models.CharField(max_length=MEMORY_ID_MAX_CHARS, primary_key=True)  # the fact's Elasticsearch id
    # No database constraint: rows are written by the usage pool's threads on their own
    # connections, and the fact they count lives in Elasticsearch anyway; a forget or an erase
    # deletes them (memory_app.usage.usage_forget).
    subject = models.ForeignKey("tenants.Subject", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    use_count = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.memory_id}: used {self.use_count}×"


class ForgetNote(models.Model):
    """A forget's note in the words of who asked (a staff user, an agent): it may hold personal
    data, so it is kept here, beside the audit event, not in the audit chain (which names only
    the reason's code and outlives every erase). Erased with the end-user; a note quoting what
    it forgets is redacted with the memory's other copies."""

    subject = models.ForeignKey("tenants.Subject", on_delete=models.CASCADE, related_name="+")
    audit_event = models.OneToOneField("tenants.AuditEvent", on_delete=models.PROTECT, related_name="+")
    memory_id = models.CharField(max_length=MEMORY_ID_MAX_CHARS)
    note = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"note on the forget of {self.memory_id}"


class TenantUsageDay(models.Model):
    """What one tenant used on one day (UTC): agent-token requests, memories stored, consolidation
    runs and the consolidation LLM's tokens. Counts only (memory_app.metering)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    requests = models.PositiveBigIntegerField(default=0)
    memories_stored = models.PositiveBigIntegerField(default=0)
    consolidation_runs = models.PositiveBigIntegerField(default=0)
    llm_tokens_in = models.PositiveBigIntegerField(default=0)
    llm_tokens_out = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "day"], name="tenant_usage_one_row_per_day")]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.day}"
