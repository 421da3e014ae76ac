"""How recall reads, searches and ranks: one frozen ``RankingConfig`` with its defaults here, not
in settings. It is built once at the edge of a request or task (``recall.options.ranking_config``:
the defaults with the deployment's ``ENGRAM_RANKING`` changes) and passed down; the eval's
ablations are changes of their own (``memory_eval --ranking NAME=VALUE``).
docs/retrieval-quality.md gives each default's effect and the command that measures it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from math import isfinite
from typing import Literal, cast

Fusion = Literal["linear", "rrf"]
LexicalNorm = Literal["coverage", "minmax"]
FUSIONS: tuple[Fusion, ...] = ("linear", "rrf")
LEXICAL_NORMS: tuple[LexicalNorm, ...] = ("coverage", "minmax")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class RankingConfig:
    """The ranking's knobs. A weight or boost of 0 turns its signal off."""

    # ---- reading the question
    # Drop question words, auxiliaries and pronouns (language.words) from the BM25 leg's query:
    # they carry no topic, yet match every turn that asks or addresses someone.
    stopwords: bool = True
    # Fusion (recall.rank): "linear", each leg's scores normalised and summed at the linear weights,
    # a lexical leg scored by the idf of the query words a hit holds, counted among the end-user's
    # own memories (no index-wide statistics, so no other tenant moves it); or "rrf".
    fusion: Fusion = "linear"
    max_words: int = 16  # words a lexical hit is scored by (linear fusion)
    # Entity legs (recall.search): up to N named entities of the query each get a BM25 leg over the
    # memories naming them, fused at ``entity_weight`` × the BM25 leg's, so that a name common in
    # the end-user's memories still selects (N = 0 or weight 0: off).
    entity_legs: int = 2
    # Synonyms (language.concepts.synonyms): a memory whose text holds not a question's word but
    # another name WordNet gives the word's most frequent noun sense ("holiday": "vacation") is
    # credited this share of the word's idf in linear fusion's lexical score.
    synonym_weight: float = 0.5
    # The end-user's own name (recall.read): when a question names them, an episode they said (role
    # "user", in the first person) is credited this share of the name's idf in the lexical score,
    # as a fact naming them is credited all of it.
    own_name_weight: float = 1.0
    # Dates named in the query (language.temporal): episodes that occurred in the window, or up to
    # ``temporal_grace_days`` after it (an event is told after it happened), get ×(1 + this).
    temporal_boost: float = 0.25
    # A question asking when or how long: episodes whose words tell a time (a date, a duration, an
    # event told as just past; ``states_time``) get ×(1 + this), the answer's type.
    time_answer_boost: float = 0.25
    # The kind of memory a question asks for, read from its grammar (language.intent): an event
    # (episodes), a state (facts, catalog) or a procedure (playbooks, catalog); those types get
    # ×(1 + this).
    intent_boost: float = 0.1
    # ---- searching
    bm25: bool = True  # the lexical legs (both legs on in production; off only in the ablation)
    dense: bool = True  # the kNN legs
    # The dense leg ranks an episode of several sentences by its best sentence's vector (the
    # passages stored at write time, ENGRAM_EMBED_PASSAGES); off: by the episode's one vector.
    passages: bool = True
    context_boost: float = 0.3  # BM25 weight of an episode's context
    # BM25 weight of a playbook's trigger on top of ``text``, which holds trigger and steps already.
    trigger_boost: float = 0.3
    # The BM25 leg matches a memory's WordNet categories (``concepts``, ENGRAM_CONCEPTS) at this
    # weight against the kinds a question asks for ("Which cities ...?").
    concept_boost: float = 0.3
    # A question asking for pastimes ("What hobbies ...?", language.concepts.asks_for_pastimes):
    # episodes telling an activity by its verb ("we went camping", "kayaking";
    # language.concepts.tells_activity) get ×(1 + this), the answer's type, as time_answer_boost
    # does for a time.
    activity_answer_boost: float = 2.0
    entity_weight: float = 0.5
    # An entity's legs are fused only when at least this many of the end-user's memories name it
    # (a common name no longer selects in the plain BM25 leg; a rare one does). 0: always.
    entity_min_mentions: int = 80
    # Each entity also gets a kNN leg filtered to the memories naming it, searching the embedding
    # of the topic (the query without its entities and stop words, the entity BM25 legs' query) or,
    # with ``entity_topic_vector`` off, the query's own vector.
    entity_dense: bool = True
    entity_topic_vector: bool = True
    # ---- ranking
    # How linear fusion normalises a lexical leg: "coverage", the share of the question's idf the
    # hit holds (1 only for a memory holding every word); or "minmax" over the leg's candidates, as
    # a dense leg is (1 for the leg's best, however little of the question it holds).
    lexical_norm: LexicalNorm = "coverage"
    linear_bm25_weight: float = 1.0
    linear_dense_weight: float = 1.0
    # Per-leg weights in rank fusion: weight / (rank constant + rank). Equal weights = plain RRF.
    rrf_bm25_weight: float = 1.0
    rrf_dense_weight: float = 0.5
    # Rank fusion's constant k in weight / (k + rank); also turns a reranker's rank into a score.
    rank_constant: int = 30
    # Time decay (Elasticsearch's gauss) on the type's own date, so that old memories yield to new
    # ones: ×1 within OFFSET days of now, ×DECAY at OFFSET + SCALE days.
    decay_offset_days: float = 180
    decay_scale_days: float = 1825
    decay_decay: float = 0.5
    temporal_grace_days: int = 31
    # A question naming a period also gets a BM25 and a kNN leg among the episodes dated in it (told
    # in it or up to ``temporal_grace_days`` after, or naming a day of it), fused at this × a plain
    # leg's weight: a turn telling what happened that day rarely holds the question's words.
    dated_weight: float = 1.0
    # The days an episode's own words name ("last Saturday", resolved against when it was told,
    # stored as ``event_dates``) date it too: naming a day of the period counts, naming other days
    # rules the grace out (false: the episode's date alone).
    event_dates: bool = True
    # An episode ×(1 + this × the share of the question its session's candidate episodes hold
    # together): a session about the question spreads its words over several turns.
    session_coverage: float = 0.25
    # A fact found credits the episodes it was distilled from: in each leg, this × the fact's value
    # where that beats the episode's own (an episodic recall searches facts for it).
    fact_credit: float = 0.25
    # Facts an agent used get ×(1 + this · log10(1 + use_count)): a fact in use is likelier wanted again.
    use_count_weight: float = 0.2
    # Catalog entries get ×this: the tenant's shared knowledge yields to the end-user's own memories.
    catalog_prior: float = 0.85
    # Playbook outcome factor: 1 ± this, by the Beta posterior mean of successes vs failures.
    outcome_weight: float = 0.1
    # An episode whose predecessor in its session (the last of its derived ``context_ids``) asks a
    # question gains this share of that question's score when both are candidates.
    reply_credit: float = 0.35
    # An episode gains this share of the best score among its session neighbours that are candidates
    # (the turns in its derived ``context_ids`` and the turns whose context names it): a conversation
    # tells one thing over consecutive turns, of which a question meets some.
    neighbour_credit: float = 0.3
    # Speaker-aware reading: an episode told by a speaker the question names (a transcript's "Name:"
    # opening its text) gets ×(1 + this): "What does Maria like?" is answered by what Maria said.
    speaker_weight: float = 0.1
    # A transcript's line ("Name: ...") that speaks to its listener rather than of its speaker (more
    # "you" than "I", or ending on a question: language.words.to_listener) gets ×(1 − this): it tells
    # little of anyone's own life.
    listener_weight: float = 0.15
    # A second hop for a question that gathers over time ("What has Jon done …?", read.query_gathers):
    # the first hits' own vectors search the episodes of the other sessions, a leg at this weight
    # (0: off). Such a question's evidence lies in several sessions, the later ones like the first.
    hop_weight: float = 0.5
    # A recall lists a memory once per content: later hits of the same type and text (case and
    # spacing aside) are left out, their ids given as the first one's ``copies`` in explain.
    collapse_copies: bool = True
    # A value that stopped being true (recall.rank.stale_episodes, issue 69): an episode a superseded
    # fact near the question came from is ×``superseded_weight`` for a question about now (and kept
    # below the best hit holding the value that replaced it), ×(1 + ``past_boost``) for one about the
    # past; the ``stale_facts`` superseded facts nearest the question are searched (0: none, off).
    superseded_weight: float = 0.5
    past_boost: float = 1.0
    stale_facts: int = 10
    # For a question about the past, such an episode ranks above the best hit holding the value that
    # replaced it (``rank.above_successors``); for one about now, a current fact naming only the
    # value that ended ("no longer lives in Oxford") ranks below it (``rank.ended_facts``).
    past_above: bool = True
    ended_below: bool = True

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be {' or '.join(map(repr, FUSIONS))}, not {self.fusion!r}")
        if self.lexical_norm not in LEXICAL_NORMS:
            raise ValueError(f"lexical_norm must be {' or '.join(map(repr, LEXICAL_NORMS))}, "
                             f"not {self.lexical_norm!r}")

    def changed(self, changes: Mapping[str, object]) -> RankingConfig:
        """This config with ``changes`` (name → value: a value of the field's type, or its text, as
        a command line gives it); ValueError naming the first unknown name or unfit value."""
        kinds = {f.name: f.type for f in fields(self)}
        values: dict[str, object] = {}
        for name, raw in changes.items():
            if name not in kinds:
                raise ValueError(f"{name!r} is not a ranking setting (one of: {', '.join(kinds)})")
            values[name] = _value(name, str(kinds[name]), raw)
        return replace(self, **cast(dict, values))


def _value(name: str, kind: str, raw: object) -> object:
    """``raw`` as a value of the field ``name`` (whose annotation reads ``kind``)."""
    text = raw.strip().lower() if isinstance(raw, str) else None
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
    elif kind in ("int", "float"):
        if isinstance(raw, bool):
            pass
        elif isinstance(raw, int) or (kind == "float" and isinstance(raw, float) and isfinite(raw)):
            return float(raw) if kind == "float" else raw
        elif text is not None:
            try:
                number = int(text) if kind == "int" else float(text)
            except ValueError:
                pass
            else:
                if isfinite(number):
                    return number
    elif text is not None:  # a choice; __post_init__ checks it
        return text
    raise ValueError(f"{name} must be a {'number' if kind in ('int', 'float') else kind}, not {raw!r}")
