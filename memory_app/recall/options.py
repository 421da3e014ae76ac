"""One recall's options as one frozen value, built once at the edge of a request or task: the
ranking (``RankingConfig``, defaults in code) and the limits an operator sets in settings. The
stages take it as an argument and read no setting themselves."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory_app.recall.ranking import RankingConfig

# The ranking settings of earlier releases, now RankingConfig's fields: a system check warns of an
# environment that still sets one (memory_app.checks), since nothing reads it any more.
RETIRED_SETTINGS = {
    "ENGRAM_QUERY_STOPWORDS": "stopwords", "ENGRAM_FUSION": "fusion", "ENGRAM_LINEAR_MAX_WORDS": "max_words",
    "ENGRAM_RECALL_ENTITY_LEGS": "entity_legs", "ENGRAM_SYNONYM_WEIGHT": "synonym_weight",
    "ENGRAM_OWN_NAME_WEIGHT": "own_name_weight", "ENGRAM_TEMPORAL_BOOST": "temporal_boost",
    "ENGRAM_TIME_ANSWER_BOOST": "time_answer_boost", "ENGRAM_INTENT_BOOST": "intent_boost",
    "ENGRAM_RECALL_BM25": "bm25", "ENGRAM_RECALL_DENSE": "dense", "ENGRAM_RECALL_PASSAGES": "passages",
    "ENGRAM_CONTEXT_BOOST": "context_boost", "ENGRAM_TRIGGER_BOOST": "trigger_boost",
    "ENGRAM_CONCEPT_BOOST": "concept_boost", "ENGRAM_RRF_ENTITY_WEIGHT": "entity_weight",
    "ENGRAM_RECALL_ENTITY_MIN_MENTIONS": "entity_min_mentions", "ENGRAM_RECALL_ENTITY_DENSE": "entity_dense",
    "ENGRAM_RECALL_ENTITY_TOPIC_VECTOR": "entity_topic_vector", "ENGRAM_LINEAR_LEXICAL_NORM": "lexical_norm",
    "ENGRAM_LINEAR_BM25_WEIGHT": "linear_bm25_weight", "ENGRAM_LINEAR_DENSE_WEIGHT": "linear_dense_weight",
    "ENGRAM_RRF_BM25_WEIGHT": "rrf_bm25_weight", "ENGRAM_RRF_DENSE_WEIGHT": "rrf_dense_weight",
    "ENGRAM_RRF_RANK_CONSTANT": "rank_constant", "ENGRAM_DECAY_OFFSET_DAYS": "decay_offset_days",
    "ENGRAM_DECAY_SCALE_DAYS": "decay_scale_days", "ENGRAM_DECAY_DECAY": "decay_decay",
    "ENGRAM_TEMPORAL_GRACE_DAYS": "temporal_grace_days", "ENGRAM_RECALL_EVENT_DATES": "event_dates",
    "ENGRAM_SESSION_COVERAGE": "session_coverage", "ENGRAM_FACT_CREDIT": "fact_credit",
    "ENGRAM_USE_COUNT_WEIGHT": "use_count_weight", "ENGRAM_CATALOG_PRIOR": "catalog_prior",
    "ENGRAM_OUTCOME_WEIGHT": "outcome_weight", "ENGRAM_REPLY_CREDIT": "reply_credit",
    "ENGRAM_RECALL_COLLAPSE_COPIES": "collapse_copies",
}


def _setting(name: str) -> Any:
    """A field read from the Django setting ``name``."""
    return field(metadata={"setting": name})


def ranking_config() -> RankingConfig:
    """The deployment's ranking: the defaults with ``ENGRAM_RANKING``'s changes; ImproperlyConfigured
    for a name or value it cannot take. Called at the edge of a request or task."""
    try:
        return RankingConfig().changed(settings.ENGRAM_RANKING)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ImproperlyConfigured(f"ENGRAM_RANKING: {exc}") from exc


@dataclass(frozen=True, kw_only=True)
class RecallOptions(RankingConfig):
    """A recall's ranking and the operator's settings it needs (config/settings/base.py explains each)."""

    max_query_chars: int = _setting("ENGRAM_MAX_QUERY_CHARS")
    max_k: int = _setting("ENGRAM_RECALL_MAX_K")
    concepts: bool = _setting("ENGRAM_CONCEPTS")
    wordnet_dir: str = _setting("ENGRAM_WORDNET_DIR")
    candidates: int = _setting("ENGRAM_RECALL_CANDIDATES")
    num_candidates: int = _setting("ENGRAM_RECALL_NUM_CANDIDATES")
    entity_count_seconds: int = _setting("ENGRAM_RECALL_ENTITY_COUNT_SECONDS")
    rerank_pool: int = _setting("ENGRAM_RERANK_POOL")
    passages_max: int = _setting("ENGRAM_PASSAGES_MAX")

    @classmethod
    def from_settings(cls, ranking: RankingConfig | None = None) -> RecallOptions:
        """``ranking`` (default: ``ranking_config()``) with the operator's settings of today."""
        ranking = ranking or ranking_config()
        knobs = {f.name: getattr(ranking, f.name) for f in fields(RankingConfig)}
        operator = {f.name: getattr(settings, f.metadata["setting"]) for f in fields(cls) if "setting" in f.metadata}
        return cls(**knobs, **operator)
