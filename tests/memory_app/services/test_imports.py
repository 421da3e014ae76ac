"""Bulk import: original timestamps, all or nothing, and a retried import answered, not refused."""

import json
import io
import time

import pytest
from elasticsearch import helpers

from engram_core.errors import Conflict, ValidationFailed
from engram_core.es.schema import MemoryType, alias_name
from embeddings import EmbeddingError
from memory_app.selectors import memory_get
from memory_app.recall import memory_recall
from memory_app.services import context
from memory_app.services.episodes import episode_write
from memory_app.services.imports import episodes_import
from memory_app.services.store import client_memory_id
from memory_app.validation import Limits, write_validate


def test_import_keeps_original_timestamps_and_reports_progress(subject):
    seen = []
    episodes = [{"text": f"Session note {n}: we talked about hiking trail {n}.",
                 "occurred_at": f"2023-05-{n + 1:02d}T10:00:00Z", "session_id": "s1"} for n in range(30)]
    written = episodes_import(subject=subject, episodes=episodes, batch_size=8,
                              progress=lambda done, total: seen.append((done, total)))
    assert len(written) == 30 and seen[-1] == (30, 30)
    results = memory_recall(subject=subject, query="hiking trail 7", k=1, types=["episodic"])
    assert results[0]["occurred_at"].startswith("2023-05-08T10:00:00")


def test_import_refreshes_once_at_the_end_not_per_chunk(subject, es_admin, settings):
    # Under a 60 s refresh interval, a refresh wait per chunk (the old refresh=wait_for) would
    # take about a minute per chunk; one refresh at the end makes everything visible at once.
    index = alias_name(MemoryType.EPISODIC)
    es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": "60s"})
    try:
        episodes = [{"text": f"Import note {n} about the boiler.", "occurred_at": f"2023-06-{n + 1:02d}T09:00:00Z"}
                    for n in range(20)]
        started = time.monotonic()
        written = episodes_import(subject=subject, episodes=episodes, batch_size=8)
        assert time.monotonic() - started < 30
        # No refresh of our own: what a search sees right now is what the import made visible.
        assert es_admin.count(index=index)["count"] == 20
        assert {r["id"] for r in memory_recall(subject=subject, query="boiler import note", k=20,
                                               types=["episodic"])} == set(written)
    finally:
        es_admin.indices.put_settings(index=index, settings={"index.refresh_interval": settings.ES_REFRESH_INTERVAL})


def test_import_with_one_bad_episode_writes_nothing(subject, count_docs):
    episodes = [{"text": "fine", "occurred_at": "2023-05-01T10:00:00Z"},
                {"text": "no date"}]
    with pytest.raises(ValidationFailed) as exc:
        episodes_import(subject=subject, episodes=episodes)
    assert exc.value.details["index"] == 1 and exc.value.code == "invalid_datetime"
    assert count_docs() == 0


def test_import_failing_half_way_keeps_nothing(subject, count_docs):
    # The stored id the client's id 5 maps to is taken (client ids are namespaced per end-user).
    taken = client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id,
                             client_id="episode-0000000005")
    existing = episode_write(subject=subject, text="already here", memory_id=taken)
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z", "id": f"episode-{n:010d}"}
                for n in range(10)]
    with pytest.raises(Conflict) as exc:
        episodes_import(subject=subject, episodes=episodes, batch_size=3)
    assert exc.value.code == "import_failed"
    assert count_docs() == 1
    assert memory_get(subject=subject, memory_id=existing["id"])["text"] == "already here"


def test_an_import_whose_embedding_fails_part_way_keeps_nothing(subject, count_docs, monkeypatch):
    # The third batch's vectors fail (a hosted embedder gone away) after the first chunk was
    # written: that chunk is deleted again before the error reaches the caller.
    embedded = []
    episode_vectors = context.episode_vectors

    def failing(items, **kwargs):
        embedded.append(len(items))
        if len(embedded) == 3:
            raise EmbeddingError("the embedding server went away")
        return episode_vectors(items, **kwargs)

    monkeypatch.setattr(context, "episode_vectors", failing)
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z"} for n in range(10)]
    written = []
    with pytest.raises(EmbeddingError):
        episodes_import(subject=subject, episodes=episodes, batch_size=3,
                        progress=lambda done, total: written.append(done))
    assert written and written[-1] >= 3  # a chunk had been written when the embedding failed
    assert count_docs() == 0


@pytest.mark.parametrize("session_id", [7, {"id": "s1"}, "", "x" * 201])
def test_a_bad_session_id_is_refused_before_anything_is_written(subject, count_docs, session_id):
    with pytest.raises(ValidationFailed) as exc:
        episodes_import(subject=subject, episodes=[
            {"text": "fine", "occurred_at": "2023-05-01T10:00:00Z", "session_id": "s1"},
            {"text": "also fine", "occurred_at": "2023-05-01T10:01:00Z", "session_id": session_id}])
    assert exc.value.details["field"] == "session_id"
    with pytest.raises(ValidationFailed):
        write_validate(operation="episode", payload={"text": "fine", "session_id": session_id},
                       limits=Limits.from_settings())
    assert count_docs() == 0


def test_an_import_sent_again_answers_its_episodes_not_a_conflict(subject, count_docs):
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z", "id": f"episode-{n:04d}"}
                for n in range(5)]
    first = episodes_import(subject=subject, episodes=episodes, batch_size=2)
    assert episodes_import(subject=subject, episodes=episodes, batch_size=2) == first
    assert count_docs() == 5
    # The same id with other content is still a conflict, and the earlier import is kept whole.
    with pytest.raises(Conflict):
        episodes_import(subject=subject, episodes=[*episodes[:4], {**episodes[4], "text": "changed"}])
    assert count_docs() == 5 and memory_get(subject=subject, memory_id=first[4])["text"] == "episode 4"


def test_a_bulk_chunk_the_client_resent_after_it_applied_counts_once(subject, count_docs, monkeypatch):
    """The Elasticsearch client retries a bulk request whose answer timed out; the cluster had
    applied it, so the retry's creates conflict with themselves."""
    real = helpers.streaming_bulk

    def applied_then_resent(client, actions, **kwargs):
        actions = list(actions)
        helpers.bulk(client, actions, raise_on_error=False)  # applied; the answer is lost
        return real(client, actions, **kwargs)

    monkeypatch.setattr(helpers, "streaming_bulk", applied_then_resent)
    episodes = [{"text": f"episode {n}", "occurred_at": "2023-05-01T10:00:00Z", "id": f"episode-{n:04d}"}
                for n in range(5)]
    written = episodes_import(subject=subject, episodes=episodes, batch_size=2)
    assert len(written) == 5 and count_docs() == 5
    # And when such an import fails for another reason, what it wrote (both sends) is undone.
    taken = client_memory_id(tenant_id=subject.tenant_id, external_id=subject.external_id,
                             client_id="other-0009")
    episode_write(subject=subject, text="already here", memory_id=taken)
    more = [{"text": f"other {n}", "occurred_at": "2023-05-02T10:00:00Z", "id": f"other-{n:04d}"} for n in range(10)]
    with pytest.raises(Conflict):
        episodes_import(subject=subject, episodes=more, batch_size=3)
    assert count_docs() == 6


def test_import_command_reports_progress_and_refuses_bad_lines(subject, tmp_path, count_docs):
    from django.core.management import CommandError, call_command

    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps({"text": f"note {n}", "occurred_at": f"2024-01-0{n + 1}T08:00:00Z"})
                              for n in range(3)))
    out = io.StringIO()
    call_command("memory_import", str(good), "--tenant", "acme", "--subject", "alice", stdout=out)
    assert "3/3 episodes written" in out.getvalue() and "imported 3 episodes for acme/alice" in out.getvalue()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine", "occurred_at": "2024-01-01T08:00:00Z"}\n{"text": "", "occurred_at": "2024-01-01T08:00:00Z"}\n')
    with pytest.raises(CommandError, match="empty_text: episode 1: text must not be empty"):
        call_command("memory_import", str(bad), "--tenant", "acme", "--subject", "alice")
    assert count_docs() == 3
