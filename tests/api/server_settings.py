"""Settings of the Engram processes tests/api/live.py starts: the development settings, with
the outbox replay scheduled every second (the product's beat interval is a setting too)."""

from config.settings.dev import *  # noqa: F403
from config.settings.dev import CELERY_BEAT_SCHEDULE, env

DEBUG = False
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,
    "memory_app.replay-outbox": {"task": "memory_app.tasks.replay_outbox",
                                 "schedule": env.float("ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS", default=1.0)},
}
