from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram_core.es.schema import MemoryType, alias_name
from memory_app.services.episodes import episode_write
from tests.memory_app.conftest import count_docs, make_subject, memory, subject  # noqa: F401 - shared fixtures

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def say():
    """Store user turns as episodes of one session, a minute apart; returns their ids."""
    clock = {"t": T0}

    def say(subject, *texts: str, session: str = "s1") -> list[str]:
        ids = []
        for text in texts:
            clock["t"] += timedelta(minutes=1)
            ids.append(episode_write(subject=subject, text=text, occurred_at=clock["t"],
                                     session_id=session)["id"])
        return ids

    return say


@pytest.fixture
def current_facts(es_admin):
    def facts(subject) -> dict[str, dict]:
        index = alias_name(MemoryType.SEMANTIC)
        es_admin.indices.refresh(index=index)
        hits = es_admin.search(index=index, size=1000, query={"term": {"user_id": str(subject.user_id)}},
                               source_excludes=["embedding"])["hits"]["hits"]
        return {h["_id"]: h["_source"] for h in hits}

    return facts
