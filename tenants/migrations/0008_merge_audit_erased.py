from django.db import migrations


class Migration(migrations.Migration):
    """Joins the audit triggers with the erase mark and the admin log's names: different tables,
    they commute."""

    dependencies = [
        ("tenants", "0006_audit_append_only"),
        ("tenants", "0007_admin_log_without_names"),
    ]

    operations: list[migrations.operations.base.Operation] = []
