"""Extraction through any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp
server, hosted APIs), over httpx.

One call per run: the new episodes, their sessions' earlier turns, and the end-user's current facts
and playbooks with their counters in; new facts (with the ids of the facts they supersede),
playbook outcomes (of a given playbook, with refined steps) and new playbooks out. The model
answers one JSON object, validated against a schema (pydantic); episode, fact and playbook ids it
cites must be among the ones it was given. Timeouts, and 429/5xx answers, are retried a bounded number
of times with exponential backoff (honouring Retry-After); a malformed or empty answer is asked
once more. Anything still wrong raises ExtractorFailed: the run fails and nothing is written.
Token use is summed over every attempt from the answers' ``usage``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Literal

import httpx
from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .base import Episode, Extraction, ExtractorFailed, FactCandidate, Known, PlaybookCandidate

log = logging.getLogger(__name__)

PROMPT_VERSION = "consolidation-llm-3"
SYSTEM_PROMPT = """You distil a user's conversation turns into long-term memory. Prompt version: {version}.

You get JSON: "episodes" (new turns, each with an id), "context" (earlier turns of the same sessions, for
understanding only: never cite them alone), "facts" (the user's current facts, each with an id and maybe a slot)
and "playbooks" (the user's current playbooks: id, trigger, steps, success_count, failure_count).
Answer with ONE JSON object and nothing else:
{{"facts": [{{"text": str, "slot": str|null, "value": str|null, "change": "natural"|"harsh"|null,
             "supersedes": [fact id, ...], "supporting_episode_ids": [str, ...], "confidence": number 0..1}}],
  "playbooks": [{{"playbook_id": playbook id|null, "trigger": str, "steps": str,
                 "outcome": "success"|"failure"|null, "outcome_episode_id": str|null,
                 "refined_steps": str|null, "supporting_episode_ids": [str, ...]}}]}}
Rules:
- Only durable facts stated by the speakers (attributes, preferences, relationships, work, home, plans and events
  with their dates). A turn "Name: text" is said by Name: write facts about Name in the third person; a turn
  without a name is said by the end-user: name them as "user" gives. Use the speaker's own words; never add what the cited episodes do not say.
  Write dates out ("yesterday" in a turn of 8 May 2023 is 7 May 2023).
- "slot" names a single-valued attribute in snake_case (home_city, employer, favourite_color) so a later value
  can replace an earlier one; null when the fact is not single-valued.
- "supersedes": the ids of given facts this new fact replaces (a move, a new job, a corrected value); [] otherwise.
  "change": "natural" when the world changed (moved, new job, no longer), "harsh" when the speaker corrects what
  was said ("actually, it's ...", "sorry, I meant ..."), else null. Do not repeat a given fact unchanged.
- Playbooks: a problem, the steps taken, and whether they reported that it worked (success) or is still broken
  (failure). When it is an outcome of a given playbook, set "playbook_id" to its id, and "refined_steps" to the
  steps that actually worked if they differ from its steps (else null).
- Nothing to extract: {{"facts": [], "playbooks": []}}."""


class _Fact(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=1, max_length=2000)
    slot: str | None = Field(default=None, max_length=200)
    value: str | None = Field(default=None, max_length=500)
    change: Literal["natural", "harsh"] | None = None
    supersedes: list[str] = Field(default_factory=list, max_length=100)
    # Empty or absent is not a schema error: such a fact is passed on unsupported, and the
    # service drops it as ungrounded (counted), keeping the rest of the answer.
    supporting_episode_ids: list[str] = Field(default_factory=list, max_length=100)
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)


class _Playbook(BaseModel):
    model_config = ConfigDict(extra="ignore")
    playbook_id: str | None = None
    trigger: str = Field(min_length=1, max_length=2000)
    steps: str = Field(min_length=1, max_length=4000)
    outcome: Literal["success", "failure"] | None = None
    outcome_episode_id: str | None = None
    refined_steps: str | None = Field(default=None, max_length=4000)
    supporting_episode_ids: list[str] = Field(default_factory=list, max_length=100)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[_Fact] = Field(default_factory=list, max_length=500)
    playbooks: list[_Playbook] = Field(default_factory=list, max_length=100)


class _Retryable(Exception):
    def __init__(self, message: str, *, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


@dataclass(frozen=True)
class LlmOptions:
    """The endpoint and its patience (ENGRAM_LLM_*; config/settings/base.py explains each), as read at an entry."""

    url: str
    model: str
    api_key: str
    timeout: float
    max_retries: int
    backoff: float  # the first wait before a retry, doubled each time
    max_backoff: float  # the longest wait

    @classmethod
    def from_settings(cls) -> LlmOptions:
        return cls(url=settings.ENGRAM_LLM_URL, model=settings.ENGRAM_LLM_MODEL, api_key=settings.ENGRAM_LLM_API_KEY,
                   timeout=settings.ENGRAM_LLM_TIMEOUT, max_retries=settings.ENGRAM_LLM_MAX_RETRIES,
                   backoff=settings.ENGRAM_LLM_BACKOFF_SECONDS, max_backoff=settings.ENGRAM_LLM_MAX_BACKOFF_SECONDS)


class LlmExtractor:
    name = "llm"
    version = PROMPT_VERSION
    uses_known = True

    def __init__(self, options: LlmOptions):
        self.url = options.url.rstrip("/")
        self.model = options.model
        self.api_key = options.api_key
        self.timeout = options.timeout
        self.max_retries = options.max_retries
        self.backoff = options.backoff
        self.max_backoff = options.max_backoff

    def extract(self, *, episodes: list[Episode], context: list[Episode], known: Known | None = None,
                user_name: str = "the user") -> Extraction:
        out = Extraction()
        if not episodes:
            return out
        known = known or Known()
        given = {e.id for e in episodes}
        known_facts = {f.id for f in known.facts}
        known_playbooks = {p.id for p in known.playbooks}
        payload = {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT.format(version=PROMPT_VERSION)},
                {"role": "user", "content": json.dumps({
                    "user": user_name,
                    "episodes": [_episode_json(e) for e in episodes if e.role == "user"],
                    "context": [_episode_json(e) for e in context if e.role == "user"],
                    "facts": [{"id": f.id, "text": f.text, "slot": f.slot} for f in known.facts],
                    "playbooks": [{"id": p.id, "trigger": p.trigger, "steps": p.refined_steps or p.steps,
                                   "success_count": p.success_count, "failure_count": p.failure_count}
                                  for p in known.playbooks]})},
            ],
        }
        answer = self._ask(payload, out)
        for fact in answer.facts:
            # Ids it was not given (context turns, made-up ids) support nothing; a fact left with
            # none is still proposed, so the run's dropped count shows it.
            ids = tuple(dict.fromkeys(i for i in fact.supporting_episode_ids if i in given))
            # Ids it was not shown are dropped: a supersession only of what the end-user has.
            supersedes = tuple(dict.fromkeys(i for i in fact.supersedes if i in known_facts))
            out.facts.append(FactCandidate(text=fact.text.strip(), episode_ids=ids, slot=fact.slot or None,
                                           value=fact.value, change=fact.change, confidence=fact.confidence,
                                           supersedes=supersedes))
        for playbook in answer.playbooks:
            ids = tuple(dict.fromkeys(i for i in playbook.supporting_episode_ids if i in given))
            outcome_id = playbook.outcome_episode_id if playbook.outcome_episode_id in given else None
            outcome = None if playbook.outcome is None or outcome_id is None else playbook.outcome == "success"
            target = playbook.playbook_id if playbook.playbook_id in known_playbooks else None
            refined = (playbook.refined_steps or "").strip() or None
            out.playbooks.append(PlaybookCandidate(trigger=playbook.trigger.strip(), steps=playbook.steps.strip(),
                                                   episode_ids=ids, outcome=outcome, outcome_episode_id=outcome_id,
                                                   playbook_id=target, refined_steps=refined if target else None))
        return out

    def _ask(self, payload: dict, out: Extraction) -> _Answer:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        malformed_left = 1
        attempt = 0
        with httpx.Client(timeout=self.timeout, headers=headers) as client:
            while True:
                attempt += 1
                try:
                    content = self._post(client, payload, out)
                    return _parse(content)
                except _Retryable as exc:
                    if attempt > self.max_retries:
                        raise ExtractorFailed(f"the LLM endpoint kept failing: {exc}",
                                              details={"attempts": attempt}, code="llm_unavailable") from None
                    delay = exc.wait if exc.wait is not None else self.backoff * 2 ** (attempt - 1)
                    log.warning("LLM extraction attempt %d failed (%s); retrying in %.2fs", attempt, exc, delay)
                    time.sleep(min(delay, self.max_backoff))
                except ExtractorFailed as exc:
                    if exc.code != "llm_bad_answer" or malformed_left == 0:
                        raise
                    malformed_left -= 1
                    log.warning("LLM answer unusable (%s); asking once more", exc.message)

    def _post(self, client: httpx.Client, payload: dict, out: Extraction) -> str:
        try:
            response = client.post(f"{self.url}/chat/completions", json=payload)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timeout ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"transport error ({type(exc).__name__})") from None
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code}", wait=_retry_after(response))
        if response.status_code >= 400:
            raise ExtractorFailed(f"the LLM endpoint refused the request (HTTP {response.status_code})",
                                  details={"status": response.status_code}, code="llm_refused")
        try:
            body = response.json()
        except ValueError:
            raise ExtractorFailed("the LLM endpoint answered something that is not JSON",
                                  code="llm_bad_answer") from None
        usage = (body.get("usage") if isinstance(body, dict) else None) or {}
        out.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        out.completion_tokens += int(usage.get("completion_tokens") or 0)
        try:
            choice = body["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ExtractorFailed("the LLM answer has no message content", code="llm_bad_answer") from None
        if isinstance(choice["message"], dict) and choice["message"].get("refusal"):
            raise ExtractorFailed("the model refused to answer", code="llm_bad_answer")
        if isinstance(choice, dict) and choice.get("finish_reason") == "length":
            # Cut off at the token limit: whatever parses of it is a part, never the whole answer.
            raise ExtractorFailed("the LLM answer was cut off at its token limit", code="llm_bad_answer")
        if not isinstance(content, str) or not content.strip():
            raise ExtractorFailed("the LLM answer is empty", code="llm_bad_answer")
        return content


def _parse(content: str) -> _Answer:
    text = content.strip()
    if text.startswith("```"):  # some servers wrap JSON mode answers in a fence
        text = text.strip("`").removeprefix("json").strip()
    try:
        return _Answer.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ExtractorFailed(f"the LLM answer does not match the schema: {first['msg']} at "
                              f"{'.'.join(map(str, first['loc'])) or 'top level'}", code="llm_bad_answer") from None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _episode_json(e: Episode) -> dict:
    return {"id": e.id, "text": e.text, "occurred_at": e.occurred_at, "session_id": e.session_id}
