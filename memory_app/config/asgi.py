import os

from django.core.asgi import get_asgi_application

# Production is the default; development and tests opt in (scripts/dev, scripts/test, pytest).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.production")
django_application = get_asgi_application()

# Load the local models now, not on the first request (ENGRAM_WARM_UP=false skips it).
from memory_app import concepts  # noqa: E402
from memory_app.embeddings import warm_up  # noqa: E402

warm_up()
concepts.warm_up()

# Imported once Django is set up: the MCP endpoint uses models and settings.
from memory_app.mcp.asgi import mount  # noqa: E402

# Django, with the MCP endpoint (Streamable HTTP) at /mcp and /mcp/subjects/<external_id>.
application = mount(django_application)
