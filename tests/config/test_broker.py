"""The embedded broker publishes atomically: a polling consumer never reads half a message."""

from __future__ import annotations

import pytest
from kombu import Connection
from kombu.transport.virtual.base import Empty

from config import broker


@pytest.fixture
def channel(tmp_path):
    folder = tmp_path / "broker"
    folder.mkdir()
    with Connection("filesystem://", transport="config.broker:Transport",
                    transport_options={"data_folder_in": str(folder), "data_folder_out": str(folder)}) as conn:
        yield conn.default_channel


def test_the_settings_select_the_atomic_transport(settings):
    from config.celery import app

    assert settings.CELERY_BROKER_URL.startswith("filesystem") or settings.CELERY_BROKER_TRANSPORT is None
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        assert app.connection_for_write().transport_cls.__name__ == "Transport"
        assert isinstance(app.connection_for_write().default_channel, broker.Channel)


def test_a_consumer_polling_while_a_message_is_written_sees_nothing_then_all_of_it(channel, monkeypatch):
    seen = []

    def dumps_while_polled(payload):
        # The moment kombu's own channel had an empty file under the message's final name.
        with pytest.raises(Empty):
            channel._get("celery")
        seen.append(channel._size("celery"))
        return real_dumps(payload)

    real_dumps = broker.dumps
    monkeypatch.setattr(broker, "dumps", dumps_while_polled)
    channel._put("celery", {"body": "replay the outbox"})
    assert seen == [0]
    assert channel._size("celery") == 1
    assert channel._get("celery") == {"body": "replay the outbox"}
    with pytest.raises(Empty):
        channel._get("celery")
