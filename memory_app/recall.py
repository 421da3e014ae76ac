"""Hybrid recall: BM25 and kNN legs per memory type in one ``_msearch``, fused in Python.

The CI node has no ``rrf`` or ``linear`` retriever, so fusion happens here. Per hit:

    score = fused × time_decay × use_count_boost × catalog_prior × outcome × time_window × intent
            (+ reply credit)

- fused, linearly (ENGRAM_FUSION "linear", the default): Σ over the legs the hit appears in of
  weight_leg × its normalised score (ENGRAM_LINEAR_*_WEIGHT, 1.0 each). A dense leg's score is
  its similarity, min-max normalised over the leg's candidates (1 for the leg's best, 0 for its
  last), as Elasticsearch's linear retriever with its minmax normaliser. A lexical leg's (BM25,
  entity) is not Elasticsearch's BM25 score, whose idf and average length are the index's, i.e.
  in shared indices every tenant's: it is the idf of each query word the hit's text holds (+
  ENGRAM_CONTEXT_BOOST × that of each word only its context holds, or ENGRAM_SYNONYM_WEIGHT ×
  that of each word whose synonym its text holds, or ENGRAM_OWN_NAME_WEIGHT × that of a word
  naming the end-user if they said it (an episode of role "user"), + ENGRAM_CONCEPT_BOOST × that
  of the asked kinds if its concepts hold one), counted among the memories the end-user may read,
  in the same ``_msearch`` through their own key (``lexical_words``, ``word_clauses``,
  ``word_counts_search``, ``lexical_score``); the leg is ordered by it too. So nothing another
  tenant writes moves a score or the order, except which memories are among a leg's 80
  candidates. It is normalised by the score of a memory holding every word
  (ENGRAM_LINEAR_LEXICAL_NORM "coverage", ``lexical_ceiling``): the share of the question's
  information the memory holds, which min-max
  over the candidates would inflate to 1 for a leg's best however little it holds (a memory
  sharing one rare word with a long question, when no memory shares more). The dense leg has no
  such ceiling (a similarity of 1 is a copy of the question), so it keeps min-max. Ranks discard
  how far a leg's best match is ahead of the rest; scores keep it.
- or by reciprocal rank (ENGRAM_FUSION "rrf"): Σ weight_leg / (rank_constant + rank), ranks
  from 1 (ENGRAM_RRF_BM25_WEIGHT 1.0, ENGRAM_RRF_DENSE_WEIGHT 0.5: the lexical leg is the
  stronger one for conversational memory with the bundled MiniLM embedder; equal weights give
  plain RRF); the legs keep Elasticsearch's order.
- time_decay: the gauss function Elasticsearch's ``function_score`` uses, on the type's own date
  field (episodic ``occurred_at``, semantic ``last_used_at``; procedural and catalog exempt).
- use_count_boost (semantic): 1 + 0.2 · log10(1 + use_count).
- catalog_prior (catalog): 0.85.
- time_window (episodic, memory_app.language.temporal): 1 + ENGRAM_TEMPORAL_BOOST in the date window the query names.
- intent (memory_app.language.intent): 1 + ENGRAM_INTENT_BOOST for the types that answer the kind of
  question asked (an event: episodes; a state: facts and catalog; a procedure: playbooks and catalog).
- outcome (procedural): 1 + ENGRAM_OUTCOME_WEIGHT · (2·m − 1), m the posterior mean of
  Beta(1 + successes, 1 + failures): untried ×1.0, reliable up to ×(1 + w), failing down to
  ×(1 − w). w is 0.1 because fused scores are close together (rank 1 and rank 10 of one leg differ
  by only ×1.3): a larger factor would rank a proven but off-topic playbook above the answer.

The BM25 leg searches the episode text, its exact (unstemmed) subfield at half weight and the
episode's context (the turns before it) at ENGRAM_CONTEXT_BOOST, with the query stripped of
question words, auxiliaries and pronouns (``keyword_query``); the kNN leg embeds the query as is.
BM25's k1/b are index settings (ENGRAM_BM25_K1/B; b 0.4: memories are short). Extra legs (the
entity legs of memory_app.query_plan) join the fusion through ``fuse(extra=...)``; a date the query
names (memory_app.language.temporal) adds a ``time_window`` multiplier.

Reply credit (ENGRAM_REPLY_CREDIT, 0.25): an episode whose predecessor in its session (the last
of its derived ``context_ids``, memory_app.context) asks a question gains 0.25 × that question's
score, when both are candidates. In a conversation the turn that asks names the topic and the
turn that answers it often does not ("Anything you're excited about in the adoption process?" →
"I'm thrilled to make a family for kids who need one"); derived context carries the question's
words into the answer's BM25 fields and vector at a discount, and the credit ranks the answer
next to a question that matched.

The multipliers are computed here rather than inside Elasticsearch so that ``explain`` can show
every factor exactly, and so that fusion ranks legs by relevance alone. All constants are settings.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from engram_core.es.schema import HIDDEN_FIELDS, VECTOR_FIELDS, MemoryType
from memory_app.language.intent import ANSWERED_BY, Intent
from memory_app.language.passages import passages_of
from memory_app.language.temporal import TimeWindow

# Each type's date field for time decay; None = exempt.
DECAY_FIELD: dict[MemoryType, str | None] = {
    MemoryType.EPISODIC: "occurred_at",
    MemoryType.SEMANTIC: "last_used_at",
    MemoryType.PROCEDURAL: None,
    MemoryType.CATALOG: None,
}
# The date field a recall's time range filters on.
RANGE_FIELD: dict[MemoryType, str] = {
    MemoryType.EPISODIC: "occurred_at",
    MemoryType.SEMANTIC: "created_at",
    MemoryType.PROCEDURAL: "created_at",
    MemoryType.CATALOG: "created_at",
}


def text_fields(memory_type: MemoryType) -> list[str]:
    """Fields the BM25 leg searches for a type, with boosts."""
    return {
        MemoryType.EPISODIC: ["text", "text.exact^0.5", f"context^{settings.ENGRAM_CONTEXT_BOOST}",
                              f"derived_context^{settings.ENGRAM_CONTEXT_BOOST}"],
        MemoryType.SEMANTIC: ["text", "text.exact^0.5"],
        # ``text`` already holds trigger + steps (+ refined steps): searching those fields again
        # would count a playbook's words two or three times against a fact's once.
        MemoryType.PROCEDURAL: ["text", "text.exact^0.5", f"trigger^{settings.ENGRAM_TRIGGER_BOOST}"],
        MemoryType.CATALOG: ["title^1.5", "text", "text.exact^0.5"],
    }[memory_type]
SOURCE_EXCLUDES = [*VECTOR_FIELDS, *HIDDEN_FIELDS]

# Function words dropped from the BM25 leg's query (ENGRAM_QUERY_STOPWORDS): the Snowball English
# stop list (question words, auxiliaries, pronouns, determiners), which the index's smaller
# Lucene list keeps. In a question they carry no topic yet match every turn that asks or
# addresses someone ("What did she ...?" matching "What do you ...?").
QUERY_STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can't cannot could couldn't did didn't do does doesn't doing don't down during each few
for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves
then there there's these they they'd they'll they're they've this those through to too under until up
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself
yourselves
""".split())
_WORD = re.compile(r"\w+(?:['’]\w+)*")


def keyword_query(query: str) -> str:
    """The BM25 leg's query: ``query`` without QUERY_STOPWORDS (unchanged if nothing else is left,
    or when ENGRAM_QUERY_STOPWORDS is off)."""
    if not settings.ENGRAM_QUERY_STOPWORDS:
        return query
    stripped = _WORD.sub(lambda m: "" if m.group().lower().replace("’", "'") in QUERY_STOPWORDS else m.group(),
                         query)
    return " ".join(stripped.split()) if _WORD.search(stripped) else query


@dataclass
class Hit:
    id: str
    memory_type: MemoryType
    source: dict[str, Any]
    bm25_rank: int | None = None
    dense_rank: int | None = None
    fused: float = 0.0
    fusion: str = "rrf"  # how ``fused`` was computed (``fuse``)
    multipliers: dict[str, float] = field(default_factory=dict)
    rerank_score: float | None = None
    rerank_rank: int | None = None
    score: float = 0.0
    extra_ranks: dict[str, int] = field(default_factory=dict)  # ranks in extra legs (memory_app.query_plan)
    dense_passage: int | None = None  # the passage an episode's dense rank came from, if one did (explain only)
    reply_credit: float = 0.0  # added to the score for answering a candidate that asks (``reply_credit``)
    replies_to: str | None = None

    def explain(self) -> dict[str, Any]:
        # Ranks, the fused score and the multipliers, and the sentence of the episode's own text
        # its dense rank came from. Raw BM25 scores are never exposed: they carry index-wide term
        # statistics (idf, average length), which in shared indices move when another tenant
        # writes; the fused score uses none (linear: own-memory word counts; rrf: ranks).
        return {
            "bm25_rank": self.bm25_rank,
            "dense_rank": self.dense_rank,
            "fusion": self.fusion,
            f"{self.fusion}_score": self.fused,
            "rerank_score": self.rerank_score,
            "rerank_rank": self.rerank_rank,
            "multipliers": self.multipliers,
            "final_score": self.score,
            **({"extra_ranks": self.extra_ranks} if self.extra_ranks else {}),
            **({"reply_credit": self.reply_credit, "replies_to": self.replies_to} if self.replies_to else {}),
            **({"dense_sentence": sentence} if (sentence := self._dense_sentence()) else {}),
        }

    def _dense_sentence(self) -> str | None:
        # Passages are not stored as text: the offset indexes the same split of the episode's text.
        if self.dense_passage is None:
            return None
        passages = passages_of(self.source.get("text") or "")
        return passages[self.dense_passage] if self.dense_passage < len(passages) else None


def type_filter(*, memory_type: MemoryType, scope: dict[str, str], include_superseded: bool,
                since: datetime | None, until: datetime | None) -> dict:
    """What a hit of one memory type must satisfy. The scope terms duplicate the DLS key's query
    on purpose: a second guard in case a key's role were ever too broad."""
    filters: list[dict] = [{"term": {"memory_type": memory_type.value}}, {"term": {"tenant_id": scope["tenant_id"]}}]
    if memory_type is not MemoryType.CATALOG:
        filters.append({"term": {"user_id": scope["user_id"]}})
    if since or until:
        bounds = {k: v.isoformat() for k, v in (("gte", since), ("lte", until)) if v}
        filters.append({"range": {RANGE_FIELD[memory_type]: bounds}})
    if not include_superseded:
        filters.append({"bool": {"must_not": {"exists": {"field": "superseded_by"}}}})
    return {"bool": {"filter": filters}}


def allowed_filter(*, types: list[MemoryType], scope: dict[str, str], include_superseded: bool,
                   since: datetime | None, until: datetime | None) -> dict:
    """A hit must satisfy the filter of one of the requested types."""
    return {"bool": {"should": [type_filter(memory_type=t, scope=scope, include_superseded=include_superseded,
                                            since=since, until=until) for t in types],
                     "minimum_should_match": 1}}


def bm25_fields(types: list[MemoryType]) -> list[str]:
    return list(dict.fromkeys(f for t in types for f in text_fields(t)))


def lexical_header(indices: str, *, words: list[str]) -> dict:
    """The ``_msearch`` header of a lexical leg (BM25, entity). Under rank fusion (no ``words``)
    Elasticsearch's BM25 score orders the leg, so its term statistics are first gathered across
    all the indices (``dfs_query_then_fetch``), which makes scores comparable across the memory
    types. Under linear fusion (``words``) Engram scores and orders the leg itself
    (``lexical_score``, from the end-user's own memories) and BM25 only picks its candidates, so
    that extra round is not spent (it cost 8–28% more Elasticsearch CPU per recall in
    benchmarks/es_cost.py's "with DFS" runs): without it each index's own statistics pick its
    share of the 80 candidates, which matters only for an end-user with more matching memories."""
    return {"index": indices} if words else {"index": indices, "search_type": "dfs_query_then_fetch"}


def msearch_body(*, types: list[MemoryType], query: str, vector: list[float], scope: dict[str, str],
                 include_superseded: bool, since: datetime | None, until: datetime | None,
                 index_for: dict[MemoryType, str], explain: bool = False, words: list[str] = (),
                 synonyms: list[tuple[str, ...]] = (), own_name: frozenset[str] = frozenset(),
                 kinds: str | None = None) -> list[dict]:
    """Header/body pairs for the two legs, each over every requested type's index at once, so
    that ranks are comparable across types (a per-type leg would give every type its own rank 1).
    The dense leg searches the memories' own vectors and, for episodes, their sentences' vectors
    (``passage_query``) in one search. ``explain``: it also names each episode's nearest passage.
    ``words`` (linear fusion, ``lexical_words``): each hit of the BM25 leg also reports which of
    them its text and its context hold, whether its text holds one of a word's ``synonyms`` and
    whether the end-user said it, for the words of their ``own_name`` (``word_clauses``), and the
    leg skips the DFS round (``lexical_header``). ``kinds``: the kinds the question asks for
    (``concepts.query_categories``), which the BM25 leg matches against the memories' ``concepts``."""
    candidates = settings.ENGRAM_RECALL_CANDIDATES
    indices = ",".join(index_for[t] for t in types)
    allowed = allowed_filter(types=types, scope=scope, include_superseded=include_superseded, since=since, until=until)
    fields = bm25_fields(types)
    body: list[dict] = []
    if settings.ENGRAM_RECALL_BM25:
        body += [
            lexical_header(indices, words=words),
            {"size": candidates, "_source": {"excludes": SOURCE_EXCLUDES},
             "query": {"bool": {"filter": [allowed], "minimum_should_match": 1, "should": [
                 {"multi_match": {"query": keyword_query(query), "fields": fields, "type": "most_fields"}},
                 *([{"match": {"concepts": {"query": kinds, "boost": settings.ENGRAM_CONCEPT_BOOST,
                                            # named for linear fusion's lexical score (``lexical_score``)
                                            **({"_name": _KINDS} if words else {})}}}]
                   if kinds else []),
                 *word_clauses(words, synonyms, own_name)]}}},
        ]
    if settings.ENGRAM_RECALL_DENSE:
        dense: dict = {"knn": knn_clause(field="embedding", vector=vector, filters=[allowed])}
        if passages_searched(types):
            dense = {"dis_max": {"queries": [dense, passage_query(vector=vector, filters=[allowed], explain=explain)]}}
        body += [{"index": indices}, {"size": candidates, "_source": {"excludes": SOURCE_EXCLUDES}, "query": dense}]
    return body


def knn_clause(*, field: str, vector: list[float], filters: list[dict]) -> dict:
    """A ``knn`` query's options: the ``candidates`` nearest per index, the scope ``filters``
    applied inside the kNN search (a pre-filter, not a filter of its results: an exact scan of the
    documents they leave with the default flat vectors, a walk of the graph with an HNSW type). As
    a query rather than a search's top-level ``knn`` section it runs in the query phase, with no
    round of its own before it, and can be combined with another query (``passage_query``)."""
    candidates = settings.ENGRAM_RECALL_CANDIDATES
    return {"field": field, "query_vector": vector, "k": candidates,
            "num_candidates": max(candidates, settings.ENGRAM_RECALL_NUM_CANDIDATES), "filter": filters}


def passages_searched(types: list[MemoryType]) -> bool:
    return settings.ENGRAM_RECALL_DENSE and settings.ENGRAM_RECALL_PASSAGES and MemoryType.EPISODIC in types


def passage_query(*, vector: list[float], filters: list[dict], explain: bool = False) -> dict:
    """The kNN query over the episodes' sentence vectors (``passages.embedding``, nested): an
    episode scores by its nearest passage. The dense leg takes the larger of this and the
    memory's own vector's score (``dis_max``; both are cosine similarities on Elasticsearch's
    (1 + cos) / 2 scale), so an episode ranks by max(its vector, its best sentence), in the one
    search. Only episodes have passages; the other indices of the leg lack the field
    (``ignore_unmapped``). With ``explain``, each hit also carries its nearest passage's position
    and score (nested ``inner_hits``, no source): ``best_passage``."""
    nested = {"path": "passages", "score_mode": "max", "ignore_unmapped": True,
              "query": {"knn": knn_clause(field="passages.embedding", vector=vector, filters=filters)}}
    if explain:
        nested["inner_hits"] = {"name": PASSAGE_HITS, "size": 1, "_source": False}
    return {"nested": nested}


PASSAGE_HITS = "passage"


def best_passage(raw: dict) -> int | None:
    """The offset of the passage a dense hit scored by, if its score is its nearest passage's
    rather than its own vector's (present with ``explain``)."""
    hits = raw.get("inner_hits", {}).get(PASSAGE_HITS, {}).get("hits", {}).get("hits") or []
    if not hits or hits[0]["_score"] < raw["_score"]:
        return None
    return hits[0]["_nested"]["offset"]


def legs() -> list[str]:
    return [leg for leg, on in (("bm25", settings.ENGRAM_RECALL_BM25), ("dense", settings.ENGRAM_RECALL_DENSE)) if on]


FUSIONS = ("rrf", "linear")
# named-query prefixes (``word_clauses``)
_WORD_IN_TEXT, _WORD_IN_CONTEXT, _SYNONYM_IN_TEXT = "word_text_", "word_context_", "word_synonym_"
_SAID_BY_NAMED = "word_speaker_"
_KINDS = "kinds"  # the named clause of the kinds a question asks for (memory_app.language.concepts)


def fusion() -> str:
    """ENGRAM_FUSION, checked: "linear" (the default) or "rrf"."""
    value = str(settings.ENGRAM_FUSION).strip().lower()
    if value not in FUSIONS:
        raise ImproperlyConfigured(f"ENGRAM_FUSION must be 'linear' or 'rrf', not {value!r}")
    return value


def lexical_words(query: str) -> list[str]:
    """The words linear fusion scores the lexical legs by: the distinct words of the BM25 leg's
    query (``keyword_query``), lower-cased, at most ENGRAM_LINEAR_MAX_WORDS."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(keyword_query(query)))
    return list(words)[: settings.ENGRAM_LINEAR_MAX_WORDS]


def _holds(word: str, fields: list[str], **options) -> dict:
    """The clause matching a memory whose ``fields`` hold ``word`` (analysed as those fields are):
    one definition for the named clause a hit reports and the filter that counts such memories."""
    return {"multi_match": {"query": word, "fields": fields, **options}}


_TEXT_FIELDS, _CONTEXT_FIELDS = ["text", "title"], ["context", "derived_context"]


def word_clauses(words: list[str], synonyms: list[tuple[str, ...]] = (), own_name: frozenset[str] = frozenset()
                 ) -> list[dict]:
    """Named clauses that score nothing (boost 0) and make Elasticsearch report, per hit, which
    of ``words`` its own text (or a catalog entry's title) holds, which its context holds and,
    for a word with ``synonyms`` (one tuple per word, ``concepts.synonyms``), whether its text
    holds one of them (``matched_queries``), each word analysed as the fields are (stemmed);
    for a word of ``own_name`` (the end-user's own name, as the question names it), whether the
    hit is an episode the end-user said (role "user": their "I" is the person named).
    Whether its ``concepts`` hold an asked kind is reported by the BM25 leg's own concepts
    clause, named ``_KINDS`` (``msearch_body``)."""
    clauses: list[dict] = []
    for n, word in enumerate(words):
        clauses += [_holds(word, _TEXT_FIELDS, boost=0.0, _name=f"{_WORD_IN_TEXT}{n}"),
                    _holds(word, _CONTEXT_FIELDS, boost=0.0, _name=f"{_WORD_IN_CONTEXT}{n}")]
        if n < len(synonyms) and synonyms[n]:
            clauses.append(_holds(" ".join(synonyms[n]), _TEXT_FIELDS, boost=0.0, _name=f"{_SYNONYM_IN_TEXT}{n}"))
        if word in own_name:
            clauses.append(_said_by_user(boost=0.0, _name=f"{_SAID_BY_NAMED}{n}"))
    return clauses


def _said_by_user(**options) -> dict:
    """The clause matching an episode the end-user said (role "user": their "I")."""
    return {"term": {"role": {"value": "user", **options}}}


def word_counts_search(*, words: list[str], indices: str, allowed: dict, kinds: str | None = None,
                       own_name: frozenset[str] = frozenset()) -> list[dict]:
    """The header/body pair counting, among the memories the recall may return (``allowed``,
    read through the end-user's own key: their memories and their tenant's catalog), how many
    there are, how many hold each word in their text or title (for a word of the end-user's
    ``own_name``, also the episodes they said, which the score credits with it: in their own
    memory their name says little), and how many are of one of the ``kinds`` (``word_idf``)."""
    filters = {f"{_WORD_IN_TEXT}{n}": {"bool": {"should": [_holds(word, _TEXT_FIELDS), _said_by_user()]}}
               if word in own_name else _holds(word, _TEXT_FIELDS) for n, word in enumerate(words)}
    if kinds:
        filters[_KINDS] = {"match": {"concepts": kinds}}
    return [{"index": indices},
            {"size": 0, "track_total_hits": True, "query": {"bool": {"filter": [allowed]}},
             "aggs": {"words": {"filters": {"filters": filters}}}}]


def word_idf(response: dict) -> dict[str, float]:
    """BM25's idf of each word, log(1 + (N − n + 0.5) / (n + 0.5)), from ``word_counts_search``'s
    counts: N the end-user's memories (with their tenant's catalog), n those holding the word."""
    total = response["hits"]["total"]["value"]
    buckets = response.get("aggregations", {}).get("words", {}).get("buckets", {})
    return {name: math.log(1.0 + (total - bucket["doc_count"] + 0.5) / (bucket["doc_count"] + 0.5))
            for name, bucket in buckets.items()}


def lexical_score(raw: dict, idf: dict[str, float]) -> float:
    """A lexical hit's score for linear fusion: the idf of each query word its text holds; for a
    word its text does not hold, the larger of ENGRAM_CONTEXT_BOOST × its idf if its context holds
    it, ENGRAM_SYNONYM_WEIGHT × its idf if its text holds a synonym of it and ENGRAM_OWN_NAME_WEIGHT
    × its idf if the word names the end-user and the hit is an episode they said; plus
    ENGRAM_CONCEPT_BOOST × the idf of the asked kinds if its concepts hold one (the BM25 leg's
    fields at their boosts)."""
    matched = set(raw.get("matched_queries") or ())
    score = 0.0
    for name, value in idf.items():
        if name == _KINDS:
            score += settings.ENGRAM_CONCEPT_BOOST * value if name in matched else 0.0
        elif name in matched:
            score += value
        else:
            n = name.removeprefix(_WORD_IN_TEXT)
            score += value * max(settings.ENGRAM_CONTEXT_BOOST if f"{_WORD_IN_CONTEXT}{n}" in matched else 0.0,
                                 settings.ENGRAM_SYNONYM_WEIGHT if f"{_SYNONYM_IN_TEXT}{n}" in matched else 0.0,
                                 settings.ENGRAM_OWN_NAME_WEIGHT if f"{_SAID_BY_NAMED}{n}" in matched else 0.0)
    return score


def lexical_ceiling(idf: dict[str, float]) -> float:
    """The lexical score of a memory holding every word of the question in its text and one of
    the asked kinds (``lexical_score``'s largest): what ENGRAM_LINEAR_LEXICAL_NORM "coverage"
    divides by."""
    return lexical_score({"matched_queries": list(idf)}, idf)


LEXICAL_NORMS = ("coverage", "minmax")


def lexical_norm() -> str:
    """ENGRAM_LINEAR_LEXICAL_NORM, checked."""
    value = str(settings.ENGRAM_LINEAR_LEXICAL_NORM).strip().lower()
    if value not in LEXICAL_NORMS:
        raise ImproperlyConfigured(f"ENGRAM_LINEAR_LEXICAL_NORM must be 'coverage' or 'minmax', not {value!r}")
    return value


def leg_weight(leg: str, *, fusion: str) -> float:
    """A leg's weight in ``fusion``: the dense weight for the dense leg and the entity kNN legs
    (``entityN_dense``), the BM25 weight for the others."""
    dense = is_dense(leg)
    if fusion == "linear":
        return settings.ENGRAM_LINEAR_DENSE_WEIGHT if dense else settings.ENGRAM_LINEAR_BM25_WEIGHT
    return settings.ENGRAM_RRF_DENSE_WEIGHT if dense else settings.ENGRAM_RRF_BM25_WEIGHT


def is_dense(leg: str) -> bool:
    return leg == "dense" or leg.endswith("_dense")


def minmax(scores: list[float]) -> list[float]:
    """Scores rescaled to [0, 1] over their own range (all 1.0 when they are equal: a leg's only
    match, or a tie, is its best)."""
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    return [(value - low) / (high - low) if high > low else 1.0 for value in scores]


def lexical_normalised(scores: list[float], idf: dict[str, float]) -> list[float]:
    """A lexical leg's scores in [0, 1] (ENGRAM_LINEAR_LEXICAL_NORM): "coverage", each as a share
    of ``lexical_ceiling``, so a memory holding one rare word of a long question scores that
    word's share even when nothing better matched; "minmax", over the leg's own range."""
    if lexical_norm() == "minmax":
        return minmax(scores)
    ceiling = lexical_ceiling(idf)
    return [value / ceiling if ceiling > 0 else 0.0 for value in scores]


def fuse(*, responses: list[dict], extra: list[tuple[str, float]] = (), fusion: str = "rrf",
         idf: dict[str, float] | None = None) -> dict[str, Hit]:
    """Fusion of the legs' responses (in ``legs()`` order, then the ``extra`` legs' as (name,
    factor), e.g. memory_app.query_plan's entity legs, weighted factor × ``leg_weight``): by
    reciprocal rank, or for "linear" by normalised score: a dense leg's similarity min-max
    normalised, a lexical leg's ``lexical_score`` with ``idf`` as ``lexical_normalised`` says
    (see the module docstring)."""
    k = settings.ENGRAM_RRF_RANK_CONSTANT
    factors = {"bm25": 1.0, "dense": 1.0, **dict(extra)}
    hits: dict[str, Hit] = {}
    for leg, response in zip([*legs(), *(name for name, _f in extra)], responses, strict=True):
        raws = response["hits"]["hits"]
        weight = factors[leg] * leg_weight(leg, fusion=fusion)
        if fusion == "linear":
            if is_dense(leg):
                normalised = minmax([raw["_score"] for raw in raws])
            else:  # ranked by its own score, ties by id: no index-wide statistic orders the leg
                scored = sorted(((lexical_score(raw, idf or {}), raw) for raw in raws),
                                key=lambda pair: (-pair[0], pair[1]["_id"]))
                raws, normalised = [raw for _, raw in scored], lexical_normalised([v for v, _ in scored], idf or {})
            values = [weight * v for v in normalised]
        else:
            values = [weight / (k + rank) for rank in range(1, len(raws) + 1)]
        for rank, (raw, value) in enumerate(zip(raws, values, strict=True), start=1):
            hit = hits.get(raw["_id"]) or hits.setdefault(raw["_id"], Hit(
                id=raw["_id"], memory_type=MemoryType(raw["_source"]["memory_type"]), source=raw["_source"],
                fusion=fusion))
            if leg in ("bm25", "dense"):
                setattr(hit, f"{leg}_rank", rank)
                if leg == "dense":
                    hit.dense_passage = best_passage(raw)
            else:
                hit.extra_ranks[leg] = rank
            hit.fused += value
    return hits


def gauss_decay(*, value: datetime | None, origin: datetime) -> float:
    """Elasticsearch's gauss decay: 1 within ``offset`` of the origin, ``decay`` at offset + scale."""
    if value is None:
        return 1.0
    offset = settings.ENGRAM_DECAY_OFFSET_DAYS * 86400.0
    scale = settings.ENGRAM_DECAY_SCALE_DAYS * 86400.0
    distance = max(0.0, abs((origin - value).total_seconds()) - offset)
    sigma_sq = -(scale**2) / (2.0 * math.log(settings.ENGRAM_DECAY_DECAY))
    return math.exp(-(distance**2) / (2.0 * sigma_sq))


def outcome_multiplier(*, successes: int, failures: int) -> float:
    """1 ± ENGRAM_OUTCOME_WEIGHT, by the posterior mean of a Beta(1, 1) prior updated with the
    playbook's outcomes (exactly 1.0 for an untried playbook or an even record)."""
    mean = (1.0 + successes) / (2.0 + successes + failures)
    return 1.0 + settings.ENGRAM_OUTCOME_WEIGHT * (2.0 * mean - 1.0)


def multipliers_for(hit: Hit, *, now: datetime, window: TimeWindow | None = None,
                    intent: Intent | None = None) -> dict[str, float]:
    src = hit.source
    factors: dict[str, float] = {}
    if date_field := DECAY_FIELD[hit.memory_type]:
        raw = src.get(date_field) or src.get("created_at")
        factors["time_decay"] = gauss_decay(value=datetime.fromisoformat(raw) if raw else None, origin=now)
    if window is not None and hit.memory_type is MemoryType.EPISODIC and (raw := src.get("occurred_at")) and \
            window.contains(datetime.fromisoformat(raw), grace=timedelta(days=settings.ENGRAM_TEMPORAL_GRACE_DAYS)):
        factors["time_window"] = 1.0 + settings.ENGRAM_TEMPORAL_BOOST  # memory_app.language.temporal
    if intent is not None and hit.memory_type in ANSWERED_BY[intent]:
        factors["intent"] = 1.0 + settings.ENGRAM_INTENT_BOOST  # memory_app.language.intent
    if hit.memory_type is MemoryType.SEMANTIC:
        factors["use_count"] = 1.0 + settings.ENGRAM_USE_COUNT_WEIGHT * math.log10(1 + int(src.get("use_count") or 0))
    if hit.memory_type is MemoryType.CATALOG:
        factors["catalog_prior"] = settings.ENGRAM_CATALOG_PRIOR
    if hit.memory_type is MemoryType.PROCEDURAL:
        factors["outcome"] = outcome_multiplier(successes=int(src.get("success_count") or 0),
                                                failures=int(src.get("failure_count") or 0))
    return factors


def score(hits: list[Hit], *, now: datetime, window: TimeWindow | None = None,
          intent: Intent | None = None) -> list[Hit]:
    """Apply the multipliers and the reply credit, and sort. When a reranker ran, its order
    replaces the fused one (as 1 / (rank_constant + rerank rank), so scores stay positive and
    comparable). ``window``: the date window the query names (memory_app.language.temporal), boosting
    episodes in it; ``intent``: the kind of memory it asks for (memory_app.language.intent), boosting the
    types that answer it."""
    k = settings.ENGRAM_RRF_RANK_CONSTANT
    for hit in hits:
        hit.multipliers = multipliers_for(hit, now=now, window=window, intent=intent)
        base = 1.0 / (k + hit.rerank_rank) if hit.rerank_rank is not None else hit.fused
        hit.score = base * math.prod(hit.multipliers.values())
    reply_credit(hits)
    return sorted(hits, key=lambda h: (-h.score, h.id))


# A sentence that ends in a question mark (before optional closing quotes or brackets).
_ASKS = re.compile(r"\?[\"'”’)\]]*(?:\s|$)")


def _content(hit: Hit) -> tuple:
    """What a memory says as a recall returns it, compared case- and spacing-blind: a copy says
    nothing its original does not. (An episode's derived context is never returned; a context the
    client sent is, so it counts, and so does who said it.)"""
    fields = (("title", "text") if hit.memory_type is MemoryType.CATALOG
              else ("trigger", "steps", "refined_steps", "text", "context", "role"))
    return hit.memory_type, *(" ".join(str(hit.source.get(f) or "").split()).casefold() for f in fields)


def without_copies(ranked: list[Hit], *, k: int) -> tuple[list[Hit], dict[str, list[str]]]:
    """The first ``k`` of ``ranked`` that are not a copy of a memory ranked above them (the same
    type and text: a user who said "Is that why?" on four days has four episodes), and for each
    kept memory the ids of its copies among them, best first (``copies`` in ``explain``). Four
    copies of one line would fill four of an agent's k places with nothing new; the copies stay
    stored, dated and each recallable on its own terms (``ENGRAM_RECALL_COLLAPSE_COPIES``)."""
    if not settings.ENGRAM_RECALL_COLLAPSE_COPIES:
        return ranked[:k], {}
    kept: list[Hit] = []
    original: dict[tuple, str] = {}
    copies: dict[str, list[str]] = {}
    for hit in ranked:
        content = _content(hit)
        if content in original:
            copies.setdefault(original[content], []).append(hit.id)
        elif len(kept) < k:
            original[content] = hit.id
            kept.append(hit)
    return kept, copies


def asks(text: str) -> bool:
    """Whether ``text`` asks a question: one of its sentences ends with a question mark."""
    return bool(_ASKS.search(text))


def reply_credit(hits: list[Hit]) -> None:
    """Add ENGRAM_REPLY_CREDIT × its question's score to every episode whose predecessor in its
    session (the last of its ``context_ids``) is a candidate that asks a question. Credits are
    computed from the scores before any credit, so they do not chain along a session."""
    weight = settings.ENGRAM_REPLY_CREDIT
    if weight <= 0:
        return
    by_id = {hit.id: hit for hit in hits if hit.memory_type is MemoryType.EPISODIC}
    credits: list[tuple[Hit, Hit, float]] = []
    for hit in by_id.values():
        before = hit.source.get("context_ids") or []
        question = by_id.get(before[-1]) if before else None
        # (a question scored 0, the last of the only leg that found it, gives nothing to credit)
        if question is not None and question.score > 0 and asks(question.source.get("text") or ""):
            credits.append((hit, question, weight * question.score))
    for hit, question, credit in credits:
        hit.reply_credit, hit.replies_to = credit, question.id
        hit.score += credit
