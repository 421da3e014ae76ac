"""Run an eval module that needs Django's settings but no services: ``python -m engram_eval <name> ...``.

Django is set up first (development settings unless DJANGO_SETTINGS_MODULE says otherwise), then
``engram_eval.<name>.main`` runs with the remaining arguments. Modules: statement_cv, durable_cv.
"""

from __future__ import annotations

import importlib
import os
import sys

import django

MODULES = ("statement_cv", "durable_cv")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in MODULES:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    django.setup()
    importlib.import_module(f"engram_eval.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    main()
