from django.db import migrations


def names_dropped(apps, schema_editor):
    """The admin's log names the objects of these apps by type and primary key only
    (``tenants.admin.admin_log_name``): an end-user's name is their external id."""
    entries = apps.get_model("admin", "LogEntry")
    for entry in entries.objects.filter(content_type__app_label__in=["tenants", "memory_app"]).select_related(
            "content_type").iterator():
        try:
            kind = apps.get_model(entry.content_type.app_label, entry.content_type.model)._meta.verbose_name
        except LookupError:  # a model since removed
            kind = entry.content_type.model
        name = f"{kind} {entry.object_id}"[:200]
        if entry.object_repr != name:
            entries.objects.filter(pk=entry.pk).update(object_repr=name)


class Migration(migrations.Migration):

    dependencies = [("tenants", "0006_subject_erased_at"), ("admin", "0003_logentry_add_action_flag_choices"),
                    ("contenttypes", "0002_remove_content_type_name")]

    operations = [migrations.RunPython(names_dropped, migrations.RunPython.noop)]
