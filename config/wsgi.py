import os

from django.core.wsgi import get_wsgi_application

# Production is the default; development and tests opt in (scripts/dev, scripts/test, pytest).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_wsgi_application()

from django.conf import settings  # noqa: E402

from config.serving import malloc_arenas_limit, malloc_release  # noqa: E402

malloc_arenas_limit(settings.ENGRAM_MALLOC_ARENAS)  # before any request thread allocates

# Load the local models now, not on the first request (ENGRAM_WARM_UP=false skips it).
from memory_app.providers import warm_up, wordnet_warm_up  # noqa: E402
from memory_app.recall.options import ranking_config  # noqa: E402

warm_up()
wordnet_warm_up(synonyms=ranking_config().synonym_weight > 0)
malloc_release()  # what building the models freed
