"""The ASGI server runs on uvloop with httptools wherever Engram starts it (memory_app.config.serving)."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from uvicorn.config import Config

from memory_app.config.serving import UVICORN_FLAGS

ROOT = Path(settings.BASE_DIR)


@pytest.mark.parametrize("script", ["scripts/dev", "scripts/bench"])
def test_the_scripts_serve_with_the_flags(script):
    text = (ROOT / script).read_text()
    commands = re.findall(r"^uvicorn .*?(?<!\\)$", text, flags=re.M | re.S)
    assert commands, f"{script} starts no uvicorn"
    for command in commands:
        assert " ".join(UVICORN_FLAGS) in " ".join(command.replace("\\\n", " ").split())


def test_the_flags_name_an_installed_loop_and_parser():
    """uvicorn resolves both (uvloop and httptools are installed, from uvicorn[standard]); a
    missing one would fail here rather than leave the server on a slower fallback."""
    flags = dict(zip(UVICORN_FLAGS[::2], UVICORN_FLAGS[1::2], strict=True))

    async def app(scope, receive, send):  # uvicorn resolves the flags without loading Engram
        pass

    config = Config(app, loop=flags["--loop"], http=flags["--http"], interface="asgi3", log_config=None)
    config.load()
    assert config.get_loop_factory().__module__.startswith("uvloop")
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"
