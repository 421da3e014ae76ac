import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory_app', '0003_fact_usage'),
        ('tenants', '0005_subject_external_id_addressable'),
    ]

    operations = [
        migrations.CreateModel(
            name='ForgetNote',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('memory_id', models.CharField(max_length=64)),
                ('note', models.TextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('audit_event', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenants.auditevent')),
                ('subject', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.subject')),
            ],
        ),
    ]
