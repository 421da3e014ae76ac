"""Settings of the Celery worker tests/consolidation/test_worker.py starts: development settings
on the Redis broker scripts/test runs, with a queue of the test's own and a short visibility
timeout, so a task whose worker was killed is delivered again within seconds."""

from config.settings.dev import *  # noqa: F403
from config.settings.dev import env

DEBUG = False
CELERY_TASK_DEFAULT_QUEUE = env.str("ENGRAM_TEST_QUEUE")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("ENGRAM_CELERY_VISIBILITY_TIMEOUT", default=5)}
