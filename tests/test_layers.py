"""Dependencies point one way: ``engram_core`` imports no app, ``tenants`` imports no ``memory_app``,
the English readers import nothing else of ``memory_app``, no runtime package imports the
measurement code (the management commands that run it aside), and no product code uses Django's
test utilities."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ("memory_app", "tenants", "inspector", "engram_core")
MEASUREMENT = ("benchmarks", "engram_eval")


def _imported_modules(package: str, *, skip: tuple[str, ...]) -> dict[str, set[str]]:
    """Every module each file under ``package`` imports, relative imports resolved."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if any(part in path.parts for part in skip):
            continue
        here = list(path.relative_to(ROOT).with_suffix("").parts)
        if here[-1] == "__init__":
            here = here[:-1]
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + (path.name == "__init__.py")] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                # ``from a import b``: b may be a module of a, so a.b is what is imported.
                names.update(f"{module}.{alias.name}" for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# A management command may run the measurement code: it is an entry point, not a layer.
ENTRY_POINTS = ("migrations", "management")


@pytest.mark.parametrize(("package", "forbidden", "allowed", "skip"), [
    pytest.param("engram_core", ("memory_app", "tenants", "inspector"), (), ("migrations",), id="engram_core"),
    pytest.param("tenants", ("memory_app", "inspector"), (), ("migrations",), id="tenants"),
    pytest.param("memory_app/language", ("memory_app",), ("memory_app.language",), (), id="language"),
    *[pytest.param(package, MEASUREMENT, (), ENTRY_POINTS, id=f"{package}-measurement") for package in RUNTIME],
])
def test_package_does_not_import_the_packages_above_it(package, forbidden, allowed, skip):
    modules = _imported_modules(package, skip=skip)
    assert modules, f"no modules found under {package}"
    offending = {path: sorted(n for n in names if any(_within(n, f) for f in forbidden)
                              and not any(_within(n, a) for a in allowed))
                 for path, names in modules.items()}
    assert {p: n for p, n in offending.items() if n} == {}


@pytest.mark.parametrize("package", ["engram_core", "tenants", "memory_app", "inspector", "engram_eval"])
def test_no_product_code_uses_the_test_utilities(package):
    # override_settings and the like change settings for the whole process: tests only.
    offending = {path: sorted(n for n in names if n == "django.test" or n.startswith("django.test."))
                 for path, names in _imported_modules(package, skip=()).items()}
    assert {p: n for p, n in offending.items() if n} == {}
