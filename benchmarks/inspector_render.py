"""Server-side render time of the inspector's pages at scale, against the real node.

Run through ``scripts/bench-inspector`` (its own Elasticsearch, scratch database), or with the
environment of a running stack (ES_URL, ES_ADMIN_*, DATABASE_URL pointing at a scratch file):

    python benchmarks/inspector_render.py [--episodes 10000] [--subjects 10000] [--runs 30]

Set-up (in a sandbox: throwaway indices, keys invalidated afterwards): one tenant with
``--subjects`` end-users (database rows), one of whom has ``--episodes`` episodes (bulk import),
30 facts (10 superseded) and 6 playbooks; 5 catalog entries; a superuser. Each page is requested
in-process through Django's test client (the whole view: middleware, selectors over the network
to Elasticsearch, templates), once untimed and then ``--runs`` times; figures are wall-clock
milliseconds, i.e. server time without the browser's network and rendering.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from engram_eval.sandbox import sandbox
from memory_app.selectors import episode_list
from tenants.models import Subject, Tenant
from memory_app.services.facts import catalog_entry_write, fact_write, playbook_write
from memory_app.services.imports import episodes_import
from tenants.services.subjects import subject_get_or_create

TOPICS = ["thermostat", "door lock", "hub", "motion sensor", "garage door", "lights routine", "camera", "router"]


def timed(client: Client, url: str, runs: int, **params) -> dict[str, float]:
    response = client.get(url, params)
    assert response.status_code == 200, (url, response.status_code)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        response = client.get(url, params)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200
    ordered = sorted(samples)
    return {"median": statistics.median(ordered), "p95": ordered[max(0, round(0.95 * len(ordered)) - 1)],
            "max": ordered[-1]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--subjects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    with sandbox():
        tenant = Tenant.objects.create(slug="bench-inspector", name="Bench Inspector")
        Subject.objects.bulk_create([Subject(tenant=tenant, external_id=f"user-{n:05d}@example.com",
                                             display_name=f"User {n}") for n in range(args.subjects - 1)],
                                    batch_size=2000)
        heavy = subject_get_or_create(tenant=tenant, external_id="heavy@example.com", display_name="Heavy")
        start = datetime(2024, 1, 1, tzinfo=UTC)
        t0 = time.perf_counter()
        episodes_import(subject=heavy, episodes=[
            {"text": f"Turn {n}: my {TOPICS[n % len(TOPICS)]} needs attention ({n % 97}).",
             "occurred_at": (start + timedelta(minutes=7 * n)).isoformat(), "session_id": f"s{n // 40}"}
            for n in range(args.episodes)])
        print(f"imported {args.episodes} episodes in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        previous = None
        for n in range(30):
            fact = fact_write(subject=heavy, text=f"Fact {n} about the {TOPICS[n % len(TOPICS)]}.",
                                       supersedes=[previous] if previous and n % 3 else None)
            previous = fact["id"]
        for n in range(6):
            playbook_write(subject=heavy, trigger=f"{TOPICS[n]} broken", steps="1. Check. 2. Reset.")
        for n in range(5):
            catalog_entry_write(tenant=tenant, title=f"Guide {n}", text=f"How to fix the {TOPICS[n]}.")
        cursor = episode_list(subject=heavy, size=50).next_cursor
        user = get_user_model().objects.create_superuser("bench-root", "", "x")
        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(user)
        u = heavy.user_id
        pages = [
            (f"home (page 1 of {args.subjects} end-users)", "/", {}),
            ("home, page 100", "/", {"page": 100}),
            ("home, search", "/", {"q": "user-0424"}),
            (f"end-user page ({args.episodes} episodes)", f"/u/{u}/", {}),
            ("older episodes (search_after)", f"/u/{u}/episodes/more/", {"cursor": cursor}),
            ("live poll (nothing new)", f"/u/{u}/episodes/live/", {"since": datetime.now(UTC).isoformat()}),
            ("recall sandbox", f"/u/{u}/recall/", {"q": "thermostat needs attention"}),
            ("keys & tokens", f"/t/{tenant.slug}/keys/", {}),
            ("audit log", f"/t/{tenant.slug}/audit/", {}),
        ]
        print("| page | median ms | p95 ms | max ms |\n|---|---:|---:|---:|")
        for label, url, params in pages:
            figures = timed(client, url, args.runs, **params)
            print(f"| {label} | {figures['median']:.0f} | {figures['p95']:.0f} | {figures['max']:.0f} |")


if __name__ == "__main__":
    main()
