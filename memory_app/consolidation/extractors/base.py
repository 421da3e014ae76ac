"""The extractor interface: episodes in, candidate facts and playbook updates out.

Extractors only propose. Grounding, deduplication, supersession and every write happen in the
consolidation service, the same for every extractor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from engram_core.errors import EngramError


class ExtractorFailed(EngramError):
    """The extractor could not produce a usable answer; the run fails and nothing is written."""

    code, status = "extractor_failed", 502


@dataclass(frozen=True)
class Episode:
    id: str
    text: str
    occurred_at: str
    session_id: str | None = None
    role: str = "user"


@dataclass(frozen=True)
class FactCandidate:
    """A fact an extractor read in one or more episodes.

    ``slot`` names the single-valued thing the fact is about (``home_city``, ``likes:jazz``):
    a later candidate for the same slot with another value supersedes it. None: the fact is
    not single-valued and never supersedes anything by slot. ``change`` is the cue that the
    candidate replaces an earlier value: ``natural`` (the world changed), ``harsh`` (an explicit
    correction) or None. ``replaces`` is the old value when the episode names it ("switched
    from X to Y").
    """

    text: str
    episode_ids: tuple[str, ...]
    slot: str | None = None
    value: str | None = None
    change: str | None = None
    replaces: str | None = None
    confidence: float = 0.8


@dataclass(frozen=True)
class PlaybookCandidate:
    """A problem and the steps the user took; ``outcome`` True (it worked), False (still
    broken) or None (no outcome reported yet). ``outcome_episode_id`` reported the outcome."""

    trigger: str
    steps: str
    episode_ids: tuple[str, ...]
    outcome: bool | None = None
    outcome_episode_id: str | None = None


@dataclass
class Extraction:
    facts: list[FactCandidate] = field(default_factory=list)
    playbooks: list[PlaybookCandidate] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Extractor(Protocol):
    name: str
    version: str

    def extract(self, *, episodes: list[Episode], context: list[Episode]) -> Extraction:
        """Candidates from ``episodes`` (not yet consolidated, oldest first). ``context`` holds
        earlier, already consolidated episodes of the same sessions: usable to understand the
        new ones (a "that worked" whose problem came earlier), never a source of new facts."""
        ...
