import uuid

from django.conf import settings
from django.db import models


class Tenant(models.Model):
    """An organisation deploying agents. Its ``slug`` is the ``tenant_id`` stored on every memory."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Subject(models.Model):
    """An end-user whose memory is stored, identified inside its tenant by ``external_id``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="subjects")
    external_id = models.CharField(max_length=200)
    # The ``user_id`` stored on this subject's memories: opaque and stable, never the external id.
    user_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    display_name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

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
