"""Rank: the searched legs fused into one score per memory, weighted, credited and ordered.

    score = (fused + fact credit) × time_decay × use_count × catalog_prior × outcome × time_window
            × time_answer × session × speaker × to_listener × intent  (+ reply and neighbour credit)

Pure functions of the hits and one ``RecallOptions``; docs/retrieval-quality.md, "How recall
ranks", says why each part is there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from engram_core.es.schema import MemoryType
from language.temporal import TimeWindow, stored_ranges
from language.words import distinct_words, to_listener, without_stopwords
from language.concepts import tells_activity, wordnet
from memory_app.recall.legs import PLAIN_BM25, PLAIN_DENSE, LegId
from memory_app.recall.options import RecallOptions
from memory_app.recall.read import ANSWERED_BY, Reading
from memory_app.recall.search import (
    DATED,
    KINDS,
    SAID_BY_NAMED,
    SYNONYM_IN_TEXT,
    WORD_IN_CONTEXT,
    WORD_IN_TEXT,
    Leg,
    Searched,
    StaleFact,
)

# Each type's date field for time decay; None = exempt.
DECAY_FIELD: dict[MemoryType, str | None] = {
    MemoryType.EPISODIC: "occurred_at",
    MemoryType.SEMANTIC: "last_used_at",
    MemoryType.PROCEDURAL: None,
    MemoryType.CATALOG: None,
}
# A sentence that ends in a question mark (before optional closing quotes or brackets).
_ASKS = re.compile(r"\?[\"'”’)\]]*(?:\s|$)")
# A transcript's line: a name of one to four capitalised words, a colon, the words told.
_SPEAKER = re.compile(r"\s*([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}):\s")
# A reranker: (question, the memories' texts) -> one score per text, higher is better.
Rerank = Callable[[str, list[str]], list[float]]


@dataclass
class Hit:
    """A memory as ranking sees it: its ranks in the legs, its fused score, then its multipliers,
    reply credit and final score."""

    id: str
    memory_type: MemoryType
    source: dict[str, Any]
    bm25_rank: int | None = None
    dense_rank: int | None = None
    fused: float = 0.0
    fusion: str = "rrf"  # how ``fused`` was computed (``hits_fuse``)
    multipliers: dict[str, float] = field(default_factory=dict)
    rerank_score: float | None = None
    rerank_rank: int | None = None
    score: float = 0.0
    extra_ranks: dict[str, int] = field(default_factory=dict)  # ranks in the entity legs
    dense_passage: int | None = None  # the passage an episode's dense rank came from, if one did (explain only)
    matched: frozenset[str] = frozenset()  # the named clauses its lexical legs report it matches
    fact_credit: float = 0.0  # added to ``fused`` for a fact found that was distilled from it (``facts_credit``)
    credited_by: str | None = None
    reply_credit: float = 0.0  # added to the score for answering a candidate that asks (``reply_credit``)
    replies_to: str | None = None
    stale_fact: StaleFact | None = None  # the superseded fact this hit tells (``stale_episodes``, ``ended_facts``)
    stale_as: str | None = None  # "told": an episode that told its value; "ended": a fact naming only its end
    neighbour_credit: float = 0.0  # added to the score for a session neighbour among the candidates (``neighbour_credit``)
    neighbour: str | None = None
    placed: str | None = None  # "below" / "above": a stale hit placed by the hit holding the current value
    placed_by: str | None = None  # that hit (``below_successors``, ``above_successors``)
    placed_kind: str | None = None  # why the value changed: the replacing fact's contradiction (natural, harsh, fulfilled)


@dataclass(frozen=True)
class Ranked:
    """The first k hits, best first, and for each the ids of its copies left out (``without_copies``)."""

    hits: list[Hit]
    copies: dict[str, list[str]]


def hits_rank(searched: Searched, *, reading: Reading, now: datetime, k: int, exclude: str = "",
              rerank: Rerank | None = None, options: RecallOptions) -> Ranked:
    """The ``k`` best memories the search found: fused (``hits_fuse``, with the credit of the facts
    found, ``facts_credit``), reordered by ``rerank`` when given, weighted by every multiplier,
    credited for replies (``reply_credit``) and session neighbours (``neighbour_credit``), sorted (ties by id), of the types the search may
    return, without ``exclude`` and without copies (``without_copies``). A reranker's order
    replaces the fused one (as 1 / (rank constant + rerank rank), so scores stay positive and
    comparable)."""
    hits = hits_fuse(searched, options=options)
    if rerank is not None:
        pool = rerank_pool([h for h in hits if h.memory_type in searched.returned], options=options)
        hits = reranked(pool, rerank(reading.query, [rerank_text(h) for h in pool]))
    sessions = sessions_covered(hits, searched.idf, options=options)
    stale = stale_episodes(searched)
    ended = ended_facts(hits, searched) if options.ended_below else {}
    for hit in hits:
        hit.stale_fact = stale.get(hit.id) or ended.get(hit.id)
        hit.stale_as = "told" if hit.id in stale else "ended" if hit.id in ended else None
        hit.multipliers = multipliers_for(hit, now=now, reading=reading, sessions=sessions, options=options)
        base = 1.0 / (options.rank_constant + hit.rerank_rank) if hit.rerank_rank is not None else hit.fused
        hit.score = base * math.prod(hit.multipliers.values())
    reply_credit(hits, weight=options.reply_credit)
    neighbour_credit(hits, weight=options.neighbour_credit)
    # last: no credit may move a stale hit back across the value that replaced it
    if not reading.asks_past:
        below_successors(hits, searched.stale)
        if reading.says_now and (asked_of := nearest_stale(searched)) is not None:
            replacement_first(hits, asked_of, searched.stale)
    elif options.past_above:
        # a value that had ended by the end of the period the question names is not what held then
        below_successors(hits, searched.stale, only=lambda h: not held_then(h, reading))
        above_successors(hits, only=lambda h: held_then(h, reading))
        if reading.before_what:
            before_named(hits, searched.stale, reading.before_what)
    ordered = [h for h in sorted(hits, key=lambda h: (-h.score, PLACED_ORDER.get(h.placed or "", 0), h.id))
               if h.id != exclude and h.memory_type in searched.returned]
    return without_copies(ordered, k=k, collapse=options.collapse_copies)


# ---------------------------------------------------------------- fusion


def hits_fuse(searched: Searched, *, options: RecallOptions) -> list[Hit]:
    """One hit per memory any leg found, in the order first found, with its fused score: by
    reciprocal rank (Σ weight / (rank constant + rank)), or under linear fusion by normalised
    score (a dense leg's similarity min-max normalised, a lexical leg's ``lexical_score`` as
    ``lexical_normalised`` says), each leg at its factor × ``leg_weight``; then the credit of the
    facts found (``facts_credit``). A leg over the crediting types (``LegRole.CREDIT``) is valued on
    the scale of the leg it shadows, so that a fact and its episode compare."""
    fusion = options.fusion
    k = options.rank_constant
    hits: dict[str, Hit] = {}
    values_by_leg: dict[LegId, dict[str, float]] = {}
    dense_scores = {leg.id: [raw["_score"] for raw in leg.hits] for leg in searched.legs if leg.dense}
    for leg in searched.legs:
        raws = leg.hits
        weight = leg.factor * leg_weight(leg, options=options)
        shadows = leg.id.shadows
        if fusion == "linear":
            if leg.dense:
                normalised = minmax([raw["_score"] for raw in raws], over=dense_scores.get(shadows))
            else:  # ranked by its own score, ties by id: no index-wide statistic orders the leg
                scored = sorted(((lexical_score(raw, searched.idf, options=options), raw) for raw in raws),
                                key=lambda pair: (-pair[0], pair[1]["_id"]))
                raws = [raw for _, raw in scored]
                normalised = lexical_normalised([v for v, _ in scored], searched.idf, options=options)
            values = [weight * v for v in normalised]
        else:
            values = [weight / (k + rank) for rank in range(1, len(raws) + 1)]
        for rank, (raw, value) in enumerate(zip(raws, values, strict=True), start=1):
            hit = hits.get(raw["_id"]) or hits.setdefault(raw["_id"], Hit(
                id=raw["_id"], memory_type=MemoryType(raw["_source"]["memory_type"]),
                source=searched.sources[raw["_id"]], fusion=fusion))
            if leg.id == PLAIN_BM25:
                hit.bm25_rank = rank
            elif leg.id == PLAIN_DENSE:
                hit.dense_rank = rank
                hit.dense_passage = leg.passages.get(raw["_id"])
            else:
                hit.extra_ranks[leg.name] = rank
            hit.fused += value
            if not leg.dense:
                hit.matched |= frozenset(raw.get("matched_queries") or ())
            values_by_leg.setdefault(shadows, {})[raw["_id"]] = value
    facts_credit(hits, values_by_leg, weight=options.fact_credit)
    return list(hits.values())


def facts_credit(hits: dict[str, Hit], values_by_leg: dict[LegId, dict[str, float]], *, weight: float) -> None:
    """Credit each episode that a fact found was distilled from (its ``supporting_episode_ids``):
    in every leg where ``weight`` (ENGRAM_FACT_CREDIT) × the fact's value exceeds the episode's
    own, the episode gains the difference, as if it held the fact's words and sentence at that
    weight; of several facts, the one that gives most. A fact says what its episode said in other
    words (a name for "I", a date for "yesterday"), so a question may meet the fact where it
    misses the episode. Only episodes among the hits are credited."""
    if weight <= 0:
        return
    for fact in [h for h in hits.values() if h.memory_type is MemoryType.SEMANTIC]:
        for episode_id in fact.source.get("supporting_episode_ids") or ():
            episode = hits.get(episode_id)
            if episode is None or episode.memory_type is not MemoryType.EPISODIC:
                continue
            gain = sum(max(0.0, weight * values.get(fact.id, 0.0) - values.get(episode_id, 0.0))
                       for values in values_by_leg.values())
            if gain > episode.fact_credit:
                episode.fused += gain - episode.fact_credit
                episode.fact_credit, episode.credited_by = gain, fact.id


def leg_weight(leg: Leg, *, options: RecallOptions) -> float:
    """A leg's weight: the dense weight for a kNN leg, the BM25 weight for a lexical one."""
    if options.fusion == "linear":
        return options.linear_dense_weight if leg.dense else options.linear_bm25_weight
    return options.rrf_dense_weight if leg.dense else options.rrf_bm25_weight


def lexical_score(raw: dict, idf: dict[str, float], *, options: RecallOptions) -> float:
    """A lexical hit's score for linear fusion: the idf of each question word its text holds; for
    a word its text does not hold, the largest of ENGRAM_CONTEXT_BOOST × its idf if its context
    holds it, ENGRAM_SYNONYM_WEIGHT × its idf if its text holds a synonym of it and
    ENGRAM_OWN_NAME_WEIGHT × its idf if the word names the end-user and the hit is an episode they
    said; plus ENGRAM_CONCEPT_BOOST × the idf of the asked kinds if its concepts hold one, and the
    idf of the question's period if the hit is an episode dated in it (``search.dated_query``)."""
    matched = set(raw.get("matched_queries") or ())
    score = 0.0
    for name, value in idf.items():
        if name == KINDS:
            score += options.concept_boost * value if name in matched else 0.0
        elif name == DATED:  # the question's date, which an episode dated in its period holds
            score += value if name in matched else 0.0
        elif name in matched:
            score += value
        else:
            n = name.removeprefix(WORD_IN_TEXT)
            score += value * max(options.context_boost if f"{WORD_IN_CONTEXT}{n}" in matched else 0.0,
                                 options.synonym_weight if f"{SYNONYM_IN_TEXT}{n}" in matched else 0.0,
                                 options.own_name_weight if f"{SAID_BY_NAMED}{n}" in matched else 0.0)
    return score


def lexical_ceiling(idf: dict[str, float], *, options: RecallOptions) -> float:
    """The lexical score of a memory holding every word of the question in its text and one of
    the asked kinds (``lexical_score``'s largest)."""
    return lexical_score({"matched_queries": list(idf)}, idf, options=options)


def minmax(scores: list[float], *, over: list[float] | None = None) -> list[float]:
    """Scores rescaled to [0, 1] over the range of ``over`` (default: their own; values outside it
    are clipped); all 1.0 when that range is a point (a leg's only match, or a tie, is its best)."""
    over = scores if over is None or not over else over
    low, high = min(over, default=0.0), max(over, default=0.0)
    return [min(1.0, max(0.0, (value - low) / (high - low))) if high > low else 1.0 for value in scores]


def lexical_normalised(scores: list[float], idf: dict[str, float], *, options: RecallOptions) -> list[float]:
    """A lexical leg's scores in [0, 1]: "coverage", each as a share of ``lexical_ceiling`` (a
    memory holding one rare word of a long question scores that word's share, even when nothing
    better matched); "minmax", over the leg's own range."""
    if options.lexical_norm == "minmax":
        return minmax(scores)
    ceiling = lexical_ceiling(idf, options=options)
    return [value / ceiling if ceiling > 0 else 0.0 for value in scores]


# ---------------------------------------------------------------- an optional reranker's order


def rerank_pool(hits: list[Hit], *, options: RecallOptions) -> list[Hit]:
    """The fused hits a reranker sees: the ENGRAM_RERANK_POOL best."""
    return sorted(hits, key=lambda h: -h.fused)[: options.rerank_pool]


def rerank_text(hit: Hit) -> str:
    """What a reranker reads of a memory."""
    src = hit.source
    if hit.memory_type is MemoryType.PROCEDURAL:
        return f"{src.get('trigger', '')}\n{src.get('steps', '')}"
    if hit.memory_type is MemoryType.CATALOG:
        return f"{src.get('title', '')}\n{src.get('text', '')}"
    return src.get("text", "")


def reranked(pool: list[Hit], scores: list[float]) -> list[Hit]:
    """``pool`` with the reranker's ``scores`` (one per hit, in order) and its ranks."""
    for rank, (hit, value) in enumerate(sorted(zip(pool, scores, strict=True), key=lambda p: -p[1]), start=1):
        hit.rerank_score, hit.rerank_rank = float(value), rank
    return pool


# ---------------------------------------------------------------- multipliers, reply credit, copies


def multipliers_for(hit: Hit, *, now: datetime, reading: Reading, options: RecallOptions,
                    sessions: dict[str, float] | None = None) -> dict[str, float]:
    """Each factor that applies to ``hit``, by name (as ``explain`` shows them). ``sessions``: the
    share of the question each session's candidate episodes hold together (``sessions_covered``)."""
    src = hit.source
    factors: dict[str, float] = {}
    if date_field := DECAY_FIELD[hit.memory_type]:
        raw = src.get(date_field) or src.get("created_at")
        factors["time_decay"] = gauss_decay(value=datetime.fromisoformat(raw) if raw else None, origin=now,
                                            options=options)
    episode = hit.memory_type is MemoryType.EPISODIC
    window = reading.time_window
    if window is not None and episode and (raw := src.get("occurred_at")) and \
            in_window(window, told=datetime.fromisoformat(raw),
                      named=list(stored_ranges(src.get("event_dates"))) if options.event_dates else [],
                      grace=timedelta(days=options.temporal_grace_days)):
        factors["time_window"] = 1.0 + options.temporal_boost
    if reading.asks_time and episode and src.get("states_time"):
        factors["time_answer"] = 1.0 + options.time_answer_boost
    if reading.asks_activity and episode and tells_activity(src.get("text") or "", net=wordnet(options.wordnet_dir or None)):
        factors["activity_answer"] = 1.0 + options.activity_answer_boost
    if sessions and episode and (covered := sessions.get(src.get("session_id") or "")):
        factors["session"] = 1.0 + options.session_coverage * covered
    said = speaker_of(src.get("text") or "") if episode else None
    if options.speaker_weight and said and said.casefold() in {e.casefold() for e in reading.entities}:
        factors["speaker"] = 1.0 + options.speaker_weight
    # Only a transcript's line between people: an end-user's own turn to an agent asks for what they
    # need ("Can I mount the camera with strips?"), and is the memory a later question looks for.
    if options.listener_weight and said and to_listener(src.get("text") or ""):
        factors["to_listener"] = 1.0 - options.listener_weight
    if reading.intent is not None and hit.memory_type in ANSWERED_BY[reading.intent]:
        factors["intent"] = 1.0 + options.intent_boost
    if episode and hit.stale_fact is not None:
        if reading.asks_past and held_then(hit, reading):
            if options.past_boost:
                factors["was_true"] = 1.0 + options.past_boost
        elif options.superseded_weight != 1.0:
            factors["superseded"] = options.superseded_weight
    if hit.memory_type is MemoryType.SEMANTIC:
        factors["use_count"] = 1.0 + options.use_count_weight * math.log10(1 + int(src.get("use_count") or 0))
    if hit.memory_type is MemoryType.CATALOG:
        factors["catalog_prior"] = options.catalog_prior
    if hit.memory_type is MemoryType.PROCEDURAL:
        factors["outcome"] = outcome_multiplier(successes=int(src.get("success_count") or 0),
                                                failures=int(src.get("failure_count") or 0),
                                                weight=options.outcome_weight)
    return factors


BELOW = 0.99  # a stale hit's score at most this share of the current value's best hit's
# A placed stale hit that ties the hit it was placed by (both scored 0, the last of a min-max
# normalised leg) still sorts on its side of it.
PLACED_ORDER = {"above": -1, "below": 1}


def _successors(fact: StaleFact, stale: tuple[StaleFact, ...]) -> set[str]:
    """The ids of the facts that replaced ``fact``, down its chain as far as the superseded facts
    searched tell it (Hue bridge -> SmartThings -> Home Assistant: the current one is the last)."""
    by_id = {f.id: f for f in stale}
    out: set[str] = set()
    todo = list(fact.superseded_by)
    while todo:
        i = todo.pop()
        if i not in out:
            out.add(i)
            todo.extend(by_id[i].superseded_by if i in by_id else ())
    return out


def _current_value(hit: Hit, by_id: dict[str, Hit], stale: tuple[StaleFact, ...]) -> list[Hit]:
    """The hits holding the value that replaced ``hit``'s (``_replacing``), ``hit`` aside."""
    assert hit.stale_fact is not None
    return [h for h in _replacing(hit.stale_fact, by_id, stale) if h.id != hit.id]


def _replacing(fact: StaleFact, by_id: dict[str, Hit], stale: tuple[StaleFact, ...]) -> list[Hit]:
    """The hits holding the value that replaced ``fact``'s: the facts that superseded it
    (down the chain when ``stale`` is given, else only the next), the turns they were distilled
    from (the turn that told the change) and the other current facts of those turns ("I'm at the
    Lantern Bakery now" beside "handed in my notice at Grindhouse"); no stale hit."""
    successors = [by_id[i] for i in (_successors(fact, stale) if stale else fact.superseded_by) if i in by_id]
    told = {e for s in successors for e in s.source.get("supporting_episode_ids") or ()}
    told_too = [h for h in by_id.values() if h.memory_type is MemoryType.SEMANTIC and
                (cites := set(h.source.get("supporting_episode_ids") or ())) and cites <= told]
    return [h for h in {x.id: x for x in [*successors, *told_too, *(by_id[e] for e in told if e in by_id)]}.values()
            if h.stale_as is None]


def nearest_stale(searched: Searched) -> StaleFact | None:
    """The superseded fact nearest the question when it is nearer than every current fact the
    dense legs found: the value the question asks for is one that changed."""
    if not searched.stale:
        return None
    fact = max(searched.stale, key=lambda f: (f.similarity, f.id))
    current = max((float(raw["_score"]) for leg in searched.legs if leg.dense for raw in leg.hits
                   if raw["_source"].get("memory_type") == MemoryType.SEMANTIC.value), default=0.0)
    return fact if fact.similarity > current else None


def replacement_first(hits: list[Hit], fact: StaleFact, stale: tuple[StaleFact, ...]) -> None:
    """For a question that says it asks about now (``Reading.says_now``) and is nearest a superseded
    fact (``nearest_stale``): the best hit holding the value that replaced it ranks first, a
    replacing fact before a turn. Turns about the old state that no superseded fact cites ("Max
    and Daisy" beside "my two dogs") otherwise outrank a change told in other words ("adopted a
    pup"). Its ``current_value`` multiplier says by how much."""
    current = _replacing(fact, {h.id: h for h in hits}, stale)
    facts = [h for h in current if h.memory_type is MemoryType.SEMANTIC]
    # a fact of the change naming only the old value's names and numbers ("Patrick and Claire
    # divorced in 2024.") tells its end, not what replaced it: the turn that told both answers better
    chain = _successors(fact, stale)
    old = " ".join([fact.text, *(f.text for f in stale if f.id in chain)])
    told_new = [h for h in facts if not _names_only_old(h.source.get("text") or "", old)]
    turns = [h for h in current if h.memory_type is not MemoryType.SEMANTIC]
    pool = told_new or turns or facts
    if not pool:
        return
    best = max(pool, key=lambda h: (h.score, h.id))
    top = max(h.score for h in hits)
    if top > 0 and any(h.score >= best.score for h in hits if h is not best):  # a tie sorts by id
        lifted = top / BELOW
        if best.score > 0:
            best.multipliers["current_value"] = lifted / best.score
        best.score = lifted


def _names_only_old(text: str, old: str) -> bool:
    """Whether ``text`` names a name of the values in ``old`` and no name but numbers and words of
    ``old`` (the person's own name opens it there)."""
    names = {n for n in _value_names(text) if not n[0].isdigit()}
    return bool(names & _value_names(old)) and names <= _words_of(old)


def held_then(hit: Hit, reading: Reading) -> bool:
    """Whether ``hit``'s superseded value still held at the end of the period the question asks
    about (``Reading.past_until``): "What had Sam changed by late July 2023?" is not answered by a
    value replaced on 27 July. True for a question asking about before in a word, or an unknown end."""
    if reading.past_until is None or hit.stale_fact is None or not hit.stale_fact.valid_to:
        return True
    ended = datetime.fromisoformat(hit.stale_fact.valid_to)
    return (ended if ended.tzinfo else ended.replace(tzinfo=UTC)) > reading.past_until


def below_successors(hits: list[Hit], stale: tuple[StaleFact, ...] = (),
                     only: Callable[[Hit], bool] | None = None) -> None:
    """For a question about now: a stale hit (an episode whose value stopped being true, or a fact
    naming only that value's end) ranks below the best hit that holds the value which replaced it
    (the superseding fact, or a turn it was distilled from), whatever the scales of the legs made
    of their scores, a score of 0 included (``PLACED_ORDER`` breaks the tie). Its ``superseded``
    multiplier then says by how much in all, and ``placed_by`` names that hit."""
    by_id = {h.id: h for h in hits}
    for hit in hits:
        if hit.stale_fact is None or not (hit.memory_type is MemoryType.EPISODIC or hit.stale_as == "ended"):
            continue
        if only is not None and not only(hit):
            continue
        current = _current_value(hit, by_id, stale)
        if not current:
            continue
        best = max(current, key=lambda h: (h.score, h.id))
        if hit.score >= best.score:
            capped = best.score * BELOW
            if hit.score > 0:
                hit.multipliers["superseded"] = hit.multipliers.get("superseded", 1.0) * capped / hit.score
            hit.score, hit.placed, hit.placed_by = capped, "below", best.id
            hit.placed_kind = _kind_of(current)


def above_successors(hits: list[Hit], only: Callable[[Hit], bool] | None = None) -> None:
    """For a question about the past, the mirror of ``below_successors``: a stale hit (an episode
    that told a value which stopped being true, or a fact naming only that value) ranks above the
    best hit holding the value that replaced it next
    ("What pet did Agnes have before Bess?": the turn about Tiger above "Bess"; in a chain, the value
    just before the current one), in the order of their own scores, a score of 0 included. Its
    ``was_true`` multiplier then says by how much in all (a score of 0 has no multiplier: it takes
    that hit's score and the tie goes its way), and ``placed_by`` names that hit."""
    by_id = {h.id: h for h in hits}
    for hit in hits:
        if hit.stale_fact is None or (only is not None and not only(hit)):
            continue
        current = _current_value(hit, by_id, ())
        if not current:
            continue
        best = max(current, key=lambda h: (h.score, h.id))
        if best.score >= hit.score:
            lifted = best.score + hit.score * (1 - BELOW)
            if hit.score > 0:
                hit.multipliers["was_true"] = hit.multipliers.get("was_true", 1.0) * lifted / hit.score
            hit.score, hit.placed, hit.placed_by = lifted, "above", best.id
            hit.placed_kind = _kind_of(current)


def _root(word: str) -> str:
    """``word`` without a plural or a possessive: "agencies" and "agency" are one."""
    word = word.casefold().removesuffix("'s").removesuffix("’s")
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def _roots(text: str) -> set[str]:
    return {_root(w) for w in distinct_words(without_stopwords(text))}


def named_value(named: str, stale: tuple[StaleFact, ...], hits: list[Hit]) -> str | None:
    """The id of the fact of a changed value that ``named`` names (the words after "before"): of the
    superseded facts and the current facts that replaced one, the one sharing the most words with
    it, when only one does."""
    words = _roots(named)
    successors = {i for f in stale for i in f.superseded_by}
    texts = {f.id: f.text for f in stale} | {h.id: h.source.get("text") or "" for h in hits
                                             if h.id in successors and h.stale_as is None}
    shared = sorted(((len(words & _roots(t)), i) for i, t in texts.items()), reverse=True)
    if not shared or shared[0][0] == 0 or (len(shared) > 1 and shared[1][0] == shared[0][0]):
        return None
    return shared[0][1]


def before_named(hits: list[Hit], stale: tuple[StaleFact, ...], named: str) -> None:
    """For a question asking for the value just before a named one ("Where was Sofia working just
    before Harbour Books?"): the best hit that told the value that the named one replaced ranks above
    every hit holding another value of the same chain (the values before it too, which
    ``above_successors`` leaves as the legs put them). Its ``was_true`` multiplier says by how much in
    all, and ``placed_by`` names the hit it was placed above."""
    target = named_value(named, stale, hits)
    wanted = next((f for f in stale if target in f.superseded_by), None)
    if wanted is None:
        return
    # the turns that told it, or the facts of those turns that name it (``ended_facts``)
    told = [h for h in hits if h.stale_fact is not None and h.stale_fact.id == wanted.id]
    if not told:
        return
    best = max(told, key=lambda h: (h.score, h.id))
    chain = _successors(wanted, stale) | {f.id for f in stale if wanted.id in _successors(f, stale)}
    by_id = {h.id: h for h in hits}
    others = [h for h in hits if h.stale_fact is not None and h.stale_fact.id in chain] + \
        [h for h in _replacing(wanted, by_id, stale)]
    rival = max((h for h in others if h is not best), key=lambda h: (h.score, h.id), default=None)
    if rival is None or rival.score < best.score:
        return
    lifted = rival.score / BELOW if rival.score > 0 else 0.0
    if best.score > 0:
        best.multipliers["was_true"] = best.multipliers.get("was_true", 1.0) * lifted / best.score
    best.score, best.placed, best.placed_by = lifted, "above", rival.id
    best.placed_kind = _kind_of(_replacing(wanted, by_id, ()))


def _kind_of(current: list[Hit]) -> str | None:
    """The contradiction of the fact among ``current`` that replaced the value (a plan that came true
    is ``fulfilled``), when one of them is that fact."""
    return next((h.source["contradiction"] for h in current if h.source.get("contradiction")), None)


# A value's names in a fact: a capitalised word that does not open a sentence, or a number.
_VALUE_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'’-]+|\d+(?:[.:]\d+)?)")
_WORDS = re.compile(r"[\w'’-]+")


def _value_names(text: str) -> set[str]:
    return {m.group(1).casefold().removesuffix("'s").removesuffix("’s") for m in _VALUE_NAME.finditer(text)}


def _words_of(text: str) -> set[str]:
    return {w.casefold().removesuffix("'s").removesuffix("’s") for w in _WORDS.findall(text)}


def ended_facts(hits: list[Hit], searched: Searched) -> dict[str, StaleFact]:
    """Current facts that tell only the end of a value which stopped being true, by the superseded
    fact near the question whose value they name: distilled from the turns of that fact or of the
    facts that replaced it, naming a name of the old value and no name the old fact lacks ("Helen no
    longer lives in Oxford." beside "Helen bought a house in Abingdon." once the change replaced
    "Helen lives in Oxford."). For a question about now they answer with the old value; the
    fact that replaced it may be one of them (the clause that told the change told only the end)."""
    by_id = {h.id: h for h in hits}
    out: dict[str, StaleFact] = {}
    if not searched.stale:
        return out
    # Each fact's words and names once, not once per superseded fact.
    facts = [(h, cites, _words_of(text), _value_names(text)) for h in hits
             if h.memory_type is MemoryType.SEMANTIC and (cites := set(h.source.get("supporting_episode_ids") or ()))
             for text in [h.source.get("text") or ""]]
    for fact in sorted(searched.stale, key=lambda f: -f.similarity):
        successors = [by_id[i] for i in _successors(fact, searched.stale) if i in by_id]
        if not successors:
            continue
        old_words, old_names = _words_of(fact.text), _value_names(fact.text)
        told = set(fact.supporting_episode_ids) | {
            e for s in successors for e in s.source.get("supporting_episode_ids") or ()}
        for hit, cites, words, names in facts:
            if hit.id not in out and cites <= told and words & old_names and not names - old_words:
                out[hit.id] = fact
    return out


def stale_episodes(searched: Searched) -> dict[str, StaleFact]:
    """The episodes whose value stopped being true for this question: each is cited by a
    superseded fact near the question (``Searched.stale``) that is nearer than every current fact
    found that cites it ("Our provider is Virgin Media." once "switched to BT" replaced its fact;
    not the turn that also gave a current fact the question is about). An episode the superseding
    fact cites too (the turn that said the change) is not stale."""
    if not searched.stale:
        return {}
    current: dict[str, float] = {}
    for leg in searched.legs:
        if not leg.dense:
            continue
        for raw in leg.hits:
            if raw["_source"].get("memory_type") == MemoryType.SEMANTIC.value:
                for episode_id in raw["_source"].get("supporting_episode_ids") or ():
                    current[episode_id] = max(current.get(episode_id, 0.0), float(raw["_score"]))
    successors = {i for fact in searched.stale for i in fact.superseded_by}
    successor_support = {e for leg in searched.legs for raw in leg.hits if raw["_id"] in successors
                         for e in raw["_source"].get("supporting_episode_ids") or ()}
    out: dict[str, StaleFact] = {}
    for fact in sorted(searched.stale, key=lambda f: -f.similarity):
        for episode_id in fact.supporting_episode_ids:
            if episode_id in out or episode_id in successor_support:
                continue
            if fact.similarity > current.get(episode_id, 0.0):
                out[episode_id] = fact
    return out


def in_window(window: TimeWindow, *, told: datetime, named: list[tuple[date, date]], grace: timedelta) -> bool:
    """Whether an episode told at ``told``, whose words name the days ``named``, is dated in
    ``window``: told in it, or naming a day of it, or (naming none) told up to ``grace`` after it
    (an event is told after it happened, seldom before). An episode that names other days is about
    them, however soon after the window it was told."""
    return window.contains(told, grace=timedelta(0)) or window.overlaps(named) or \
        (not named and window.contains(told, grace=grace))


def sessions_covered(hits: list[Hit], idf: dict[str, float], *, options: RecallOptions) -> dict[str, float]:
    """By session, the share of the question (its lexical score over ``lexical_ceiling``) that the
    session's candidate episodes hold together: a session about the question holds its words
    across several turns, where each turn holds few. Empty without linear fusion's word counts."""
    if options.session_coverage <= 0 or not idf:
        return {}
    ceiling = lexical_ceiling(idf, options=options)
    held: dict[str, set[str]] = {}
    for hit in hits:
        if hit.memory_type is MemoryType.EPISODIC and (session := hit.source.get("session_id")):
            held.setdefault(session, set()).update(hit.matched)
    if ceiling <= 0:
        return {}
    return {session: lexical_score({"matched_queries": list(names)}, idf, options=options) / ceiling
            for session, names in held.items()}


def gauss_decay(*, value: datetime | None, origin: datetime, options: RecallOptions) -> float:
    """Elasticsearch's gauss decay: 1 within ``offset`` of the origin, ``decay`` at offset + scale."""
    if value is None:
        return 1.0
    offset = options.decay_offset_days * 86400.0
    scale = options.decay_scale_days * 86400.0
    distance = max(0.0, abs((origin - value).total_seconds()) - offset)
    sigma_sq = -(scale**2) / (2.0 * math.log(options.decay_decay))
    return math.exp(-(distance**2) / (2.0 * sigma_sq))


def outcome_multiplier(*, successes: int, failures: int, weight: float) -> float:
    """1 ± ``weight`` (ENGRAM_OUTCOME_WEIGHT), by the posterior mean of a Beta(1, 1) prior updated
    with the playbook's outcomes (exactly 1.0 for an untried playbook or an even record)."""
    mean = (1.0 + successes) / (2.0 + successes + failures)
    return 1.0 + weight * (2.0 * mean - 1.0)


def speaker_of(text: str) -> str | None:
    """Who tells ``text``, where it is a transcript's line ("Maria: I ..."): the name before the colon."""
    found = _SPEAKER.match(text)
    return found.group(1) if found else None


def asks(text: str) -> bool:
    """Whether ``text`` asks a question: one of its sentences ends with a question mark."""
    return bool(_ASKS.search(text))


def reply_credit(hits: list[Hit], *, weight: float) -> None:
    """Add ``weight`` (ENGRAM_REPLY_CREDIT) × its question's score to every episode whose
    predecessor in its session (the last of its ``context_ids``) is a candidate that asks a
    question. Credits come from the scores before any credit, so they do not chain along a session."""
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


def neighbour_credit(hits: list[Hit], *, weight: float) -> None:
    """Add ``weight`` (``neighbour_credit``) × the best score among an episode's session
    neighbours that are candidates: the turns before it in its ``context_ids`` and the turns whose
    ``context_ids`` name it. A conversation tells one thing over consecutive turns, and a question
    about it meets some of them; credits come from the scores before any neighbour credit, so they
    do not chain along a session."""
    if weight <= 0:
        return
    by_id = {hit.id: hit for hit in hits if hit.memory_type is MemoryType.EPISODIC}
    neighbours: dict[str, set[str]] = {}
    for hit in by_id.values():
        for before in hit.source.get("context_ids") or ():
            if before in by_id and before != hit.id:
                neighbours.setdefault(hit.id, set()).add(before)
                neighbours.setdefault(before, set()).add(hit.id)
    credits: list[tuple[Hit, Hit]] = []
    for hit_id, near in neighbours.items():
        # the best neighbour, ties by id so that the credit does not depend on the legs' order
        best = max((by_id[n] for n in near), key=lambda h: (h.score, h.id))
        if best.score > 0:
            credits.append((by_id[hit_id], best))
    for hit, best in credits:
        hit.neighbour_credit, hit.neighbour = weight * best.score, best.id
    for hit, _best in credits:  # after every credit is read, so that none feeds another
        hit.score += hit.neighbour_credit


def _content(hit: Hit) -> tuple:
    """What a memory says as a recall returns it, compared case- and spacing-blind: a copy says
    nothing its original does not. (An episode's derived context is never returned; a context the
    client sent is, so it counts, and so does who said it.)"""
    fields = (("title", "text") if hit.memory_type is MemoryType.CATALOG
              else ("trigger", "steps", "refined_steps", "text", "context", "role"))
    return hit.memory_type, *(" ".join(str(hit.source.get(f) or "").split()).casefold() for f in fields)


def without_copies(ranked: list[Hit], *, k: int, collapse: bool = True) -> Ranked:
    """The first ``k`` of ``ranked`` that are not a copy of a memory ranked above them (the same
    type and text: a user who said "Is that why?" on four days has four episodes), and for each
    kept memory the ids of its copies among them, best first. The copies stay stored, dated and
    each recallable on its own terms; ``collapse`` False keeps them in the list."""
    if not collapse:
        return Ranked(hits=ranked[:k], copies={})
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
    return Ranked(hits=kept, copies=copies)
