"""benchmarks/setting_ab.py reads its --setting as the typed value a settings override needs (no node needed)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.setting_ab import setting


def test_a_setting_value_is_read_as_json_else_as_a_string():
    assert setting("ENGRAM_CONCEPTS=false") == ("ENGRAM_CONCEPTS", False)
    assert setting("ENGRAM_TEMPORAL_BOOST=0.25") == ("ENGRAM_TEMPORAL_BOOST", 0.25)
    assert setting("ENGRAM_EMBED_CONTEXT=joint") == ("ENGRAM_EMBED_CONTEXT", "joint")


def test_an_unknown_setting_is_refused():
    with pytest.raises(argparse.ArgumentTypeError, match="no such setting: ENGRAM_NO_SUCH"):
        setting("ENGRAM_NO_SUCH=1")
