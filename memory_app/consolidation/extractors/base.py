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
    correction), ``fulfilled`` (a plan that came true: ``changes.plan_target``) or None. ``replaces`` is the old value when the episode names it ("switched
    from X to Y").
    """

    text: str
    episode_ids: tuple[str, ...]
    slot: str | None = None
    value: str | None = None
    change: str | None = None
    replaces: str | None = None
    confidence: float = 0.8
    supersedes: tuple[str, ...] = ()  # ids of known facts the extractor itself says this replaces


@dataclass(frozen=True)
class PlaybookCandidate:
    """A problem and the steps the user took; ``outcome`` True (it worked), False (still
    broken) or None (no outcome reported yet). ``outcome_episode_id`` reported the outcome.
    ``playbook_id``: a known playbook the extractor says this is an outcome of (its
    ``refined_steps``: the steps that actually worked, when they differ from the stored ones)."""

    trigger: str
    steps: str
    episode_ids: tuple[str, ...]
    outcome: bool | None = None
    outcome_episode_id: str | None = None
    playbook_id: str | None = None
    refined_steps: str | None = None


@dataclass(frozen=True)
class KnownFact:
    id: str
    text: str
    slot: str | None = None


@dataclass(frozen=True)
class KnownPlaybook:
    id: str
    trigger: str
    steps: str
    success_count: int = 0
    failure_count: int = 0
    refined_steps: str | None = None


@dataclass(frozen=True)
class Known:
    """The end-user's current facts and playbooks (with their counters), for an extractor that
    decides supersessions and outcomes itself (``uses_known``)."""

    facts: tuple[KnownFact, ...] = ()
    playbooks: tuple[KnownPlaybook, ...] = ()


@dataclass
class Extraction:
    facts: list[FactCandidate] = field(default_factory=list)
    playbooks: list[PlaybookCandidate] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Extractor(Protocol):
    name: str
    version: str
    uses_known: bool  # True: pass ``known`` (the service reads it only for such extractors)

    def extract(self, *, episodes: list[Episode], context: list[Episode], known: Known | None = None,
                user_name: str = "the user") -> Extraction:
        """Candidates from ``episodes`` (not yet consolidated, oldest first). ``context`` holds
        earlier, already consolidated episodes of the same sessions: usable to understand the
        new ones (a "that worked" whose problem came earlier), never a source of new facts.
        ``known``: the end-user's current facts and playbooks, for ``uses_known`` extractors.
        ``user_name``: who says a turn without a speaker label (the end-user's display name, else
        "the user"); facts name them so."""
        ...
