from datetime import datetime

from django import template
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

from memory_app.validation import FORGET_REASONS

register = template.Library()


@register.simple_tag
def forget_reasons():
    """The codes a forget's reason is one of, with what each means."""
    return FORGET_REASONS


@register.filter
def reason_label(code):
    """A forget's reason as staff read it (a reason recorded before the codes existed, as it was)."""
    return FORGET_REASONS.get(code, code)


@register.filter
def when(value):
    """A timestamp as <time>: UTC on the server, rewritten to the viewer's time zone by inspector.js."""
    if not value:
        return "—"
    moment = value if isinstance(value, datetime) else parse_datetime(str(value))
    if moment is None:
        return value
    return format_html('<time datetime="{}" data-local>{} UTC</time>', moment.isoformat(),
                       moment.strftime("%Y-%m-%d %H:%M"))


@register.filter
def num(value, digits=3):
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, float):
        return f"{value:.{int(digits)}g}" if abs(value) < 1e-3 and value else f"{value:.{int(digits)}f}"
    return value


@register.filter
def get(mapping, key):
    return (mapping or {}).get(key)


@register.filter
def pct(value):
    return f"{100 * float(value):.0f}%"
