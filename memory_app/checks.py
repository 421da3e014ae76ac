"""System checks of settings that only make sense together (``manage.py check``, and every
``runserver``/``migrate``)."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.checks import Error, register
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured

from engram_core.es.timeunits import es_seconds
from memory_app.recall.options import RETIRED_SETTINGS, ranking_config


@register()
def refresh_settings_check(app_configs, **kwargs) -> list[Error]:
    """The refresh interval is a positive Elasticsearch time value, and a turn's pending mark
    outlives it: once the mark expires, a recall no longer refreshes first and relies on the
    periodic refresh having run (read-your-writes would otherwise have a gap)."""
    try:
        interval = es_seconds(settings.ES_REFRESH_INTERVAL)
    except ValueError as exc:
        return [Error(f"ES_REFRESH_INTERVAL: {exc}.", id="memory_app.E001")]
    if interval is None or interval <= 0:
        return [Error(f"ES_REFRESH_INTERVAL is {settings.ES_REFRESH_INTERVAL!r}: the index would never refresh "
                      "on its own, and a turn older than ENGRAM_REFRESH_PENDING_SECONDS would stay unsearchable.",
                      hint="Give a positive interval such as 2s.", id="memory_app.E002")]
    if settings.ENGRAM_REFRESH_PENDING_SECONDS <= interval:
        return [Error(f"ENGRAM_REFRESH_PENDING_SECONDS ({settings.ENGRAM_REFRESH_PENDING_SECONDS}) must be longer "
                      f"than ES_REFRESH_INTERVAL ({settings.ES_REFRESH_INTERVAL}).",
                      hint="Unset it to take five intervals, or raise it.", id="memory_app.E003")]
    return []


@register()
def ranking_check(app_configs, **kwargs) -> list[Error | CheckWarning]:
    """ENGRAM_RANKING names fields of RankingConfig with values they take; a ranking setting of an
    earlier release still in the environment is named, since nothing reads it any more."""
    problems: list[Error | CheckWarning] = []
    try:
        ranking_config()
    except ImproperlyConfigured as exc:
        problems.append(Error(str(exc), hint="See memory_app/recall/ranking.py for the names and their types.",
                              id="memory_app.E004"))
    problems += [CheckWarning(f"{name} is no longer read: the ranking's knobs are RankingConfig's fields.",
                         hint=f"Set ENGRAM_RANKING='{{\"{field}\": ...}}' instead.", id="memory_app.W001")
                 for name, field in RETIRED_SETTINGS.items() if name in os.environ]
    return problems
