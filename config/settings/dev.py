"""Local development: DEBUG on; secrets come from the environment written by scripts/dev."""

from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
SECRET_KEY = SECRET_KEY or "dev-only-insecure-key"  # noqa: F405  # never used outside DEBUG
