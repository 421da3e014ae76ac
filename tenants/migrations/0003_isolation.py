from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tenants", "0002_keys_tokens_audit")]

    operations = [
        # Existing keys were minted with the `read` / `read` + `write` groups: version 1.
        migrations.AddField(model_name="subjectkey", name="role_version",
                            field=models.PositiveSmallIntegerField(default=1)),
        migrations.AddField(model_name="writerkey", name="role_version",
                            field=models.PositiveSmallIntegerField(default=1)),
        migrations.AddField(
            model_name="tenant",
            name="isolation",
            field=models.CharField(choices=[("shared", "Shared indices"), ("dedicated", "Dedicated indices")],
                                   default="shared", max_length=16),
        ),
        migrations.AddField(
            model_name="tenant",
            name="isolation_moving_to",
            field=models.CharField(blank=True, choices=[("shared", "Shared indices"), ("dedicated", "Dedicated indices")],
                                   default="", max_length=16),
        ),
    ]
