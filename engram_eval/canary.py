"""The canary scan: a unique string written into every kind of copy Engram keeps of memory text,
then a forget (and, for a second end-user, an erase), then every store searched for it: every
Elasticsearch index the admin credential reads, every database table, every key of the shared
cache and of the broker, and the end-user's export. The scan must find each canary before (or it
proves nothing) and none after.
"""

from __future__ import annotations

import io
import json
import random
import string
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIRequest
from django.db import connection
from django.utils import timezone
from elasticsearch import helpers

from engram_core.errors import EngramError
from engram_core.es.client import admin_client
from api.apis import TurnCreateApi
from memory_app.consolidation.services import consolidation_run
from memory_app.models import ConsolidationRun
from memory_app.commands import write_command
from memory_app.services.context import ContextOptions
from memory_app.validation import Limits
from memory_app.outbox import outbox_replay, write_submit
from memory_app.recall import memory_recall
from memory_app.selectors import subject_export
from memory_app.services.episodes import episode_write
from memory_app.services.forget import memory_forget, subject_erase
from tenants.admin import SubjectAdmin
from tenants.models import Subject, Tenant
from tenants.services.subjects import subject_get_or_create
from tenants.services.tokens import agent_token_create

from .sandbox import sandbox
from tenants.services.keys import KeyLifetimes

ACTOR = "canary-scan"

# Every kind of copy, in the order they are written.
FAMILIES = ("episode", "derived fact", "derived playbook", "idempotency record", "outbox payload",
            "other episodes' context", "consolidation run", "caches", "export", "audit details", "admin log")
STORES = ("elasticsearch", "database", "cache", "export")


def _canary() -> str:
    # Letters only: one token to every analyzer, and nothing a LIKE pattern reads specially.
    return "zq" + "".join(random.choices(string.ascii_lowercase, k=12))


@dataclass(frozen=True)
class Hit:
    family: str
    store: str
    where: str

    def __str__(self) -> str:
        return f"[{self.family}] {self.store}: {self.where}"


@dataclass
class PhaseReport:
    """One pass (forget, or erase): the copies found before it and after it."""

    phase: str
    families: tuple[str, ...]
    before: list[Hit] = field(default_factory=list)
    after: list[Hit] = field(default_factory=list)

    @property
    def unseen(self) -> list[str]:
        """Families whose canary the scan did not find before: the scan would prove nothing there."""
        seen = {h.family for h in self.before}
        return [f for f in self.families if f not in seen]

    @property
    def ok(self) -> bool:
        return not self.after and not self.unseen

    @staticmethod
    def _by(hits: list[Hit], key: str, names: tuple[str, ...]) -> str:
        counts = Counter(getattr(h, key) for h in hits)
        return ", ".join(f"{name} {counts.get(name, 0)}" for name in names)

    def lines(self) -> list[str]:
        return [f"{self.phase}, before: {len(self.before)} copies; by family: "
                f"{self._by(self.before, 'family', self.families)}",
                f"{self.phase}, before, by store: {self._by(self.before, 'store', STORES)}",
                f"{self.phase}, after: {len(self.after)} copies; by family: "
                f"{self._by(self.after, 'family', self.families)}",
                f"{self.phase}, after, by store: {self._by(self.after, 'store', STORES)}"]


# ---------------------------------------------------------------- the stores


def _elasticsearch(canaries: dict[str, str], prefix: str) -> Iterator[Hit]:
    """Every index the admin credential reads, by search (every field), and the run's own indices
    document by document (fields that are stored but not searchable, such as metadata)."""
    es = admin_client()
    es.indices.refresh(index="*", ignore_unavailable=True, allow_no_indices=True)
    found: set[tuple[str, str, str]] = set()
    for canary, family in canaries.items():
        response = es.search(index="*", size=100, ignore_unavailable=True, allow_no_indices=True,
                             query={"query_string": {"query": canary, "fields": ["*"], "lenient": True}},
                             source=False)
        found |= {(family, h["_index"], h["_id"]) for h in response["hits"]["hits"]}
    for hit in helpers.scan(es, index=f"{prefix}*", query={"query": {"match_all": {}}}, size=500):
        body = json.dumps(hit["_source"])
        found |= {(family, hit["_index"], hit["_id"]) for canary, family in canaries.items() if canary in body}
    for family, index, doc in sorted(found):
        yield Hit(family, "elasticsearch", f"{index}/{doc}")


def _database(canaries: dict[str, str]) -> Iterator[Hit]:
    """Every column of every table, read as text."""
    quote_name = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor)):
            columns = [c.name for c in connection.introspection.get_table_description(cursor, table)]
            if not columns:
                continue
            where = " OR ".join(f"CAST({quote_name(c)} AS TEXT) LIKE %s" for c in columns)
            for canary, family in canaries.items():
                cursor.execute(f"SELECT COUNT(*) FROM {quote_name(table)} WHERE {where}",  # names from introspection
                               [f"%{canary}%"] * len(columns))
                rows = cursor.fetchone()[0]
                for n in range(rows):
                    yield Hit(family, "database", f"{table} (row {n + 1} of {rows})")


def _redis_urls() -> list[str]:
    urls = []
    location = settings.CACHES.get("default", {}).get("LOCATION")
    if hasattr(cache, "redis_client") and isinstance(location, str):
        urls.append(location)
    if settings.CELERY_BROKER_URL.startswith("redis://"):
        urls.append(settings.CELERY_BROKER_URL)
    return urls


def _redis_value(client: redis.Redis, key: bytes) -> bytes:
    kind = client.type(key)
    if kind == b"string":
        return client.get(key) or b""
    if kind == b"list":
        return b"\n".join(client.lrange(key, 0, -1))
    if kind == b"set":
        return b"\n".join(client.smembers(key))
    if kind == b"zset":
        return b"\n".join(client.zrange(key, 0, -1))
    if kind == b"hash":
        return b"\n".join(k + b"=" + v for k, v in client.hgetall(key).items())
    if kind == b"stream":
        return json.dumps(client.xrange(key), default=repr).encode()
    return b""


def _cache(canaries: dict[str, str]) -> Iterator[Hit]:
    """Every key of every database of the shared cache's Redis and the broker's, names and values;
    a cache of this process alone, entry by entry."""
    for url in dict.fromkeys(_redis_urls()):
        server = redis.Redis.from_url(url)
        for db in server.info("keyspace"):
            client = redis.Redis.from_url(url, db=int(db.removeprefix("db")))
            for key in client.scan_iter(count=1000):
                data = key + b"\n" + _redis_value(client, key)
                for canary, family in canaries.items():
                    if canary.encode() in data:
                        yield Hit(family, "cache", f"redis {db} {key.decode(errors='replace')}")
    local = getattr(cache, "_cache", None)
    if isinstance(local, dict):
        for key, value in list(local.items()):
            for canary, family in canaries.items():
                if canary in key or canary.encode() in value:
                    yield Hit(family, "cache", f"process cache {key}")


def _exports(canaries: dict[str, str], subjects: list[Subject]) -> Iterator[Hit]:
    """What an export of each end-user hands out (an erased one has none)."""
    for subject in subjects:
        subject = Subject.objects.select_related("tenant").get(pk=subject.pk)
        try:
            body = json.dumps(subject_export(subject=subject), default=str)
        except EngramError:
            continue
        for canary, family in canaries.items():
            if canary in body:
                yield Hit(family, "export", f"export of end-user {subject.user_id}")


def cache_scan_check() -> None:
    """The cache scan reads what the cache holds: an entry planted here is found, or the run fails."""
    planted = _canary()
    cache.set(f"canary-scan:{planted}", f"control {planted}", timeout=60)
    try:
        if not any(True for _ in _cache({planted: "control"})):
            raise RuntimeError("the cache scan did not find an entry planted in the cache")
    finally:
        cache.delete(f"canary-scan:{planted}")


def canary_scan(*, canaries: dict[str, str], prefix: str, subjects: list[Subject]) -> list[Hit]:
    """Every copy of any of ``canaries`` (canary -> family) in every store."""
    return [*_elasticsearch(canaries, prefix), *_database(canaries), *_cache(canaries),
            *_exports(canaries, subjects)]


# ---------------------------------------------------------------- the copies


@dataclass
class Seeded:
    """What one end-user's seeding wrote: canary -> family, and the memories to forget."""

    subject: Subject
    canaries: dict[str, str] = field(default_factory=dict)
    forget: list[str] = field(default_factory=list)

    def canary(self, family: str) -> str:
        value = _canary()
        self.canaries[value] = family
        return value


def _say(subject: Subject, text: str, *, at, session: str | None = None, context: str | None = None) -> str:
    return episode_write(subject=subject, text=text, occurred_at=at, session_id=session, context=context)["id"]


def _turn_through_the_api(*, tenant: Tenant, raw_token: str, external_id: str, text: str) -> str:
    """A turn as an agent sends it to the REST view, with an Idempotency-Key, the end-user's id as
    the URL has it (with a trailing space a client left in)."""
    body = json.dumps({"text": text}).encode()
    request = WSGIRequest({
        "REQUEST_METHOD": "POST", "PATH_INFO": f"/api/v1/subjects/{quote(external_id)}/turns",
        "SERVER_NAME": "canary-scan", "SERVER_PORT": "80", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body),
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        "HTTP_AUTHORIZATION": f"Bearer {raw_token}", "HTTP_IDEMPOTENCY_KEY": uuid.uuid4().hex})
    response = TurnCreateApi.as_view()(request, external_id=external_id)
    if response.status_code != 201:
        raise RuntimeError(f"the canary turn was refused: {response.status_code} {response.data}")
    return response.data["id"]


def seed(*, tenant: Tenant, raw_token: str, seeded: Seeded) -> Seeded:
    """Write a canary into every kind of copy for ``seeded``'s end-user."""
    subject = seeded.subject
    clock = timezone.now() - timedelta(hours=1)

    def at() -> Any:
        nonlocal clock
        clock += timedelta(minutes=1)
        return clock

    seeded.forget.append(_say(subject, f"I keep the spare key under the {seeded.canary('episode')} stone.",
                              at=at()))
    seeded.forget.append(_say(subject, f"My favourite colour is {seeded.canary('derived fact')}.", at=at()))
    device = seeded.canary("derived playbook")
    seeded.forget += [_say(subject, f"My {device} hub is offline.", at=at(), session="pb"),
                      _say(subject, f"I restarted the {device} hub.", at=at(), session="pb"),
                      _say(subject, "That worked!", at=at(), session="pb")]
    seeded.forget.append(_turn_through_the_api(
        tenant=tenant, raw_token=raw_token, external_id=f"{subject.external_id} ",
        text=f"My library card number is {seeded.canary('idempotency record')}."))
    queued = write_submit(tenant=tenant, write=write_command(
        tenant=tenant, external_id=subject.external_id, operation="fact",
        payload={"text": f"Their bicycle is a {seeded.canary('outbox payload')} tandem."},
        limits=Limits.from_settings(), context_options=ContextOptions.from_settings(),
        lifetimes=KeyLifetimes.from_settings(), actor=ACTOR),
        actor=ACTOR, background=True)
    seeded.forget.append(queued.memory_id)
    said = "My locker code is {}.".format(seeded.canary("other episodes' context"))
    seeded.forget.append(_say(subject, said, at=at(), session="ctx"))
    _say(subject, "Please remember it.", at=at(), session="ctx")  # its context is derived from the one above
    _say(subject, "Thanks.", at=at(), context=f"User: {said}\nAssistant: Noted.")  # a client's own context
    seeded.forget.append(_say(subject, f"I work at the {seeded.canary('consolidation run')} bakery.", at=at()))
    seeded.forget.append(_say(subject, f"My dog is called {seeded.canary('caches')}.", at=at()))
    seeded.forget.append(_say(subject, f"My gym is {seeded.canary('export')} Fitness.", at=at()))
    seeded.forget.append(_say(subject, f"My bank is {seeded.canary('audit details')} Savings.", at=at()))
    return seeded


def _settle(seeded: Seeded) -> None:
    """What the copies go through before the forget: the queued write replayed, a consolidation and
    a dry run, recalls that fill the caches."""
    subject = seeded.subject
    outbox_replay()
    consolidation_run(subject=subject, dry_run=True, trigger=ConsolidationRun.Trigger.EVAL)
    consolidation_run(subject=subject, trigger=ConsolidationRun.Trigger.EVAL)
    for canary, family in seeded.canaries.items():
        if family == "caches":
            memory_recall(subject=subject, query=f"what is {canary}", k=5)


def _copies(seeded: Seeded, prefix: str) -> list[Hit]:
    return canary_scan(canaries=seeded.canaries, prefix=prefix, subjects=[seeded.subject])


def _written_and_settled(seeded: Seeded, prefix: str) -> list[Hit]:
    """The copies found once the canaries are written (a queued write's payload among them) and
    once they have settled (replayed, consolidated, recalled)."""
    written = _copies(seeded, prefix)
    _settle(seeded)
    return list(dict.fromkeys([*written, *_copies(seeded, prefix)]))


# ---------------------------------------------------------------- the run


def canary_scan_run(*, log: Callable[[str], None] = lambda line: None) -> list[PhaseReport]:
    """Both passes in a sandbox of their own (scratch indices; the run's tenant, end-users and
    audit events stay as its record). Returns the forget pass's report and the erase pass's."""
    reports = []
    cache_scan_check()
    with sandbox(label="canary", actor=ACTOR) as box:
        tenant = box.tenant(slug="canary", name="Canary scan")
        _, raw_token = agent_token_create(tenant=tenant, name="canary scan", actor=ACTOR,
                                          scopes=["memory:read", "memory:write", "memory:forget"])

        # Forget: each memory holding a canary is forgotten; what was derived from it must go too.
        kept = Seeded(subject=subject_get_or_create(tenant=tenant, external_id="canary-forget", actor=ACTOR,
                                                    lifetimes=KeyLifetimes.from_settings()))
        seed(tenant=tenant, raw_token=raw_token, seeded=kept)
        report = PhaseReport(phase="forget", families=tuple(f for f in FAMILIES if f != "admin log"))
        report.before = _written_and_settled(kept, box.prefix)
        for memory_id in kept.forget:
            memory_forget(subject=kept.subject, memory_id=memory_id, reason="user_request", actor=ACTOR)
        report.after = _copies(kept, box.prefix)
        reports.append(report)
        log(" ; ".join(report.lines()))

        # Erase: everything of the end-user goes, its external id and display name included, and
        # the note of a forget.
        gone = Seeded(subject=Subject(external_id="-"))
        external_id = f"canary-erase-{gone.canary('admin log')}"
        gone.subject = subject_get_or_create(tenant=tenant, external_id=external_id, actor=ACTOR,
                                             display_name=f"Erin {gone.canary('admin log')}",
                                             lifetimes=KeyLifetimes.from_settings())
        seed(tenant=tenant, raw_token=raw_token, seeded=gone)
        before = _written_and_settled(gone, box.prefix)
        SubjectAdmin(Subject, None).log_change(_staff_request(), gone.subject,
                                               [{"changed": {"fields": ["display_name"]}}])
        audited = next(c for c, f in gone.canaries.items() if f == "audit details")
        memory_forget(subject=gone.subject, memory_id=gone.forget[-1], reason="other",
                      note=f"asked to forget {audited}", actor=ACTOR)
        report = PhaseReport(phase="erase", families=FAMILIES)
        report.before = list(dict.fromkeys([*before, *_copies(gone, box.prefix)]))
        subject_erase(subject=gone.subject, actor=ACTOR)
        report.after = _copies(gone, box.prefix)
        reports.append(report)
    return reports


def _staff_request() -> Any:
    """What the Django admin's log needs of a request: its staff user."""
    user, _ = get_user_model().objects.get_or_create(username=ACTOR, defaults={"is_staff": True})
    return SimpleNamespace(user=user)
