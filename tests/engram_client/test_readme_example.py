"""The README's "Using Engram from LangGraph and LangChain" example, run as written (a fresh
Python process, ENGRAM_URL and ENGRAM_TOKEN set) against a live Engram server."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.api.live import ROOT


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using Engram from LangGraph and LangChain", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_the_readme_example_runs_as_written(live_engram, live_token):
    env = {**os.environ, "ENGRAM_URL": live_engram.url, "ENGRAM_TOKEN": live_token}
    env.pop("PYTHONPATH", None)
    # As typed into ``python`` in the repository's root.
    result = subprocess.run([sys.executable, "-"], input=readme_example(), cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "['semantic: I moved to Porto.']"
    assert lines[1] == "{'text': 'I moved to Porto.'}"
    assert re.fullmatch(r"semantic [0-9a-f]{32} \d+\.\d+ I moved to Porto\.", lines[2])
