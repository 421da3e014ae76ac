"""Every staff read of memory is logged, by one mechanism: each inspector URL pattern declares
whether it shows memory, and a walk over every pattern with a canary in the end-user's memory
fails for any response that carries the canary without a ``staff.viewed`` event."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from inspector import urls as inspector_urls
from memory_app import selectors
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write
from memory_app.services.imports import episodes_import
from tenants.models import AgentToken, AuditEvent

CANARY = "Zorblaxian"
PUBLIC = {"login", "logout"}  # before a staff user is known: nothing of an end-user to show
HX = {"HX-Request": "true"}


def _viewed(alice) -> int:
    return AuditEvent.objects.filter(action="staff.viewed", subject_ref=str(alice.user_id)).count()


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


@pytest.fixture
def canary_memory(subjects):
    """Alice's memory, every kind of it naming the canary: more episodes than one page holds, a
    supersession chain, and an unconsolidated turn a dry run turns into a proposed fact."""
    alice, _ = subjects
    episodes_import(subject=alice, episodes=[
        {"text": f"{CANARY} note {n:03d}", "occurred_at": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"}
        for n in range(60)])
    old = fact_write(subject=alice, text=f"Alice's cat is called {CANARY}.")
    new = fact_write(subject=alice, text=f"Alice's cat is called {CANARY} Junior.", supersedes=[old["id"]])
    episode_write(subject=alice, text=f"I live in {CANARY}ville.", session_id="s1")
    return {"fact": new["id"]}


def _kwargs(pattern, alice, canary_memory) -> dict:
    names = set(pattern.pattern.regex.groupindex)
    values = {"user_id": alice.user_id, "memory_id": canary_memory["fact"], "slug": alice.tenant.slug,
              "fmt": "jsonl", "token_id": AgentToken.objects.filter(tenant=alice.tenant).values_list("pk", flat=True)
              .first() or 1}
    return {name: values[name] for name in names}


def _queries(name: str, alice) -> list[dict]:
    """Each way a pattern is asked for memory: plain, and with what its page would send."""
    first = selectors.episode_list(subject=alice, size=50)
    return {
        "recall": [{}, {"q": CANARY}],
        "episodes_more": [{"cursor": first.next_cursor}],
        "episodes_live": [{}, {"since": "2000-01-01T00:00:00Z"}],
    }.get(name, [{}])


def test_every_inspector_view_declares_whether_it_shows_memory():
    undeclared = [p.name for p in inspector_urls.urlpatterns
                  if p.name not in PUBLIC and not hasattr(p.callback, "staff_reads")]
    assert undeclared == []


def test_every_response_that_carries_memory_is_logged(staff, canary_memory, subjects):
    """Walks every inspector URL pattern as a superuser (every permission), plain and as htmx,
    GET and, where the view wants it, POST: any response holding the canary must add a
    ``staff.viewed`` event of the end-user."""
    alice, _ = subjects
    client = Client()
    client.force_login(staff["superuser"])
    showed, unlogged = set(), []
    for pattern in inspector_urls.urlpatterns:
        if pattern.name in PUBLIC or pattern.name == "erase":  # erase's GET is a form; its POST is tested apart
            continue
        url = reverse(f"inspector:{pattern.name}", kwargs=_kwargs(pattern, alice, canary_memory))
        for query in _queries(pattern.name, alice):
            for headers in ({}, HX):
                before = _viewed(alice)
                response = client.get(url, query, headers=headers)
                if response.status_code == 405:
                    response = client.post(url, query, headers=headers)
                if CANARY in _body(response):
                    showed.add(pattern.name)
                    if _viewed(alice) == before:
                        unlogged.append(f"{pattern.name} {query or ''} {'htmx' if headers else ''}".strip())
    assert unlogged == []
    # The walk saw memory where memory is: it did not pass because nothing showed any.
    assert showed >= {"subject", "episodes_more", "episodes_live", "chain", "recall", "consolidation_dry_run",
                      "export"}


def test_a_direct_call_to_a_partial_is_logged(staff, canary_memory, subjects):
    """The paged and live partials, called without their page, log the memory they return."""
    alice, _ = subjects
    client = Client()
    client.force_login(staff["support"])
    cursor = selectors.episode_list(subject=alice, size=50).next_cursor
    before = _viewed(alice)
    more = client.get(f"/u/{alice.user_id}/episodes/more/", {"cursor": cursor})
    assert CANARY in more.content.decode() and _viewed(alice) == before + 1
    live = client.get(f"/u/{alice.user_id}/episodes/live/", {"since": "2000-01-01T00:00:00Z"})
    assert CANARY in live.content.decode() and _viewed(alice) == before + 2
    details = [e.details for e in AuditEvent.objects.filter(action="staff.viewed", subject_ref=str(alice.user_id))
               .order_by("-seq")[:2]]
    assert [d["view"] for d in details] == ["episodes_live", "episodes_more"]


def test_each_batch_the_live_feed_shows_is_logged_by_its_ids(staff, canary_memory, subjects):
    """Issue 67: the feed's polls were covered by the page view that opened it, so an open page
    showed new episodes for hours under one event. Now each batch is an event naming its ids."""
    alice, _ = subjects
    client = Client()
    client.force_login(staff["support"])
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    poll = re.search(r'hx-get="([^"]*episodes/live/[^"]*)"', page).group(1).replace("&amp;", "&")
    logged = _viewed(alice)
    assert CANARY not in client.get(poll).content.decode() and _viewed(alice) == logged  # nothing new: no event
    for n in range(2):
        written = episode_write(subject=alice, text=f"{CANARY} writes turn {n}")
        fresh = client.get(poll).content.decode()
        assert f"{CANARY} writes turn {n}" in fresh and _viewed(alice) == logged + n + 1
        event = AuditEvent.objects.filter(action="staff.viewed", subject_ref=str(alice.user_id)).order_by("-seq")[0]
        assert event.details["view"] == "episodes_live" and written["id"] in event.details["ids"]
        assert CANARY not in json.dumps(event.details)  # the ids, never the text
        poll = re.search(r'hx-get="([^"]*episodes/live/[^"]*)"', fresh).group(1).replace("&amp;", "&")


def test_exports_are_in_the_staff_access_tab(staff, canary_memory, subjects):
    alice, _ = subjects
    admin, compliance = Client(), Client()
    admin.force_login(staff["tenant_admin"])
    compliance.force_login(staff["compliance"])
    assert CANARY in admin.get(f"/u/{alice.user_id}/export/").content.decode()
    tab = compliance.get("/t/acme/audit/", {"access": "staff"}).content.decode()
    assert "export" in tab and "tenant_admin" in tab
