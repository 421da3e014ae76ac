"""One live Engram server (a real process over HTTP, on the stack scripts/test starts) for the
client's adapters: the LangGraph store, the LangChain retriever and the README's example."""

from __future__ import annotations

import pytest

from tests.api.live import LiveEngram


@pytest.fixture(scope="package")
def live_engram(tmp_path_factory, es_admin):
    engram = LiveEngram(tmp_path_factory.mktemp("live-client"))
    engram.setup()
    engram.start()
    yield engram
    engram.stop()
    engram.cleanup(es_admin)


@pytest.fixture(scope="package")
def live_token(live_engram) -> str:
    return live_engram.token("adapters")
