"""Decrypted API keys, each with the client acting as it, cached in-process for the caller's
``cache_seconds`` (``KeyLifetimes.cache_seconds``) and dropped when a key is rotated or revoked."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from elasticsearch import Elasticsearch

from engram_core.es.client import api_key_client, base_client
from tenants import crypto, es_keys
from tenants.models import Subject, SubjectKey, WriterKey


@dataclass(frozen=True)
class CachedKey:
    key_id: str
    encoded: str
    prefix: str
    expires_at: datetime
    loaded_at: float
    # The client acting as this key, made once: ``.options()`` builds a new client object per
    # call (about a millisecond of CPU on every request path that asked for one).
    es: Elasticsearch

    def client(self) -> Elasticsearch:
        """This key's client; a new one if the base client was replaced since (``reset_clients``)."""
        return self.es if self.es.transport is base_client().transport else api_key_client(self.encoded)


_lock = threading.Lock()
_subject_keys: dict[int, CachedKey] = {}
_writer_keys: dict[str, CachedKey] = {}


def _cached(cache: dict, cache_key, *, prefix: str, cache_seconds: int) -> CachedKey | None:
    with _lock:
        entry = cache.get(cache_key)
    if (entry is None or entry.prefix != prefix
            or time.monotonic() - entry.loaded_at >= cache_seconds
            or entry.expires_at <= timezone.now() + timedelta(seconds=cache_seconds)):
        return None
    return entry


def _remember(cache: dict, cache_key, key: SubjectKey | WriterKey) -> CachedKey:
    encoded = es_keys.encoded_api_key(key.es_key_id, crypto.decrypt(key.secret_encrypted))
    entry = CachedKey(key_id=key.es_key_id, encoded=encoded, prefix=key.index_prefix, expires_at=key.expires_at,
                      loaded_at=time.monotonic(), es=api_key_client(encoded))
    with _lock:
        cache[cache_key] = entry
    return entry


def subject_key_cached(*, subject: Subject, prefix: str, cache_seconds: int) -> CachedKey | None:
    """``subject``'s cached key for the indices of ``prefix``; None when absent, older than
    ``cache_seconds`` or expiring within them."""
    return _cached(_subject_keys, subject.pk, prefix=prefix, cache_seconds=cache_seconds)


def subject_key_remember(*, subject: Subject, key: SubjectKey) -> CachedKey:
    return _remember(_subject_keys, subject.pk, key)


def subject_key_forget(*, subject: Subject) -> None:
    with _lock:
        _subject_keys.pop(subject.pk, None)


def writer_key_cached(*, prefix: str, cache_seconds: int) -> CachedKey | None:
    """The cached writer key for the indices of ``prefix``; None as for ``subject_key_cached``."""
    return _cached(_writer_keys, prefix, prefix=prefix, cache_seconds=cache_seconds)


def writer_key_remember(*, prefix: str, key: WriterKey) -> CachedKey:
    return _remember(_writer_keys, prefix, key)


def writer_keys_forget() -> None:
    with _lock:
        _writer_keys.clear()


def key_cache_clear() -> None:
    with _lock:
        _subject_keys.clear()
        _writer_keys.clear()
