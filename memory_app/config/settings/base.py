"""Settings shared by every environment. Everything deploy-specific comes from the environment."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parents[3]
STATE_DIR = Path(environ.Env().str("ENGRAM_STATE_DIR", default=str(BASE_DIR / ".engram")))

env = environ.Env()

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_htmx",
    "memory_app.apps.MemoryAppConfig",
    "tenants.apps.TenantsConfig",
    "inspector.apps.InspectorConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "memory_app.config.urls"
WSGI_APPLICATION = "memory_app.config.wsgi.application"
ASGI_APPLICATION = "memory_app.config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite is the embedded default; DATABASE_URL (e.g. postgres://...) is honoured.
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{STATE_DIR / 'db.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
LOGIN_URL = "admin:login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"elastic_transport": {"level": "WARNING"}},
}

# ---------------------------------------------------------------- Elasticsearch

ES_URL = env.str("ES_URL", default="http://127.0.0.1:9200")
# Dedicated admin credential (a user, not an API key): schema setup and key minting only.
ES_ADMIN_USERNAME = env.str("ES_ADMIN_USERNAME", default="")
ES_ADMIN_PASSWORD = env.str("ES_ADMIN_PASSWORD", default="")
ES_CA_CERTS = env.str("ES_CA_CERTS", default="") or None
ES_VERIFY_CERTS = env.bool("ES_VERIFY_CERTS", default=True)
ES_REQUEST_TIMEOUT = env.float("ES_REQUEST_TIMEOUT", default=10.0)
ES_INDEX_PREFIX = env.str("ES_INDEX_PREFIX", default="engram")
ES_NUMBER_OF_REPLICAS = env.int("ES_NUMBER_OF_REPLICAS", default=0)
# Licence types whose clusters enforce document-level security.
ES_DLS_LICENCES = ("trial", "platinum", "enterprise")

# ---------------------------------------------------------------- Embeddings

ENGRAM_EMBEDDER = env.str("ENGRAM_EMBEDDER", default="minilm")

# ---------------------------------------------------------------- Celery

# The embedded default needs no server: kombu's filesystem transport, under the state dir.
# Set CELERY_BROKER_URL=redis://... for a real broker (CI and production use Redis).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
_BROKER_DIR = STATE_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"data_folder_in": str(_BROKER_DIR), "data_folder_out": str(_BROKER_DIR),
     "control_folder": str(_BROKER_DIR / "control")}
    if CELERY_BROKER_URL.startswith("filesystem")
    else {}
)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = TIME_ZONE

# dense_vector index_options type: "hnsw" (float, best recall), "int8_hnsw" or "bbq_hnsw" (smaller).
ENGRAM_VECTOR_INDEX_TYPE = env.str("ENGRAM_VECTOR_INDEX_TYPE", default="hnsw")
