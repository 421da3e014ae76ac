"""Production: refuses to start without its secrets instead of running with weak defaults."""

from django.core.exceptions import ImproperlyConfigured

from tenants.audit_chain import Keyring, KeyringError, PublicKeys, SigningKeys

from .base import *  # noqa: F403
from .base import env

DEBUG = False
REQUIRED = ("DJANGO_SECRET_KEY", "ES_URL", "ES_ADMIN_USERNAME", "ES_ADMIN_PASSWORD", "ENGRAM_ENCRYPTION_KEYS",
            "ENGRAM_AUDIT_KEYS", "ENGRAM_AUDIT_SIGNING_KEYS", "ES_AUDIT_USERNAME", "ES_AUDIT_PASSWORD")
_missing = [name for name in REQUIRED if not env.str(name, default="")]
if _missing:
    raise ImproperlyConfigured(f"missing required settings in production: {', '.join(_missing)}")
try:
    Keyring.from_secrets(ENGRAM_AUDIT_KEYS)  # noqa: F405
    SigningKeys.from_entries(ENGRAM_AUDIT_SIGNING_KEYS)  # noqa: F405
    PublicKeys.from_entries(ENGRAM_AUDIT_PUBLIC_KEYS)  # noqa: F405
except KeyringError as exc:
    raise ImproperlyConfigured(str(exc)) from None
if ENGRAM_ALLOW_INSECURE_NO_DLS:  # noqa: F405
    raise ImproperlyConfigured(
        "ENGRAM_ALLOW_INSECURE_NO_DLS is a development setting; production needs document-level security")

# HTTPS only: plain HTTP is redirected (except the health check a load balancer makes inside the
# network), and browsers are told to use nothing else for a year. SECURE_PROXY_SSL_HEADER: base.py.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
