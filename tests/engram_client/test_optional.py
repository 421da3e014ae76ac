"""engram_client needs neither LangGraph nor LangChain: they are optional extras, and their
adapters say what to install when they are missing."""

from __future__ import annotations

import subprocess
import sys

from tests.api.live import ROOT

_WITHOUT = """
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("langgraph", "langchain_core", "langchain"):
            raise ImportError(f"No module named {name!r}")

sys.meta_path.insert(0, Missing())
import engram_client
from engram_client import AsyncEngramClient, EngramClient
with EngramClient("http://127.0.0.1:9", "eng_x") as client:
    assert client.retries == 2
for module in ("engram_client.langgraph", "engram_client.langchain"):
    try:
        __import__(module)
    except ImportError as exc:
        print(module, "->", exc)
    else:
        raise SystemExit(f"{module} imported without its dependency")
print("langgraph" in sys.modules, "langchain_core" in sys.modules)
"""


def test_the_client_imports_and_works_without_langgraph_or_langchain():
    result = subprocess.run([sys.executable, "-c", _WITHOUT], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "engram_client.langgraph -> engram_client.langgraph needs LangGraph: pip install langgraph " \
                       "(engram_client itself does not)"
    assert lines[1].startswith("engram_client.langchain -> engram_client.langchain needs LangChain")
    assert lines[2] == "False False"
