import os
from pathlib import Path

from celery import Celery
from celery.signals import worker_init, worker_process_shutdown

# Production is the default; development and tests opt in (scripts/dev, scripts/test, pytest).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

app = Celery("engram")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_configure.connect
def _prepare_filesystem_broker(sender, **kwargs):
    # The embedded filesystem transport needs its folders to exist before it can connect.
    from django.conf import settings  # not sender.conf: reading it inside on_configure recurses

    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        for folder in settings.CELERY_BROKER_TRANSPORT_OPTIONS.values():
            Path(folder).mkdir(parents=True, exist_ok=True)


@worker_init.connect
def _limit_malloc_arenas(**kwargs):
    # Before the pool's processes or threads start (they inherit the limit): as in a web process.
    from django.conf import settings

    from config.serving import malloc_arenas_limit

    malloc_arenas_limit(settings.ENGRAM_MALLOC_ARENAS)


@worker_init.connect
def _metrics_exporter(sender=None, **kwargs):
    # In the main process, before the pool's: it serves every pool process's metrics.
    from memory_app.observability import worker_metrics_start

    pool = getattr(getattr(sender, "pool_cls", None), "__module__", "") or ""
    worker_metrics_start(concurrency=getattr(sender, "concurrency", None),
                         pool="prefork" if pool.endswith("prefork") else pool)


@worker_process_shutdown.connect
def _metrics_process_exited(pid=None, **kwargs):
    from memory_app.observability import worker_process_exited

    worker_process_exited(pid or os.getpid())
