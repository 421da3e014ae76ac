"""Audit events: the id of the key that signed each hash; the database refuses UPDATE and DELETE
of them (tenants.audit_triggers), so the end-users and tenants they name are protected."""

import django.db.models.deletion
from django.db import migrations, models

from tenants import audit_triggers


def create_triggers(apps, schema_editor):
    for sql in audit_triggers.statements(schema_editor.connection.vendor):
        schema_editor.execute(sql)


def drop_triggers(apps, schema_editor):
    for sql in audit_triggers.statements(schema_editor.connection.vendor, create=False):
        schema_editor.execute(sql)


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0005_subject_external_id_addressable"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="key_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="subject",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to="tenants.subject"),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="tenant",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to="tenants.tenant"),
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
