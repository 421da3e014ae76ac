"""JSON bodies with a size limit per view (``view.max_body_bytes``) and a nesting limit, both
checked before parsing, and no NUL character anywhere in them."""

from __future__ import annotations

import io
import re

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from api.exceptions import RequestTooLarge
from memory_app.validation import holds_nul


# Deeper than any field takes (metadata included), and far from where Python's JSON decoder runs out
# of stack (about 1,000 levels, less the request's own frames: a RecursionError, which answered 500).
MAX_JSON_DEPTH = 128
# A JSON string (with its escapes) or a bracket: brackets inside strings do not nest anything.
_STRING_OR_BRACKET = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def nested_deeper_than(data: bytes, limit: int) -> bool:
    """Whether the JSON text ``data`` opens more than ``limit`` arrays or objects inside each other."""
    if data.count(b"[") + data.count(b"{") <= limit:  # the usual body: no walk
        return False
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(data):
        token = m.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def body_limit(view) -> int:
    return getattr(view, "max_body_bytes", None) or settings.ENGRAM_API_MAX_BODY_BYTES


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = body_limit((parser_context or {}).get("view"))
        # Read one byte more than allowed: bodies without a Content-Length are caught too.
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise RequestTooLarge(f"the request body exceeds {limit} bytes", details={"limit_bytes": limit})
        if nested_deeper_than(data, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - the body nests arrays or objects more than {MAX_JSON_DEPTH} "
                             "levels deep")
        parsed = super().parse(io.BytesIO(data), media_type, parser_context)
        # No field takes one, and an answer that names what was sent (an unknown field) would carry
        # it into the idempotency record, which PostgreSQL cannot store: refused as a whole.
        if b"\\u0000" in data and holds_nul(parsed):  # JSON writes a NUL only as this escape: no walk otherwise
            raise ParseError("JSON parse error - the body contains a NUL character (\\u0000), which no field takes")
        return parsed
