"""Extractors by name: ``rules`` (offline, deterministic, the default) and ``llm`` (any
OpenAI-compatible chat-completions endpoint)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from engram_core.errors import ValidationFailed

from .base import (
    Episode,
    Extraction,
    Extractor,
    ExtractorFailed,
    FactCandidate,
    Known,
    KnownFact,
    KnownPlaybook,
    PlaybookCandidate,
)
from .llm import LlmExtractor, LlmOptions
from .rules import RulesExtractor

EXTRACTORS = ("rules", "llm")


@dataclass(frozen=True)
class ExtractorOptions:
    """Which extractor a run takes when none is named (ENGRAM_CONSOLIDATION_EXTRACTOR) and the LLM's
    endpoint, as read at an entry."""

    default: str
    llm: LlmOptions

    @classmethod
    def from_settings(cls) -> ExtractorOptions:
        return cls(default=settings.ENGRAM_CONSOLIDATION_EXTRACTOR, llm=LlmOptions.from_settings())


def get_extractor(name: str | None = None, *, options: ExtractorOptions) -> Extractor:
    """The extractor ``name`` (default: ``options.default``); ValidationFailed for an unknown one or
    an LLM without an endpoint."""
    name = name or options.default
    if name == "rules":
        return RulesExtractor()
    if name == "llm":
        if not options.llm.url:
            raise ValidationFailed("the llm extractor needs ENGRAM_LLM_URL (an OpenAI-compatible endpoint)",
                                   details={"field": "extractor"}, code="extractor_unavailable")
        return LlmExtractor(options.llm)
    raise ValidationFailed(f"extractor must be one of {', '.join(EXTRACTORS)}", details={"field": "extractor"},
                           code="invalid_extractor")


__all__ = ["EXTRACTORS", "Episode", "Extraction", "Extractor", "ExtractorFailed", "ExtractorOptions", "FactCandidate",
           "Known", "KnownFact", "KnownPlaybook", "LlmOptions", "PlaybookCandidate", "get_extractor"]
