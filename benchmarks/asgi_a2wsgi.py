"""Engram's ASGI application with Django served through a2wsgi's ``WSGIMiddleware`` alone, in
place of ``config.bridge.BufferedWSGIMiddleware``: the maintained library the bridge is measured
against (docs/architecture.md, "Home-grown pieces, and why"). Serve it with
``ENGRAM_BENCH_ASGI_APP=benchmarks.asgi_a2wsgi:application scripts/bench http ...``."""

from typing import Any

from a2wsgi import WSGIMiddleware
from django.conf import settings

from config.asgi import django_wsgi
from mcp_server.asgi import mount

# (a2wsgi types the ASGI callable with its own event types, narrower than mount's plain mappings)
django_application: Any = WSGIMiddleware(django_wsgi, workers=settings.ENGRAM_WEB_THREADS)
application = mount(django_application)
