"""Extractors by name: ``rules`` (offline, deterministic, the default) and ``llm`` (any
OpenAI-compatible chat-completions endpoint)."""

from __future__ import annotations

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
from .llm import LlmExtractor
from .rules import RulesExtractor

EXTRACTORS = ("rules", "llm")


def get_extractor(name: str | None = None) -> Extractor:
    name = name or settings.ENGRAM_CONSOLIDATION_EXTRACTOR
    if name == "rules":
        return RulesExtractor()
    if name == "llm":
        if not settings.ENGRAM_LLM_URL:
            raise ValidationFailed("the llm extractor needs ENGRAM_LLM_URL (an OpenAI-compatible endpoint)",
                                   details={"field": "extractor"}, code="extractor_unavailable")
        return LlmExtractor()
    raise ValidationFailed(f"extractor must be one of {', '.join(EXTRACTORS)}", details={"field": "extractor"},
                           code="invalid_extractor")


__all__ = ["EXTRACTORS", "Episode", "Extraction", "Extractor", "ExtractorFailed", "FactCandidate", "Known",
           "KnownFact", "KnownPlaybook", "PlaybookCandidate", "get_extractor"]
