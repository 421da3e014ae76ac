import django.db.models.functions.text
from django.db import migrations, models


def refuse_case_duplicates(apps, schema_editor):
    """Two tenants whose slugs differ only in case share a dedicated index prefix: the constraint
    cannot be added over them, and no rename is safe to guess (the slug is the tenant id stored on
    every memory), so the migration stops and names them."""
    Tenant = apps.get_model("tenants", "Tenant")
    seen: dict[str, list[str]] = {}
    for slug in Tenant.objects.values_list("slug", flat=True):
        seen.setdefault(slug.lower(), []).append(slug)
    clashes = [slugs for slugs in seen.values() if len(slugs) > 1]
    if clashes:
        raise RuntimeError("tenant slugs that differ only in case share their dedicated indices: "
                           f"{clashes}; resolve each group before migrating (the slug is the tenant id stored on "
                           "every memory: a new slug means moving the tenant's memories with it)")


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0010_token_read_list_ecosystem'),
    ]

    operations = [
        migrations.RunPython(refuse_case_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='tenant',
            constraint=models.UniqueConstraint(django.db.models.functions.text.Lower('slug'),
                                               name='tenant_slug_unique_ignoring_case',
                                               violation_error_message='A tenant with this slug in another case '
                                                                       'exists already.'),
        ),
    ]
