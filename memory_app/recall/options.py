"""The recall's settings as one frozen value, read from Django's settings once per recall at the
edge; the stages take it as an argument and read no setting themselves."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

FUSIONS = ("linear", "rrf")
LEXICAL_NORMS = ("coverage", "minmax")


@dataclass(frozen=True)
class RecallOptions:
    """What each ENGRAM_* recall setting says (memory_app/config/settings/base.py explains each)."""

    # reading the question
    max_query_chars: int
    stopwords: bool
    fusion: str
    max_words: int
    entity_legs: int
    concepts: bool
    synonym_weight: float
    own_name_weight: float
    temporal_boost: float
    intent_boost: float
    # searching
    bm25: bool
    dense: bool
    passages: bool
    candidates: int
    num_candidates: int
    context_boost: float
    trigger_boost: float
    concept_boost: float
    entity_weight: float
    entity_min_mentions: int
    entity_dense: bool
    entity_topic_vector: bool
    entity_count_seconds: int
    # ranking
    lexical_norm: str
    linear_bm25_weight: float
    linear_dense_weight: float
    rrf_bm25_weight: float
    rrf_dense_weight: float
    rank_constant: int
    decay_offset_days: float
    decay_scale_days: float
    decay_decay: float
    temporal_grace_days: int
    use_count_weight: float
    catalog_prior: float
    outcome_weight: float
    reply_credit: float
    rerank_pool: int
    collapse_copies: bool

    @classmethod
    def from_settings(cls) -> RecallOptions:
        """Today's settings; ImproperlyConfigured for a fusion or a lexical norm it does not know."""
        return cls(
            max_query_chars=settings.ENGRAM_MAX_QUERY_CHARS,
            stopwords=settings.ENGRAM_QUERY_STOPWORDS,
            fusion=_checked("ENGRAM_FUSION", settings.ENGRAM_FUSION, FUSIONS),
            max_words=settings.ENGRAM_LINEAR_MAX_WORDS,
            entity_legs=settings.ENGRAM_RECALL_ENTITY_LEGS,
            concepts=settings.ENGRAM_CONCEPTS,
            synonym_weight=settings.ENGRAM_SYNONYM_WEIGHT,
            own_name_weight=settings.ENGRAM_OWN_NAME_WEIGHT,
            temporal_boost=settings.ENGRAM_TEMPORAL_BOOST,
            intent_boost=settings.ENGRAM_INTENT_BOOST,
            bm25=settings.ENGRAM_RECALL_BM25,
            dense=settings.ENGRAM_RECALL_DENSE,
            passages=settings.ENGRAM_RECALL_PASSAGES,
            candidates=settings.ENGRAM_RECALL_CANDIDATES,
            num_candidates=settings.ENGRAM_RECALL_NUM_CANDIDATES,
            context_boost=settings.ENGRAM_CONTEXT_BOOST,
            trigger_boost=settings.ENGRAM_TRIGGER_BOOST,
            concept_boost=settings.ENGRAM_CONCEPT_BOOST,
            entity_weight=settings.ENGRAM_RRF_ENTITY_WEIGHT,
            entity_min_mentions=settings.ENGRAM_RECALL_ENTITY_MIN_MENTIONS,
            entity_dense=settings.ENGRAM_RECALL_ENTITY_DENSE,
            entity_topic_vector=settings.ENGRAM_RECALL_ENTITY_TOPIC_VECTOR,
            entity_count_seconds=settings.ENGRAM_RECALL_ENTITY_COUNT_SECONDS,
            lexical_norm=_checked("ENGRAM_LINEAR_LEXICAL_NORM", settings.ENGRAM_LINEAR_LEXICAL_NORM, LEXICAL_NORMS),
            linear_bm25_weight=settings.ENGRAM_LINEAR_BM25_WEIGHT,
            linear_dense_weight=settings.ENGRAM_LINEAR_DENSE_WEIGHT,
            rrf_bm25_weight=settings.ENGRAM_RRF_BM25_WEIGHT,
            rrf_dense_weight=settings.ENGRAM_RRF_DENSE_WEIGHT,
            rank_constant=settings.ENGRAM_RRF_RANK_CONSTANT,
            decay_offset_days=settings.ENGRAM_DECAY_OFFSET_DAYS,
            decay_scale_days=settings.ENGRAM_DECAY_SCALE_DAYS,
            decay_decay=settings.ENGRAM_DECAY_DECAY,
            temporal_grace_days=settings.ENGRAM_TEMPORAL_GRACE_DAYS,
            use_count_weight=settings.ENGRAM_USE_COUNT_WEIGHT,
            catalog_prior=settings.ENGRAM_CATALOG_PRIOR,
            outcome_weight=settings.ENGRAM_OUTCOME_WEIGHT,
            reply_credit=settings.ENGRAM_REPLY_CREDIT,
            rerank_pool=settings.ENGRAM_RERANK_POOL,
            collapse_copies=settings.ENGRAM_RECALL_COLLAPSE_COPIES,
        )


def _checked(name: str, raw: object, allowed: tuple[str, ...]) -> str:
    value = str(raw).strip().lower()
    if value not in allowed:
        raise ImproperlyConfigured(f"{name} must be {' or '.join(repr(a) for a in allowed)}, not {value!r}")
    return value
