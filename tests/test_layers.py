"""Dependencies point one way: ``engram_core`` imports no app, ``tenants`` imports no ``memory_app``."""

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
