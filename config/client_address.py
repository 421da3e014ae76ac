"""The client's address, as login throttling (django-axes) keys on it."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """``REMOTE_ADDR``; behind proxies, the address in ``ENGRAM_CLIENT_IP_HEADER`` that the
    outermost of ``ENGRAM_TRUSTED_PROXIES`` proxies recorded (an X-Forwarded-For list grows by one
    address per proxy, appended on the right; whatever is left of them is the client's to forge).
    Without the header setting no header is believed: any client could name any address."""
    remote = request.META.get("REMOTE_ADDR")
    header = settings.ENGRAM_CLIENT_IP_HEADER
    if not header:
        return remote
    hops = [hop.strip() for hop in request.META.get(header, "").split(",") if hop.strip()]
    if len(hops) < settings.ENGRAM_TRUSTED_PROXIES:
        return remote  # not through the proxies (or not all of them): the peer is the client
    candidate = hops[-settings.ENGRAM_TRUSTED_PROXIES]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
