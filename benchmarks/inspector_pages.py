"""Server-side render time of the inspector's pages at scale: each page requested in process
through Django's test client (middleware, selectors over the network to Elasticsearch,
templates), once untimed and then ``--runs`` times; wall-clock ms, without the browser's network
and rendering.

    scripts/bench inspector [--episodes 10000] [--subjects 10000] [--runs 30]

One tenant with ``--subjects`` end-users (database rows), one of whom has ``--episodes``
episodes (bulk import), 30 facts (20 of them superseding the one before), 6 playbooks and the
tenant 5 catalog entries; a superuser reads every page.
"""

from __future__ import annotations

import argparse
import html
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.test import Client

from benchmarks import engram
from benchmarks.loading import import_call
from benchmarks.harness import log, percentiles

TOPICS = ["thermostat", "door lock", "hub", "motion sensor", "garage door", "lights routine", "camera", "router"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--episodes", type=int, help="the heavy end-user's episodes (default 10000; --quick 500)")
    parser.add_argument("--subjects", type=int, help="end-users of the tenant (default 10000; --quick 200)")
    parser.add_argument("--runs", type=int, help="timed requests per page (default 30; --quick 5)")


def load(*, subjects: int, episodes: int) -> tuple[engram.Tenant, engram.Subject]:
    tenant = engram.tenant_create(slug="bench-inspector", name="Bench Inspector")
    engram.Subject.objects.bulk_create([engram.Subject(tenant=tenant, external_id=f"user-{n:05d}@example.com",
                                                      display_name=f"User {n}") for n in range(subjects - 1)],
                                       batch_size=2000)
    heavy = engram.subject_get_or_create(tenant=tenant, external_id="heavy@example.com", display_name="Heavy",
                                         actor="bench")
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for first in range(0, episodes, 5000):
        import_call(tenant, heavy.external_id, [
            {"text": f"Turn {n}: my {TOPICS[n % len(TOPICS)]} needs attention ({n % 97}).",
             "occurred_at": (start + timedelta(minutes=7 * n)).isoformat(), "session_id": f"s{n // 40}"}
            for n in range(first, min(first + 5000, episodes))])
    previous = None

    def write(operation: str, **payload) -> str:
        return engram.write_submit(tenant=tenant, external_id=heavy.external_id, operation=operation,
                                   payload=payload, actor="bench").memory_id

    for n in range(30):
        fact = {"text": f"Fact {n} about the {TOPICS[n % len(TOPICS)]}."}
        previous = write("fact", **fact, **({"supersedes": [previous]} if previous and n % 3 else {}))
    for n in range(6):
        write("playbook", trigger=f"{TOPICS[n]} broken", steps="1. Check. 2. Reset.")
    for n in range(5):
        engram.catalog_entry_write(tenant=tenant, title=f"Guide {n}", text=f"How to fix the {TOPICS[n]}.")
    return tenant, heavy


def timed_page(client: Client, url: str, runs: int) -> dict:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return {**percentiles(samples, (50, 95)), "max": round(max(samples), 1)}


def run(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    subjects = args.subjects or (200 if args.quick else 10_000)
    episodes = args.episodes or (500 if args.quick else 10_000)
    runs = args.runs or (5 if args.quick else 30)
    started = time.perf_counter()
    tenant, heavy = load(subjects=subjects, episodes=episodes)
    log(f"loaded {subjects} end-users, {episodes} episodes in {time.perf_counter() - started:.0f} s")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.create_superuser("bench-root", "", "bench"))
    u = heavy.user_id
    page = client.get(f"/u/{u}/").content.decode()
    cursor = re.search(r'episodes/more/\?cursor=([^"]+)"', page)
    pages = [
        (f"home (page 1 of {subjects} end-users)", "/"),
        ("home, page 100", "/?page=100"),
        ("home, search", "/?q=user-0424"),
        (f"end-user page ({episodes} episodes)", f"/u/{u}/"),
        *([("older episodes (search_after)", f"/u/{u}/episodes/more/?cursor={html.unescape(cursor[1])}")]
          if cursor else []),
        ("live poll (nothing new)", f"/u/{u}/episodes/live/?since={datetime.now(UTC).isoformat().replace('+', '%2B')}"),
        ("recall sandbox", f"/u/{u}/recall/?q=thermostat+needs+attention"),
        ("keys & tokens", f"/t/{tenant.slug}/keys/"),
        ("audit log", f"/t/{tenant.slug}/audit/"),
    ]
    return {"subjects": subjects, "episodes": episodes, "runs": runs,
            "pages": [{"page": label, "url": url.replace(str(u), "<user>"), **timed_page(client, url, runs)}
                      for label, url in pages]}


def markdown(data: dict) -> str:
    lines = [f"{data['runs']} requests per page after one untimed; ms.", "",
             "| page | p50 ms | p95 ms | max ms |", "|---|---:|---:|---:|"]
    lines += [f"| {p['page']} | {p['p50']:.0f} | {p['p95']:.0f} | {p['max']:.0f} |" for p in data["pages"]]
    return "\n".join(lines)
