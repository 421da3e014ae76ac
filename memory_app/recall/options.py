"""The recall's settings as one frozen value, read from Django's settings once per recall at the
edge; the stages take it as an argument and read no setting themselves."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

FUSIONS = ("linear", "rrf")
LEXICAL_NORMS = ("coverage", "minmax")


def _setting(name: str) -> Any:
    """A field read from the Django setting ``name``."""
    return field(metadata={"setting": name})


@dataclass(frozen=True)
class RecallOptions:
    """What each ENGRAM_* recall setting says (config/settings/base.py explains each)."""

    # reading the question
    max_query_chars: int = _setting("ENGRAM_MAX_QUERY_CHARS")
    stopwords: bool = _setting("ENGRAM_QUERY_STOPWORDS")
    fusion: str = _setting("ENGRAM_FUSION")
    max_words: int = _setting("ENGRAM_LINEAR_MAX_WORDS")
    entity_legs: int = _setting("ENGRAM_RECALL_ENTITY_LEGS")
    concepts: bool = _setting("ENGRAM_CONCEPTS")
    wordnet_dir: str = _setting("ENGRAM_WORDNET_DIR")
    synonym_weight: float = _setting("ENGRAM_SYNONYM_WEIGHT")
    own_name_weight: float = _setting("ENGRAM_OWN_NAME_WEIGHT")
    temporal_boost: float = _setting("ENGRAM_TEMPORAL_BOOST")
    time_answer_boost: float = _setting("ENGRAM_TIME_ANSWER_BOOST")
    intent_boost: float = _setting("ENGRAM_INTENT_BOOST")
    # searching
    bm25: bool = _setting("ENGRAM_RECALL_BM25")
    dense: bool = _setting("ENGRAM_RECALL_DENSE")
    passages: bool = _setting("ENGRAM_RECALL_PASSAGES")
    candidates: int = _setting("ENGRAM_RECALL_CANDIDATES")
    num_candidates: int = _setting("ENGRAM_RECALL_NUM_CANDIDATES")
    context_boost: float = _setting("ENGRAM_CONTEXT_BOOST")
    trigger_boost: float = _setting("ENGRAM_TRIGGER_BOOST")
    concept_boost: float = _setting("ENGRAM_CONCEPT_BOOST")
    entity_weight: float = _setting("ENGRAM_RRF_ENTITY_WEIGHT")
    entity_min_mentions: int = _setting("ENGRAM_RECALL_ENTITY_MIN_MENTIONS")
    entity_dense: bool = _setting("ENGRAM_RECALL_ENTITY_DENSE")
    entity_topic_vector: bool = _setting("ENGRAM_RECALL_ENTITY_TOPIC_VECTOR")
    entity_count_seconds: int = _setting("ENGRAM_RECALL_ENTITY_COUNT_SECONDS")
    # ranking
    lexical_norm: str = _setting("ENGRAM_LINEAR_LEXICAL_NORM")
    linear_bm25_weight: float = _setting("ENGRAM_LINEAR_BM25_WEIGHT")
    linear_dense_weight: float = _setting("ENGRAM_LINEAR_DENSE_WEIGHT")
    rrf_bm25_weight: float = _setting("ENGRAM_RRF_BM25_WEIGHT")
    rrf_dense_weight: float = _setting("ENGRAM_RRF_DENSE_WEIGHT")
    rank_constant: int = _setting("ENGRAM_RRF_RANK_CONSTANT")
    decay_offset_days: float = _setting("ENGRAM_DECAY_OFFSET_DAYS")
    decay_scale_days: float = _setting("ENGRAM_DECAY_SCALE_DAYS")
    decay_decay: float = _setting("ENGRAM_DECAY_DECAY")
    temporal_grace_days: int = _setting("ENGRAM_TEMPORAL_GRACE_DAYS")
    dated_weight: float = _setting("ENGRAM_RECALL_DATED_WEIGHT")
    event_dates: bool = _setting("ENGRAM_RECALL_EVENT_DATES")
    session_coverage: float = _setting("ENGRAM_SESSION_COVERAGE")
    fact_credit: float = _setting("ENGRAM_FACT_CREDIT")
    use_count_weight: float = _setting("ENGRAM_USE_COUNT_WEIGHT")
    catalog_prior: float = _setting("ENGRAM_CATALOG_PRIOR")
    outcome_weight: float = _setting("ENGRAM_OUTCOME_WEIGHT")
    reply_credit: float = _setting("ENGRAM_REPLY_CREDIT")
    neighbour_credit: float = _setting("ENGRAM_NEIGHBOUR_CREDIT")
    rerank_pool: int = _setting("ENGRAM_RERANK_POOL")
    collapse_copies: bool = _setting("ENGRAM_RECALL_COLLAPSE_COPIES")
    # explaining
    passages_max: int = _setting("ENGRAM_PASSAGES_MAX")

    @classmethod
    def from_settings(cls) -> RecallOptions:
        """Today's settings; ImproperlyConfigured for a fusion or a lexical norm it does not know."""
        values = {f.name: getattr(settings, f.metadata["setting"]) for f in fields(cls)}
        values["fusion"] = _checked("ENGRAM_FUSION", values["fusion"], FUSIONS)
        values["lexical_norm"] = _checked("ENGRAM_LINEAR_LEXICAL_NORM", values["lexical_norm"], LEXICAL_NORMS)
        return cls(**values)


def _checked(name: str, raw: object, allowed: tuple[str, ...]) -> str:
    value = str(raw).strip().lower()
    if value not in allowed:
        raise ImproperlyConfigured(f"{name} must be {' or '.join(repr(a) for a in allowed)}, not {value!r}")
    return value
