"""Production: refuses to start without its secrets instead of running with weak defaults."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import env

DEBUG = False
REQUIRED = ("DJANGO_SECRET_KEY", "ES_URL", "ES_ADMIN_USERNAME", "ES_ADMIN_PASSWORD", "ENGRAM_ENCRYPTION_KEYS")
_missing = [name for name in REQUIRED if not env.str(name, default="")]
if _missing:
    raise ImproperlyConfigured(f"missing required settings in production: {', '.join(_missing)}")
if ENGRAM_ALLOW_INSECURE_NO_DLS:  # noqa: F405
    raise ImproperlyConfigured(
        "ENGRAM_ALLOW_INSECURE_NO_DLS is a development setting; production needs document-level security")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
