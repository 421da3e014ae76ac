import gc
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from config.bridge import BufferedWSGIMiddleware

# Production is the default; development and tests opt in (scripts/dev, scripts/test, pytest).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
django_wsgi = get_wsgi_application()

from config.serving import malloc_arenas_limit, malloc_release  # noqa: E402

malloc_arenas_limit(settings.ENGRAM_MALLOC_ARENAS)  # before any request thread allocates

# Load the local models now, not on the first request (ENGRAM_WARM_UP=false skips it).
from memory_app.providers import warm_up, wordnet_warm_up  # noqa: E402
from memory_app.recall.options import ranking_config  # noqa: E402

warm_up()
wordnet_warm_up(synonyms=ranking_config().synonym_weight > 0)

# Imported once Django is set up: the MCP endpoint uses models and settings.
from mcp_server.asgi import mount  # noqa: E402

# What is loaded by now (Django, the models, WordNet's tables: ~300k objects) lives as long as the
# process. Frozen, it is out of the collector's reach: a full collection scans only what was
# allocated since, instead of holding the worker's lock for a long pause (docs/performance.md, "Memory").
gc.collect()
gc.freeze()
malloc_release()  # what building the models freed

# Django's views, middleware and ORM are synchronous: served as WSGI on a pool of threads, a
# request runs start to end on one thread that keeps its database connection, instead of going
# back and forth between the event loop and threads (config.bridge hands it over once).
# The MCP endpoint stays ASGI.
django_application = BufferedWSGIMiddleware(django_wsgi, workers=settings.ENGRAM_WEB_THREADS,
                                            max_body_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)

# Django, with the MCP endpoint (Streamable HTTP) at /mcp and /mcp/subjects/<external_id>.
application = mount(django_application)
