"""Dependencies point one way: ``engram_core`` imports no app, ``tenants`` imports no ``memory_app``,
and no app imports the measurement package ``engram_eval`` (its management commands aside)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imported_modules(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(("package", "forbidden"), [
    ("engram_core", ("memory_app", "tenants", "inspector")),
    ("tenants", ("memory_app", "inspector")),
])
def test_package_does_not_import_the_apps_above_it(package, forbidden):
    modules = _imported_modules(package)
    assert modules, f"no modules found under {package}"
    offending = {path: sorted(n for n in names if n.split(".")[0] in forbidden)
                 for path, names in modules.items()}
    assert {p: n for p, n in offending.items() if n} == {}


def test_no_app_imports_the_measurement_package_but_its_management_commands():
    # engram_eval sits above the apps: it runs them in scratch worlds; they never run it.
    offending = {}
    for package in ("engram_core", "tenants", "memory_app", "inspector"):
        for path, names in _imported_modules(package).items():
            if "/management/commands/" in path:
                continue
            if found := sorted(n for n in names if n.split(".")[0] == "engram_eval"):
                offending[path] = found
    assert offending == {}


@pytest.mark.parametrize("package", ["engram_core", "tenants", "memory_app", "inspector", "engram_eval"])
def test_no_product_code_uses_the_test_utilities(package):
    # override_settings and the like change settings for the whole process: tests only.
    offending = {path: sorted(n for n in names if n == "django.test" or n.startswith("django.test."))
                 for path, names in _imported_modules(package).items()}
    assert {p: n for p, n in offending.items() if n} == {}
