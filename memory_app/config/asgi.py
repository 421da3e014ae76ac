import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")
django_application = get_asgi_application()

# Imported once Django is set up: the MCP endpoint uses models and settings.
from memory_app.mcp.asgi import mount  # noqa: E402

# Django, with the MCP endpoint (Streamable HTTP) at /mcp and /mcp/subjects/<external_id>.
application = mount(django_application)
