"""Audit hash chain (tamper evidence) and indexes for the inspector's audit views.

Existing events are chained in id order, per tenant, at migration time.
"""

import django.utils.timezone
from django.db import migrations, models


def chain_existing(apps, schema_editor):
    from datetime import UTC

    from tenants import audit_chain

    AuditEvent = apps.get_model("tenants", "AuditEvent")
    heads: dict[str, tuple[int, str]] = {}
    for event in AuditEvent.objects.order_by("id").iterator():
        chain = event.tenant_slug or ""
        seq, prev = heads.get(chain, (0, audit_chain.GENESIS))
        fields = {"chain": chain, "seq": seq + 1,
                  "created_at": event.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
                  "actor_type": event.actor_type, "actor": event.actor, "action": event.action,
                  "tenant_slug": event.tenant_slug, "subject_ref": event.subject_ref, "target_id": event.target_id,
                  "details": event.details}
        digest = audit_chain.link_hash(prev_hash=prev, fields=fields)
        # The historical model's manager is a plain one: a queryset update is allowed here, once.
        AuditEvent.objects.filter(pk=event.pk).update(chain=chain, seq=seq + 1, prev_hash=prev, hash=digest)
        heads[chain] = (seq + 1, digest)


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0002_keys_tokens_audit"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditevent",
            name="created_at",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now),
        ),
        migrations.AddField(model_name="auditevent", name="chain",
                            field=models.CharField(blank=True, default="", max_length=64)),
        migrations.AddField(model_name="auditevent", name="seq", field=models.PositiveBigIntegerField(default=0)),
        migrations.AddField(model_name="auditevent", name="prev_hash",
                            field=models.CharField(blank=True, default="", max_length=64)),
        migrations.AddField(model_name="auditevent", name="hash",
                            field=models.CharField(blank=True, default="", max_length=64)),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="auditevent",
            constraint=models.UniqueConstraint(fields=("chain", "seq"), name="audit_chain_seq_unique"),
        ),
        migrations.AddIndex(model_name="auditevent",
                            index=models.Index(fields=["tenant_slug", "-created_at"],
                                               name="tenants_aud_tenant__idx")),
        migrations.AddIndex(model_name="auditevent",
                            index=models.Index(fields=["subject_ref"], name="tenants_aud_subject_idx")),
    ]
