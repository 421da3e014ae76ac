from django.db import migrations


def external_ids_trimmed(apps, schema_editor):
    """Stored responses kept under the end-user's id as a URL spelled it (with spaces around it)
    move to the id the end-user has, where forget and erase look for them."""
    records = apps.get_model("memory_app", "IdempotencyRecord")
    for record in records.objects.exclude(external_id="").only("pk", "external_id").iterator():
        if record.external_id != record.external_id.strip():
            records.objects.filter(pk=record.pk).update(external_id=record.external_id.strip())


class Migration(migrations.Migration):

    dependencies = [("memory_app", "0004_forget_note")]

    operations = [migrations.RunPython(external_ids_trimmed, migrations.RunPython.noop)]
