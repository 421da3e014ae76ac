"""The recall's stages point one way (read → search → rank → explain) and read no setting."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "memory_app" / "recall"
STAGES = ("read", "search", "rank", "explain")


def _imports(stage: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{stage}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_reads_no_setting(stage):
    source = (PACKAGE / f"{stage}.py").read_text()
    assert "django.conf" not in _imports(stage) and "settings." not in source


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_imports_no_later_stage_nor_the_entry_point(stage):
    later = {f"memory_app.recall.{s}" for s in STAGES[STAGES.index(stage) + 1:]}
    imported = _imports(stage)
    assert not imported & later and "memory_app.recall" not in imported


def test_reading_touches_neither_elasticsearch_nor_the_cache():
    assert not {name for name in _imports("read") if name.startswith(("elasticsearch", "django", "tenants"))}
