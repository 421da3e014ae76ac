"""JSON bodies with a size limit per view (``view.max_body_bytes``), checked before parsing, and no
NUL character anywhere in them."""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from memory_app.api.exceptions import RequestTooLarge
from memory_app.validation import holds_nul


def body_limit(view) -> int:
    return getattr(view, "max_body_bytes", None) or settings.ENGRAM_API_MAX_BODY_BYTES


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = body_limit((parser_context or {}).get("view"))
        # Read one byte more than allowed: bodies without a Content-Length are caught too.
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise RequestTooLarge(f"the request body exceeds {limit} bytes", details={"limit_bytes": limit})
        parsed = super().parse(io.BytesIO(data), media_type, parser_context)
        # No field takes one, and an answer that names what was sent (an unknown field) would carry
        # it into the idempotency record, which PostgreSQL cannot store: refused as a whole.
        if b"\\u0000" in data and holds_nul(parsed):  # JSON writes a NUL only as this escape: no walk otherwise
            raise ParseError("JSON parse error - the body contains a NUL character (\\u0000), which no field takes")
        return parsed
