"""The inspector's views against the real Elasticsearch node: the role matrix cell by cell,
what each page shows, and the actions' audit events."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from django.test import Client

from inspector.access import MATRIX
from memory_app import selectors
from memory_app.consolidation import selectors as consolidation_selectors
from memory_app.consolidation import services as consolidation
from memory_app.models import ConsolidationRun
from memory_app.services.episodes import episode_write
from memory_app.services.facts import fact_write, playbook_write
from memory_app.services.imports import episodes_import
from memory_app.recall import memory_recall
from memory_app.tasks import consolidate_subject
from tenants import audit_chain
from tenants.crypto import audit_keyring, audit_public_keys
from tenants.models import AuditEvent, Membership
from tenants.services.audit import audit_record
from tenants.services.clients import clear_caches

ROLES = [*Membership.Role.values, "superuser"]
HTMX_ACTIONS = ("memory.forget", "consolidation.dry_run", "consolidation.run")


def _cells(alice, memory_id: str) -> dict[str, tuple[str, str, dict]]:
    """cell -> (method, url, data); the permission a cell needs is its key in MATRIX."""
    u, t = alice.user_id, alice.tenant.slug
    return {
        "home": ("get", "/", {}),
        "subject.view": ("get", f"/u/{u}/", {}),
        "subject.recall": ("get", f"/u/{u}/recall/", {"q": "thermostat"}),
        "memory.forget": ("post", f"/u/{u}/forget/{memory_id}/", {"reason": "user_request"}),
        "consolidation.dry_run": ("post", f"/u/{u}/consolidation/dry-run/", {}),
        "consolidation.run": ("post", f"/u/{u}/consolidation/run/", {}),
        "subject.export": ("get", f"/u/{u}/export/", {}),
        "subject.erase": ("get", f"/u/{u}/erase/", {}),
        "keys.view": ("get", f"/t/{t}/keys/", {}),
        "keys.manage": ("post", f"/t/{t}/keys/{u}/rotate/", {}),
        "usage.view": ("get", f"/t/{t}/usage/", {}),
        "audit.view": ("get", f"/t/{t}/audit/", {}),
        "audit.export": ("get", f"/t/{t}/audit/export.jsonl", {}),
        "audit.checkpoint": ("post", f"/t/{t}/audit/checkpoint/", {}),
    }


def _allowed(role: str, permission: str) -> bool:
    return role == "superuser" or role in MATRIX[permission]


@pytest.mark.parametrize("role", ROLES)
def test_role_matrix_every_cell(role, staff, subjects):
    alice, mallory = subjects
    client = Client()
    client.force_login(staff[role])
    got, want = {}, {}
    for permission in MATRIX:
        memory = episode_write(subject=alice, text=f"turn for {permission}")
        method, url, data = _cells(alice, memory["id"])[permission]
        # htmx for the actions: allowed, they answer 200 with the message/partial, not a redirect.
        headers = {"HX-Request": "true"} if permission in HTMX_ACTIONS else {}
        response = getattr(client, method)(url, data, headers=headers)
        allowed = _allowed(role, permission)
        got[permission] = response.status_code
        want[permission] = (302 if permission in ("keys.manage", "audit.checkpoint") else 200) if allowed else 403
        # Another tenant's end-user or tenant: 404, whatever the role (superusers see every tenant).
        other = _cells(mallory, "x" * 12)[permission]
        if permission != "home":
            response = getattr(client, other[0])(other[1], other[2], headers=headers)
            got[f"{permission} (other tenant)"] = response.status_code
            want[f"{permission} (other tenant)"] = (got[permission] if role == "superuser" and permission not in
                                                    ("memory.forget",) else 404)
    if role == "superuser":  # no memory "xxxx..." for mallory: the forget says so on the page, 200
        want["memory.forget (other tenant)"] = 200
    assert got == want


def test_erase_post_needs_typed_confirmation_and_role(staff, subjects):
    alice, _ = subjects
    fact_write(subject=alice, text="Alice likes tea.")
    support, admin = Client(), Client()
    support.force_login(staff["support"])
    admin.force_login(staff["tenant_admin"])
    assert support.post(f"/u/{alice.user_id}/erase/", {"confirm": alice.external_id}).status_code == 403
    wrong = admin.post(f"/u/{alice.user_id}/erase/", {"confirm": "alice"}, follow=True)
    assert b"did not match" in wrong.content
    assert selectors.subject_memory_counts(subject=alice)["semantic"] == 1
    done = admin.post(f"/u/{alice.user_id}/erase/", {"confirm": alice.external_id}, follow=True)
    assert b"erased: 1 memories" in done.content
    assert AuditEvent.objects.filter(action="subject.erase", subject_ref=str(alice.user_id)).count() == 1


def test_subject_page_shows_memories_and_logs_the_staff_access(staff, subjects):
    alice, _ = subjects
    episode = episode_write(subject=alice, text="My thermostat drops to 16 at night.")
    v1 = fact_write(subject=alice, text="Alice keeps 20 degrees.", supporting_episode_ids=[episode["id"]])
    v2 = fact_write(subject=alice, text="Alice keeps 21 degrees.", supersedes=[v1["id"]])
    playbook_write(subject=alice, trigger="thermostat drops", steps="Disable eco mode.")
    client = Client()
    client.force_login(staff["support"])
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    assert "My thermostat drops to 16 at night." in page
    assert "Alice keeps 21 degrees." in page and "Alice keeps 20 degrees." not in page  # superseded hidden
    assert "Disable eco mode." in page and "posterior mean" in page
    assert f'href="#m-{episode["id"]}"' not in page  # provenance is on v1, which is superseded
    shown = client.get(f"/u/{alice.user_id}/?superseded=1").content.decode()
    assert "Alice keeps 20 degrees." in shown and f'href="#m-{episode["id"]}"' in shown
    viewed = AuditEvent.objects.filter(action="staff.viewed", subject_ref=str(alice.user_id), actor="support")
    assert viewed.count() == 2 and viewed.first().details == {"view": "memories"}
    chain = client.get(f"/u/{alice.user_id}/chain/{v2['id']}/").content.decode()
    assert chain.index("Alice keeps 20 degrees.") < chain.index("Alice keeps 21 degrees.")


def test_live_poll_returns_only_new_episodes_and_moves_the_cursor(staff, subjects):
    alice, _ = subjects
    first = episode_write(subject=alice, text="first turn")
    client = Client()
    client.force_login(staff["support"])
    # Back-dated imports written in the same batch must not flood the feed (one write time).
    episodes_import(subject=alice, episodes=[
        {"text": f"old {n}", "occurred_at": f"2025-01-0{n + 1}T00:00:00Z"} for n in range(5)])
    since = selectors.episode_latest_write(subject=alice)
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    assert f"since={quote(since)}" in page.replace("&amp;", "&")
    quiet = client.get(f"/u/{alice.user_id}/episodes/live/", {"since": since}).content.decode()
    assert "first turn" not in quiet and "old " not in quiet and "hx-swap-oob" not in quiet
    episode_write(subject=alice, text="a brand new turn", occurred_at="2020-01-01T00:00:00Z")
    fresh = client.get(f"/u/{alice.user_id}/episodes/live/", {"since": since}).content.decode()
    assert "a brand new turn" in fresh and "first turn" not in fresh and "old " not in fresh
    assert 'hx-swap-oob="afterbegin:#episodes"' in fresh
    newest = selectors.episode_latest_write(subject=alice)
    assert f"since={quote(newest)}" in fresh.replace("&amp;", "&")  # the cursor moved on
    assert first["created_at"] < newest


def test_episode_paging_with_cursor(staff, subjects):
    alice, _ = subjects
    episodes_import(subject=alice, episodes=[
        {"text": f"turn {n:03d}", "occurred_at": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"} for n in range(120)])
    first = selectors.episode_list(subject=alice, size=50)
    second = selectors.episode_list(subject=alice, size=50, cursor=first.next_cursor)
    third = selectors.episode_list(subject=alice, size=50, cursor=second.next_cursor)
    texts = [e["text"] for e in first.items + second.items + third.items]
    assert texts == [f"turn {n:03d}" for n in reversed(range(120))]
    assert third.next_cursor is None
    client = Client()
    client.force_login(staff["support"])
    more = client.get(f"/u/{alice.user_id}/episodes/more/", {"cursor": first.next_cursor}).content.decode()
    assert "turn 069" in more and "turn 070" not in more
    bad = client.get(f"/u/{alice.user_id}/episodes/more/", {"cursor": "garbage"})
    assert bad.status_code == 200 and b"invalid cursor" in bad.content


def test_home_counts_in_one_request_and_search(staff, subjects, tenants):
    alice, _ = subjects
    episode_write(subject=alice, text="hello")
    fact_write(subject=alice, text="a fact")
    stats = selectors.subjects_memory_stats(tenant=tenants[0], subjects=[alice])
    assert stats[str(alice.user_id)]["counts"] == {"episodic": 1, "semantic": 1, "procedural": 0}
    client = Client()
    client.force_login(staff["support"])
    page = client.get("/", {"q": "ALICE"}).content.decode()
    assert "alice@example.com" in page and "mallory" not in page
    assert "No end-user matches" in client.get("/", {"q": "nobody"}).content.decode()


def test_recall_sandbox_renders_explain_generically_and_does_not_bump_use(staff, subjects):
    alice, _ = subjects
    fact = fact_write(subject=alice, text="Alice's thermostat is an Acme T3.")
    client = Client()
    client.force_login(staff["support"])
    html = client.get(f"/u/{alice.user_id}/recall/", {"q": "thermostat model"},
                      headers={"HX-Request": "true"}).content.decode()
    assert "Acme T3" in html and "#1" in html
    for key, value in memory_recall(subject=alice, query="thermostat model", explain=True)[0]["explain"].items():
        for name in (value if isinstance(value, dict) else {key: value}):
            assert name in html  # every explain key is laid out, whatever the keys are
    assert selectors.memory_get(subject=alice, memory_id=fact["id"])["use_count"] == 0


def test_recall_sandbox_shows_the_sentence_an_episode_was_found_by(staff, subjects):
    alice, _ = subjects
    episode_write(subject=alice, text="Thanks for asking about the move! The boxes are unpacked. "
                                      "I'm off to go swimming with the kids.")
    client = Client()
    client.force_login(staff["support"])
    html = client.get(f"/u/{alice.user_id}/recall/", {"q": "what sport does she do with her children"},
                      headers={"HX-Request": "true"}).content.decode()
    assert "Dense match on the sentence" in html and "I&#x27;m off to go swimming with the kids." in html


def test_recall_sandbox_says_which_question_a_reply_took_credit_from(staff, subjects):
    alice, _ = subjects
    question, answer = (episode_write(subject=alice, text=text, session_id="trip",
                                      occurred_at=datetime(2025, 3, 1, 10, n, tzinfo=UTC))
                        for n, text in enumerate(["Melanie: How was your trip to Lisbon with the choir?",
                                                  "Alice: Wonderful, we ate grilled sardines every night."]))
    client = Client()
    client.force_login(staff["support"])
    html = client.get(f"/u/{alice.user_id}/recall/", {"q": "How was Alice's trip to Lisbon?"},
                      headers={"HX-Request": "true"}).content.decode()
    ranks = {hit["id"]: n for n, hit in enumerate(
        memory_recall(subject=alice, query="How was Alice's trip to Lisbon?", k=10), start=1)}
    card = html.split(f'id="hit-{ranks[answer["id"]]}"')[1].split("</li>")[0]
    assert "grilled sardines" in card and "Answers the question before it in its session" in card
    assert f'href="#hit-{ranks[question["id"]]}"' in card and "reply_credit" in card
    assert question["id"] not in card  # the raw id is not a cell
    # The question, told beside the answer, takes a share of its score as well, said the same way.
    asked = html.split(f'id="hit-{ranks[question["id"]]}"')[1].split("</li>")[0]
    assert "Told beside another candidate in its session" in asked and "neighbour_credit" in asked
    assert f'href="#hit-{ranks[answer["id"]]}"' in asked and answer["id"] not in asked


def test_recall_sandbox_says_how_it_read_the_question(staff, subjects, settings):
    alice, _ = subjects
    for n in range(6):
        episode_write(subject=alice, text=f"Melanie: the kids loved the lake, day {n}.")
    settings.ENGRAM_RANKING = {**settings.ENGRAM_RANKING, "entity_min_mentions": 5}
    client = Client()
    client.force_login(staff["support"])
    html = client.get(f"/u/{alice.user_id}/recall/", {"q": "What did Melanie's kids love last week?"},
                      headers={"HX-Request": "true"}).content.decode()
    reading = html.split('<dl class="reading"')[1].split("</dl>")[0]
    assert "<code>Melanie&#x27;s kids love last week?</code>" in reading  # the BM25 leg's words
    assert "Name “Melanie”" in reading and "named by 5 or more of this end-user’s memories" in reading
    assert "searched for <code>kids love last week?</code> by words and by the meaning" in reading
    assert "“last week”: episodes from" in reading and "× 1.25 (time_window)" in reading
    assert "Kinds asked for" not in reading  # no plural after the question word
    synonyms = reading.split('<div class="synonyms">')[1].split("</div>")[0]
    assert "<dt>Also matched as</dt>" in synonyms and "<code>kids</code>: child, youngster" in synonyms
    assert "× 0.50 of the word’s share" in synonyms and "<code>melanie" not in synonyms  # a name has none
    assert "<dt>Asks for</dt><dd>an event, by its grammar: episodic memories × 1.10 (intent)" in reading
    kinds = client.get(f"/u/{alice.user_id}/recall/", {"q": "Which cities has Melanie visited?"},
                       headers={"HX-Request": "true"}).content.decode()
    assert "<dt>Kinds asked for</dt><dd><code>city</code>" in kinds.split('<dl class="reading"')[1].split("</dl>")[0]
    state = client.get(f"/u/{alice.user_id}/recall/", {"q": "Where does Melanie live now?"},
                       headers={"HX-Request": "true"}).content.decode()
    assert "<dt>Asks for</dt><dd>how things stand, by its grammar: semantic and catalog memories × 1.10 (intent)" \
        in state.split('<dl class="reading"')[1].split("</dl>")[0]
    # Melanie is someone Alice knows; a question naming Alice herself is about her own turns.
    assert "Names this end-user" not in reading
    own = client.get(f"/u/{alice.user_id}/recall/", {"q": "When did Alice go to the lake?"},
                     headers={"HX-Request": "true"}).content.decode()
    own = own.split('<div class="own-name">')[1].split("</div>")[0]
    assert "<dt>Names this end-user</dt><dd><code>alice</code>" in own and "× 1.00 of the word’s share" in own


def test_forget_records_reason_and_removes_the_memory(staff, subjects):
    alice, _ = subjects
    fact = fact_write(subject=alice, text="Alice's door code hint.")
    client = Client()
    client.force_login(staff["support"])
    empty = client.post(f"/u/{alice.user_id}/forget/{fact['id']}/", {"reason": " "}, follow=True)
    assert b"reason must be one of" in empty.content
    client.post(f"/u/{alice.user_id}/forget/{fact['id']}/", {"reason": "legal", "note": "GDPR request #12"})
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    assert "door code" not in page.split("Forgotten memories")[0]
    assert "a legal or compliance request" in page and "GDPR request #12" in page  # the note, beside the log
    event = AuditEvent.objects.get(action="memory.forget", target_id=fact["id"])
    assert event.actor == "support" and event.details["reason"] == "legal"
    assert "GDPR" not in json.dumps(event.chain_fields())
    missing = client.post(f"/u/{alice.user_id}/forget/{fact['id']}/", {"reason": "legal"}, follow=True)
    assert missing.status_code == 200 and b"Could not forget" in missing.content


def test_the_forget_dialog_lists_what_goes_with_an_episode_before_it_is_confirmed(staff, subjects):
    alice, _ = subjects
    said = episode_write(subject=alice, text="I'm allergic to peanuts and I love jazz.")["id"]
    again = episode_write(subject=alice, text="Jazz is my favourite music.")["id"]
    alone = fact_write(subject=alice, text="Alice is allergic to peanuts.", supporting_episode_ids=[said])
    shared = fact_write(subject=alice, text="Alice loves jazz.", supporting_episode_ids=[said, again])
    client = Client()
    client.force_login(staff["support"])

    dialog = client.get(f"/u/{alice.user_id}/forget/{said}/", headers={"HX-Request": "true"}).content.decode()

    assert "forgotten with it</strong> · semantic: Alice is allergic to peanuts." in dialog
    assert "kept, flagged for review</strong> (other episodes support it) · semantic: Alice loves jazz." in dialog
    assert 'name="keep_derived"' in dialog
    assert client.get(f"/u/{alice.user_id}/forget/{said}/").status_code == 200  # the page, without htmx
    done = client.post(f"/u/{alice.user_id}/forget/{said}/", {"reason": "user_request"}, follow=True)
    assert b"1 derived memory forgotten with it; 1 derived memory kept and flagged for review" in done.content
    assert not selectors.fact_list(subject=alice, include_superseded=True)[0]["id"] == alone["id"]
    [left] = selectors.fact_list(subject=alice)
    assert left["id"] == shared["id"] and left["supporting_episode_ids"] == [again]
    assert "supporting episodes were forgotten" in client.get(f"/u/{alice.user_id}/").content.decode()


def test_cluster_refusal_is_a_message_not_a_stack_trace(staff, subjects, settings):
    """The real probe of the real node answers "no DLS" when only platinum/enterprise count:
    every memory read is refused, and the page says so instead of failing."""
    alice, _ = subjects
    client = Client()
    client.force_login(staff["support"])
    settings.ES_DLS_LICENCES = ("platinum", "enterprise")
    clear_caches()
    try:
        response = client.get(f"/u/{alice.user_id}/")
        recall = client.get(f"/u/{alice.user_id}/recall/", {"q": "x"}, headers={"HX-Request": "true"})
        home = client.get("/")
    finally:
        settings.ES_DLS_LICENCES = ("trial", "platinum", "enterprise")
        clear_caches()
    refusal = b"cannot enforce document-level security"
    assert response.status_code == 200 and refusal in response.content and b"Traceback" not in response.content
    assert recall.status_code == 200 and b"Recall failed: Elasticsearch cannot enforce" in recall.content
    assert home.status_code == 200 and b"alice@example.com" in home.content and refusal in home.content


def test_keys_page_token_secret_shown_once(staff, subjects):
    from django.contrib.sessions.models import Session

    client = Client()
    client.force_login(staff["tenant_admin"])
    created = client.post("/t/acme/tokens/", {"name": "bot", "scopes": ["memory:read"]})
    raw = created.context["new_token"]["raw"]
    assert raw.startswith("eng_") and raw in created.content.decode() and "not be shown again" in created.content.decode()
    assert "no-store" in created["Cache-Control"]
    # Never stored server side (issue 67): not in any session, not in a message, not in the database.
    assert all(raw not in str(s.get_decoded()) for s in Session.objects.all())
    assert raw not in created.cookies.output()
    assert "not be shown again" not in client.get("/t/acme/keys/").content.decode()
    bad = client.post("/t/acme/tokens/", {"name": "", "scopes": []}, follow=True)
    assert b"a token needs a name" in bad.content
    long = client.post("/t/acme/tokens/", {"name": "b" * 201, "scopes": ["memory:read"]}, follow=True)
    assert long.status_code == 200 and b"at most 200 characters" in long.content  # was a 500 on PostgreSQL


def test_audit_export_csv_and_jsonl_verify_offline(staff, subjects, checkpoint_store):
    client = Client()
    client.force_login(staff["compliance"])
    jsonl = b"".join(client.get("/t/acme/audit/export.jsonl").streaming_content).decode()
    report = audit_chain.verify_export(jsonl.splitlines(), public=audit_public_keys())
    assert report.ok and report.header["filtered"] is False and report.chains[0].checked >= 2
    report = audit_chain.verify_export(jsonl.splitlines(), public=audit_public_keys(), keyring=audit_keyring())
    assert report.ok and report.header["filtered"] is False and report.chains[0].checked >= 2
    rows = list(csv.DictReader(io.StringIO(b"".join(client.get("/t/acme/audit/export.csv").streaming_content)
                                           .decode())))
    assert {r["action"] for r in rows} >= {"subject.created", "subject_key.minted"}
    assert all(json.loads(r["details"]) is not None and len(r["hash"]) == 64 for r in rows)
    filtered = b"".join(client.get("/t/acme/audit/export.jsonl", {"action": "subject_key"}).streaming_content)
    events = [json.loads(line) for line in filtered.decode().splitlines() if '"type": "event"' in line]
    assert events and all(e["action"].startswith("subject_key") for e in events)
    report = audit_chain.verify_export(filtered.decode().splitlines(), public=audit_public_keys())
    assert report.ok and report.header["filters"] == {"action": "subject_key"}
    page = client.get("/t/acme/audit/verify/").content.decode()
    assert "Chain intact" in page


def test_an_audit_export_records_a_keyed_hash_of_its_filter_not_its_text(staff, subjects):
    """Issue 67: the export's event kept the end-user filter's text in the chain for ever."""
    client = Client()
    client.force_login(staff["compliance"])
    for _ in range(2):
        client.get("/t/acme/audit/export.jsonl", {"subject": "nobody@example.com", "actor": "zed"})
    first, second = AuditEvent.objects.filter(action="audit.exported").order_by("seq")
    assert "nobody" not in json.dumps(first.details) and "zed" not in json.dumps(first.details)
    assert first.details["filtered"] is True and len(first.details["filters_hmac"]) == 32
    assert first.details["filters_hmac"] == second.details["filters_hmac"]  # the same filter, the same hash
    client.get("/t/acme/audit/export.csv")
    assert AuditEvent.objects.filter(action="audit.exported").order_by("-seq")[0].details == {"format": "csv",
                                                                                             "filtered": False}


def test_audit_filters_and_tenant_scope(staff, subjects):
    alice, mallory = subjects
    audit_record(actor="zed", action="memory.forget", subject=alice, target_id="m-zed",
                 details={"reason": "r"})
    audit_record(actor="zed", action="subject.exported", subject=alice, target_id="x-zed")
    audit_record(actor="zed", action="memory.forget", subject=mallory, target_id="m-globex")
    client = Client()
    client.force_login(staff["compliance"])

    def targets(**params) -> set[str]:
        lines = b"".join(client.get("/t/acme/audit/export.jsonl", params).streaming_content).decode().splitlines()
        return {record["target_id"] for record in map(json.loads, lines) if record.get("type") == "event"}

    assert targets(actor="zed") == {"m-zed", "x-zed"}  # never the other tenant's event
    assert targets(actor="zed", action="memory.") == {"m-zed"}
    assert "m-zed" in targets(subject="alice@example.com") and "m-globex" not in targets(subject="mallory@example.com")
    assert targets(actor="zed", since="2999-01-01") == set()
    assert targets(actor="zed", until="2000-01-01") == set()
    page = client.get("/t/acme/audit/", {"actor": "zed", "action": "memory.forget"}).content.decode()
    assert "m-zed" in page and "x-zed" not in page and "m-globex" not in page


# ---------------------------------------------------------------- consolidation panel

HX = {"HX-Request": "true"}


def test_consolidation_dry_run_shows_proposals_and_writes_nothing(staff, subjects):
    alice, _ = subjects
    episode_write(subject=alice, text="I live in Paris.", session_id="s1")
    client = Client()
    client.force_login(staff["support"])
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    assert 'id="consolidation-section"' in page and "No consolidation runs yet." in page
    assert ">Dry run</button>" in page and "Consolidate now" not in page  # support: dry run only
    response = client.post(f"/u/{alice.user_id}/consolidation/dry-run/", headers=HX)
    assert response.status_code == 200
    panel = response.content.decode()
    assert "Dry run: 1 proposed change " in panel and "Alice lives in Paris." in panel and "nothing was written" in panel
    run = ConsolidationRun.objects.get(subject=alice)
    assert (run.status, run.trigger, run.facts_created, run.episodes_read) == ("dry_run", "inspector", 1, 1)
    assert f'id="run-{run.pk}"' in panel
    # Nothing written: no fact, the episode still waits, and the run row holds no text.
    assert selectors.fact_list(subject=alice) == []
    assert len(consolidation_selectors.episodes_pending(subject=alice, limit=500)) == 1
    assert "Paris" not in json.dumps(run.details)
    assert AuditEvent.objects.filter(action="staff.viewed", subject_ref=str(alice.user_id),
                                     details__view="consolidation_dry_run").count() == 1


def test_consolidate_now_queues_a_run_the_panel_follows_it_and_facts_name_it(
        staff, subjects, monkeypatch, django_capture_on_commit_callbacks):
    alice, _ = subjects
    episode_write(subject=alice, text="I live in Paris.", session_id="s1")
    sent = []  # the broker is not under test (tests/consolidation/test_worker.py runs a real one)
    monkeypatch.setattr(consolidation.current_app, "send_task", lambda name, kwargs: sent.append((name, kwargs)))
    client = Client()
    client.force_login(staff["tenant_admin"])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/u/{alice.user_id}/consolidation/run/", headers=HX)
    assert response.status_code == 200
    run = ConsolidationRun.objects.get(subject=alice)
    assert (run.status, run.trigger) == ("queued", "inspector")
    assert sent == [("memory_app.tasks.consolidate_subject", {"subject_id": alice.pk, "run_id": run.pk})]
    queued = response.content.decode()
    assert f"Consolidation run #{run.pk} queued" in queued and 'hx-trigger="every 3s"' in queued
    assert AuditEvent.objects.filter(action="consolidation.requested", target_id=str(run.pk), actor="tenant_admin"
                                     ).count() == 1
    consolidate_subject.apply(kwargs=sent[0][1])  # what the worker does with it
    done = client.get(f"/u/{alice.user_id}/consolidation/", headers=HX).content.decode()
    assert 'hx-trigger="every 3s"' not in done  # polling ends with the run
    assert "succeeded" in done.lower() and "1 / 0 / 0" in done
    [fact] = selectors.fact_list(subject=alice)
    assert fact["text"] == "Alice lives in Paris." and fact["metadata"]["consolidation"]["run"] == run.pk
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    assert f'<a href="#run-{run.pk}">consolidation run #{run.pk}</a>' in page


def test_consolidation_forbidden_roles_get_403_and_compliance_reads_only(staff, subjects):
    alice, _ = subjects
    episode_write(subject=alice, text="I live in Paris.", session_id="s1")
    ConsolidationRun.objects.create(subject=alice, extractor="rules", status="succeeded", episodes_read=3,
                                    facts_created=2, prompt_tokens=120, completion_tokens=40, duration_ms=85)
    compliance, support = Client(), Client()
    compliance.force_login(staff["compliance"])
    support.force_login(staff["support"])
    for path in ("dry-run", "run"):
        assert compliance.post(f"/u/{alice.user_id}/consolidation/{path}/", headers=HX).status_code == 403
    assert support.post(f"/u/{alice.user_id}/consolidation/run/", headers=HX).status_code == 403
    assert compliance.get(f"/u/{alice.user_id}/consolidation/run/").status_code == 405
    assert ConsolidationRun.objects.filter(subject=alice).count() == 1  # nothing ran
    page = compliance.get(f"/u/{alice.user_id}/").content.decode()
    assert "Read-only for your role" in page and ">Dry run</button>" not in page and "Consolidate now" not in page
    assert "120 / 40" in page and "85 ms" in page


@pytest.mark.parametrize("url", [
    "/?q=al%00ice", "/t/acme/audit/?actor=sup%00port", "/t/acme/audit/?subject=a%00b",
    "/t/acme/keys/?q=a%00b", "/u/{alice}/recall/?q=heat%00er",
])
def test_a_nul_character_in_a_query_string_is_a_400_not_a_500(staff, subjects, url):
    """PostgreSQL refuses NUL in a query parameter; a search box must not turn that into a 500."""
    alice, _ = subjects
    client = Client()
    client.force_login(staff["superuser"])
    response = client.get(url.format(alice=alice.user_id))
    assert response.status_code == 400, response.content[:300]


def test_a_nul_character_in_a_form_is_a_400_and_creates_nothing(staff, subjects):
    from tenants.models import AgentToken

    client = Client()
    client.force_login(staff["superuser"])
    response = client.post("/t/acme/tokens/", {"name": "bot\x00", "scopes": ["memory:read"]})
    assert response.status_code == 400 and not AgentToken.objects.exists()


def test_recall_sandbox_says_which_fact_gave_an_episode_credit(staff, subjects):
    alice, _ = subjects
    said = episode_write(subject=alice, text="I finally did it, the papers came through this morning!")
    episode_write(subject=alice, text="The gallery sent me the wrong brochure again.")
    fact = fact_write(subject=alice, text="Alice's adoption application was approved.",
                      supporting_episode_ids=[said["id"]])
    question = "Was the adoption application approved?"
    client = Client()
    client.force_login(staff["support"])
    html = client.get(f"/u/{alice.user_id}/recall/", {"q": question}, headers={"HX-Request": "true"}).content.decode()
    ranks = {hit["id"]: n for n, hit in enumerate(memory_recall(subject=alice, query=question, k=10), start=1)}
    card = html.split(f'id="hit-{ranks[said["id"]]}"')[1].split("</li>")[0]
    assert "A fact distilled from it matched the question" in card and "fact_credit" in card
    assert f'href="#hit-{ranks[fact["id"]]}"' in card


def test_recall_sandbox_shows_validity_the_superseded_fact_behind_a_hit_and_recalls_as_of_a_day(staff, subjects):
    alice, _ = subjects
    said = episode_write(subject=alice, text="Our broadband is with Virgin Media.",
                         occurred_at=datetime(2025, 2, 1, tzinfo=UTC))
    old = fact_write(subject=alice, text="Alice's broadband provider is Virgin Media.",
                     supporting_episode_ids=[said["id"]], valid_from=datetime(2025, 2, 1, tzinfo=UTC))
    new = fact_write(subject=alice, text="Alice's broadband provider is BT.", supersedes=[old["id"]],
                     valid_from=datetime(2025, 9, 1, tzinfo=UTC))
    client = Client()
    client.force_login(staff["support"])
    question = {"q": "Which broadband provider does Alice have?"}
    html = client.get(f"/u/{alice.user_id}/recall/", question, headers={"HX-Request": "true"}).content.decode()
    ranks = {hit["id"]: n for n, hit in enumerate(memory_recall(subject=alice, query=question["q"], k=10), start=1)}
    assert ranks[new["id"]] < ranks[said["id"]]
    card = html.split(f'id="hit-{ranks[said["id"]]}"')[1].split("</li>")[0]
    assert "was superseded" in card and "Virgin Media" in card
    then = client.get(f"/u/{alice.user_id}/recall/", {**question, "as_of": "2025-05-01"},
                      headers={"HX-Request": "true"}).content.decode()
    assert "Alice&#x27;s broadband provider is Virgin Media." in then and "provider is BT" not in then
    page = client.get(f"/u/{alice.user_id}/chain/{old['id']}/").content.decode()
    assert "valid " in page and "→" in page


@pytest.mark.parametrize("params", [{"since": "2024-02-30"}, {"until": "2023-13-01"}, {"since": "yesterday"},
                                    {"since": "2024-W01-1"}])
def test_an_audit_filter_that_names_no_day_is_a_400_that_says_so(staff, subjects, params):
    client = Client()
    client.force_login(staff["compliance"])
    for path in ("/t/acme/audit/", "/t/acme/audit/export.jsonl"):
        response = client.get(path, params)
        assert response.status_code == 400, (path, response.content[:300])
        assert f"{next(iter(params))} is not a day written YYYY-MM-DD" in response.content.decode()


def test_audit_filters_at_the_calendars_edges_are_read(staff, subjects):
    client = Client()
    client.force_login(staff["compliance"])
    response = client.get("/t/acme/audit/", {"since": "0001-01-01", "until": "9999-12-31"})
    assert response.status_code == 200, response.content[:300]


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "not a time",
                                   "2024-02-30T10:00:00Z"])
def test_a_live_feed_cursor_outside_the_calendar_is_a_400_that_says_so(staff, subjects, since):
    alice, _ = subjects
    client = Client()
    client.force_login(staff["support"])
    response = client.get(f"/u/{alice.user_id}/episodes/live/", {"since": since})
    assert response.status_code == 400, response.content[:300]
    assert "since" in response.content.decode()


# ---------------------------------------------------------------- a small fuzz of the pages and their partials

from urllib.parse import quote_from_bytes  # noqa: E402

from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st  # noqa: E402

from tests.strategies import (day_texts, long_numbers, moment_texts, moments, query_string,  # noqa: E402
                              query_string_pairs, texts)

# Each page and partial with the query parameters it reads.
_AUDIT = ("actor", "action", "subject", "since", "until", "page", "access")
_PAGES = {"/": ("q", "page", "tenant"), "/u/{alice}/": ("superseded",), "/u/{alice}/episodes/live/": ("since", "pv"),
          "/u/{alice}/episodes/more/": ("cursor",),
          "/u/{alice}/recall/": ("q", "superseded", "as_of", "k", "types", "timezone", "explain"),
          "/u/{alice}/consolidation/": ("page",), "/u/{alice}/chain/{memory}/": ("superseded",),
          "/u/{alice}/forget/{memory}/": (), "/u/{alice}/erase/": (),
          "/t/acme/keys/": ("q", "page"), "/t/acme/usage/": ("days",), "/t/acme/audit/": _AUDIT,
          "/t/acme/audit/export.jsonl": _AUDIT, "/t/acme/audit/export.csv": _AUDIT, "/t/acme/audit/verify/": (),
          "/t/acme/audit/tokens/": ("token", "page"), "/t/acme/audit/public-keys.json": ()}
# Query values as bytes a browser or a script may put in a URL: any text (lone surrogates as the
# invalid UTF-8 they encode to), long numbers, moments and days with any numbers in their places.
_values = st.one_of(day_texts, moment_texts, texts, long_numbers, moments.map(lambda m: m.isoformat()), st.just("1"))
_requests = st.sampled_from(sorted(_PAGES)).flatmap(lambda page: st.tuples(
    st.just(page), st.dictionaries(st.sampled_from(_PAGES[page] or ("q",)), _values, max_size=4)
    | st.dictionaries(texts, texts, max_size=2),
    st.booleans(), st.sampled_from(["1234abcd", "x" * 300, "%00", "..", "ab/cd"])))


@hypothesis_settings(max_examples=int(os.environ.get("ENGRAM_INSPECTOR_FUZZ_EXAMPLES", "120")),
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(request=_requests, role=st.sampled_from(["superuser", "support", "compliance"]))
def test_the_pages_and_their_partials_answer_whatever_the_query_says(staff, subjects, request, role):
    alice, _ = subjects
    page, params, htmx, memory = request
    path = page.format(alice=alice.user_id, memory=quote_from_bytes(memory.encode()))
    _answers_below_500(staff[role], "get", path, htmx=htmx, sent=params, QUERY_STRING=query_string(params))


def _answers_below_500(user, method: str, path: str, *, htmx: bool, sent, **request) -> None:
    """``user``'s ``method`` on ``path`` (an HTMX request when ``htmx``) answers without a server
    error; each answer is recorded for the fuzz summary."""
    from tests.fuzzing import record

    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = getattr(client, method)(path, **request, **({"HTTP_HX_REQUEST": "true"} if htmx else {}))
    record("fuzz", "inspector", cases=1, server_errors=int(response.status_code >= 500))
    assert response.status_code < 500, (path, sent, response.content[:300])


# Each form the pages post, with the fields it reads (the confirmation of an erase never names alice:
# the fuzz must not erase her under the other examples).
_FORMS = {"/u/{alice}/forget/{memory}/": ("reason", "note", "keep_derived"), "/u/{alice}/erase/": ("confirm",),
          "/u/{alice}/consolidation/dry-run/": ("extractor",), "/t/acme/tokens/": ("name", "scopes"),
          "/t/acme/tokens/{token}/revoke/": (), "/t/acme/keys/{alice}/revoke/": (),
          "/t/acme/keys/{alice}/rotate/": ()}
_form_values = st.one_of(texts, long_numbers, st.sampled_from(["user_request", "other", "1", "memory:read", "rules"]))
_posts = st.sampled_from(sorted(_FORMS)).flatmap(lambda form: st.tuples(
    st.just(form), st.lists(st.tuples(st.sampled_from(_FORMS[form] or ("q",)) | texts, _form_values), max_size=5),
    st.booleans(), st.sampled_from(["1234abcd", "x" * 300, "%01", "ab%2Fcd"]), st.sampled_from(["1", "99999999999"])))


@hypothesis_settings(max_examples=int(os.environ.get("ENGRAM_INSPECTOR_FUZZ_EXAMPLES", "120")) // 3,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(post=_posts, role=st.sampled_from(["superuser", "support", "tenant_admin"]))
def test_the_forms_answer_whatever_they_post(staff, subjects, post, role):
    alice, _ = subjects
    form, fields, htmx, memory, token = post
    fields = [(k, v) for k, v in fields if not (k == "confirm" and v.strip() == alice.external_id)]
    path = form.format(alice=alice.user_id, memory=memory, token=token)
    _answers_below_500(staff[role], "post", path, htmx=htmx, sent=fields, data=query_string_pairs(fields),
                       content_type="application/x-www-form-urlencoded")


def test_subject_page_shows_failed_writes_without_their_content(staff, subjects):
    from memory_app.models import OutboxEntry

    alice, _ = subjects
    failed = OutboxEntry.objects.create(
        tenant=alice.tenant, external_id=alice.external_id, operation="import", status="failed", attempts=1,
        payload={"episodes": [{"text": "a line only the payload holds"}]}, actor="t", reason="background",
        last_error={"code": "internal_error", "message": "the write failed (OverflowError)", "details": {}})
    OutboxEntry.objects.create(tenant=alice.tenant, external_id=alice.external_id, operation="episode",
                               payload={"text": "queued"}, actor="t", reason="outage", memory_id="alice-q-0001")
    client = Client()
    client.force_login(staff["support"])
    page = client.get(f"/u/{alice.user_id}/").content.decode()
    assert 'id="writes-section"' in page and str(failed.uid) in page and "internal_error" in page
    assert "1 write waiting in the outbox; 1 ended failed" in page
    assert "a line only the payload holds" not in page
