"""Dependencies point one way (docs/architecture.md): ``engram_core`` imports no app, ``tenants``
imports no ``memory_app``, the domain imports none of its interfaces (the REST API, MCP, the
inspector), no app imports the Django project (``config``) or the measurement code
(the management commands that run it aside), ``language`` and ``embeddings`` import no Django,
no settings and nothing of the project above them, and no product code uses Django's test
utilities."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The interfaces: requests come in here and go down to the domain, never the other way.
EDGE = ("api", "mcp_server", "inspector")
RUNTIME = ("memory_app", "tenants", "engram_core", *EDGE)
MEASUREMENT = ("benchmarks", "engram_eval")
# The Django-free libraries: what they may import of the project is the thread pools only.
LIBRARIES = ("language", "embeddings")
PROJECT = ("config", "memory_app", "tenants", *EDGE, "engram_core", "engram_eval", "engram_client",
           "benchmarks", *LIBRARIES)


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
    pytest.param("engram_core", ("memory_app", "tenants", *EDGE, "language", "embeddings"), (), ("migrations",),
                 id="engram_core"),
    pytest.param("tenants", ("memory_app", *EDGE), (), ("migrations",), id="tenants"),
    # Its management commands too: an operator's command calls services, not views.
    pytest.param("memory_app", EDGE, (), (), id="memory_app-edge"),
    *[pytest.param(package, (*PROJECT, "django", "rest_framework", "celery"), (package, "engram_core.threads"), (),
                   id=f"{package}-library") for package in LIBRARIES],
    *[pytest.param(package, ("config",), (), (), id=f"{package}-config") for package in (*RUNTIME, "engram_eval")],
    *[pytest.param(package, MEASUREMENT, (), ENTRY_POINTS, id=f"{package}-measurement") for package in RUNTIME],
])
def test_package_does_not_import_the_packages_above_it(package, forbidden, allowed, skip):
    modules = _imported_modules(package, skip=skip)
    assert modules, f"no modules found under {package}"
    offending = {path: sorted(n for n in names if any(_within(n, f) for f in forbidden)
                              and not any(_within(n, a) for a in allowed))
                 for path, names in modules.items()}
    assert {p: n for p, n in offending.items() if n} == {}


@pytest.mark.parametrize("package", ["config", "engram_core", "tenants", "memory_app", *EDGE, "engram_eval",
                                     *LIBRARIES])
def test_no_product_code_uses_the_test_utilities(package):
    # override_settings and the like change settings for the whole process: tests only.
    offending = {path: sorted(n for n in names if n == "django.test" or n.startswith("django.test."))
                 for path, names in _imported_modules(package, skip=()).items()}
    assert {p: n for p, n in offending.items() if n} == {}


@pytest.mark.parametrize("package", LIBRARIES)
def test_a_library_imports_without_django(package):
    # Every module, in a fresh interpreter where importing Django (or a settings module) fails.
    modules = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                     for p in (ROOT / package).rglob("*.py"))
    code = (
        "import importlib, sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('django', 'config', 'rest_framework', 'celery'):\n"
        "            raise ImportError(f'{name} imported')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        f"for module in {modules!r}:\n"
        "    importlib.import_module(module)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'config')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
