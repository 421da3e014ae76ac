from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0005_subject_external_id_addressable'),
    ]

    operations = [
        migrations.AddField(
            model_name='subject',
            name='erased_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
