from django.db import migrations


class Migration(migrations.Migration):
    """Joins the two 0003 branches (tenant isolation mode; audit hash chain), which touch
    different fields and commute."""

    dependencies = [("tenants", "0003_isolation"), ("tenants", "0003_inspector")]

    operations: list[migrations.operations.base.Operation] = []
