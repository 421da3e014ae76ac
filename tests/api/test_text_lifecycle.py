"""Text the language library meets everywhere, through the whole life of a memory: any text a
client sends as a turn, an explicit context or an imported episode is either refused (4xx, with
nothing of it stored anywhere) or stored, and then forgotten without residue; an erase leaves
none either.

Each example's text carries a canary word (engram_eval.canary) between two pieces of hostile
text: every unicode category, right-to-left marks and scripts, combining marks, zero-width
characters, lone surrogates, very long tokens, dates named far in the past or the future. The
scan is the canary scan's: every Elasticsearch index the admin credential reads and every column
of every database table.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import uuid
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, event, example, given, settings, strategies as st

from engram_eval.canary import _database, _elasticsearch
from tests.strategies import hostile_texts, moment_texts

pytestmark = pytest.mark.usefixtures("memory")

# The moments a turn may say it happened at, the calendar's edges among them.
_occurred = st.one_of(st.none(), moment_texts, st.sampled_from(["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]))


def _canary() -> str:
    # Not Python's random: Hypothesis seeds it alike for every example.
    return "zq" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(12))


def _copies(canary: str, prefix: str) -> list:
    return [*_elasticsearch({canary: "text"}, prefix), *_database({canary: "text"})]


def _accepted(response, where: str) -> bool:
    assert response.status_code < 500, (where, response.status_code, response.content[:500])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"code", "message", "details"} and error["code"] not in ("error", "internal_error"), (
            where, error)
    return response.status_code < 300


@settings(max_examples=int(os.environ.get("ENGRAM_TEXT_LIFECYCLE_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@example(before="\u202eI moved to Lyon on 31 December 9999", after="e\u0301\u200b\ud800",
         occurred_at="9999-12-31T23:59:59Z", erase=False)
@given(before=hostile_texts, after=hostile_texts, occurred_at=_occurred, erase=st.booleans())
def test_any_text_is_refused_with_nothing_stored_or_stored_and_then_forgotten_without_residue(
        api, memory, before, after, occurred_at, erase):
    from django.core.cache import cache

    cache.clear()  # the rate limits: every example reaches its views
    canary = _canary()
    text = f"{before} {canary} {after}"
    tag = uuid.uuid4().hex[:12]  # the end-user's id and the keys: nothing of the text
    subject = f"lifecycle-{tag}"
    base = f"/api/v1/subjects/{quote(subject)}"

    def post(path: str, body: dict, key: str):
        # ASCII JSON: a lone surrogate goes as its escape, as a client's JSON library writes it.
        return api.post(f"{base}/{path}", json.dumps(body), content_type="application/json",
                        HTTP_IDEMPOTENCY_KEY=f"{key}-{tag}")

    # 1. The turn, with the calendar-edge moment it says it happened at.
    turn = post("turns", {"text": text, "session_id": "s1", **({"occurred_at": occurred_at} if occurred_at else {})},
                "turn")
    event(f"turn answered {turn.status_code}" + (f" {turn.json()['error']['code']} {turn.json()['error']['details']}"[:160] if turn.status_code >= 400 else ""))
    if not _accepted(turn, "turn"):
        assert _copies(canary, memory) == [], "a refused turn left copies"
        return
    ids = [turn.json()["id"]]
    # 2. A later turn quoting it as its explicit context (kept: only the quote must go).
    reply = post("turns", {"text": "ok, noted", "session_id": "s1", "context": text}, "reply")
    assert _accepted(reply, "reply with the text as context"), reply.content[:500]
    # 3. The same text imported, with the moment it names.
    imported = post("episodes:import", {"episodes": [{"text": text, "session_id": "s2",
                                                      "occurred_at": occurred_at or "2025-01-01T00:00:00Z"}]},
                    "import")
    assert _accepted(imported, "import"), imported.content[:500]
    ids += imported.json()["ids"]
    assert _copies(canary, memory), "the scan finds no copy of what was stored: it would prove nothing"

    if erase:
        assert _accepted(api.delete(base), "erase")
    else:
        for memory_id in ids:
            forgotten = api.delete(f"{base}/memories/{memory_id}?reason=user_request",
                                   HTTP_IDEMPOTENCY_KEY=f"forget-{memory_id}")
            assert _accepted(forgotten, "forget"), forgotten.content[:500]
    assert _copies(canary, memory) == [], (text, occurred_at, erase)
