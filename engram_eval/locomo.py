"""Evidence recall on LoCoMo-format conversations, through the real services against the real cluster.

One conversation is one end-user, each turn an episode dated by its session; a question's R@k is
the share of its evidence turns in the top k (categories 1-4).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_app.consolidation.services import consolidate_all
from memory_app.recall import memory_recall
from memory_app.recall.options import ranking_config
from memory_app.recall.ranking import RankingConfig
from tenants.models import Subject
from tenants.services.subjects import subject_get_or_create

from .retrieval import Scores, question_scores
from .sandbox import import_by_client_id, sandbox
from .sweep import Sweep, cross_validate, folds_of, mean_of
from tenants.services.keys import KeyLifetimes

LOCOMO_DATE = re.compile(r"^(?P<time>\d{1,2}:\d{2}\s*[ap]m)\s+on\s+(?P<date>\d{1,2}\s+\w+,?\s+\d{4})$", re.I)
_DIA_ID = re.compile(r"D\s*(\d+)\s*:\s*(\d+)", re.I)


def locomo_session_date(raw: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → an aware UTC datetime."""
    m = LOCOMO_DATE.match(raw.strip())
    if not m:
        raise ValueError(f"unrecognised LoCoMo date {raw!r}")
    return datetime.strptime(f"{m['time'].replace(' ', '').upper()} {m['date'].replace(',', '')}",
                             "%I:%M%p %d %B %Y").replace(tzinfo=UTC)


def locomo_turn_id(conversation: str, dia_id: str) -> str:
    """A turn's episode id from its ``dia_id`` ("D3:12"), numbers read as numbers ("D3:012" is
    the same turn), so evidence written either way finds it."""
    if m := _DIA_ID.fullmatch(dia_id.strip()):
        return f"locomo-{conversation}-d{int(m[1])}-{int(m[2])}"
    return f"locomo-{conversation}-{dia_id.replace(':', '-')}".lower()


def locomo_episodes(conversation: str, data: dict, *, context_turns: int = 0) -> list[dict[str, Any]]:
    """Every turn as an episode: 'Speaker: text' (plus the shared photo's caption), dated by its
    session, with its session id. By default no context is sent (Engram derives it, as for any
    agent); ``context_turns`` > 0 is the older client-context mode: the caller sends the turns
    before it in the session as its explicit context."""
    conv = data.get("conversation", data)  # the dev set is flat; the original nests it
    episodes = []
    n = 1
    while f"session_{n}" in conv:
        when = locomo_session_date(conv[f"session_{n}_date_time"])
        turns = conv[f"session_{n}"]
        texts = []
        for turn in turns:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo of {turn['blip_caption']}]"
            texts.append(text)
        for i, turn in enumerate(turns):
            window = texts[max(0, i - context_turns):i] if context_turns else []
            episodes.append({"id": locomo_turn_id(conversation, turn["dia_id"]), "text": texts[i], "occurred_at": when,
                             "session_id": f"session_{n}", "metadata": {"dia_id": turn["dia_id"]},
                             **({"context": "\n".join(window) or None} if context_turns else {})})
        n += 1
    return episodes


def locomo_evidence(conversation: str, evidence: list[str]) -> list[str]:
    ids = [locomo_turn_id(conversation, m[0]) for item in evidence for m in _DIA_ID.finditer(item)]
    return list(dict.fromkeys(ids))


def locomo_questions(conversation: str, data: dict, *, questions: dict | None = None) -> list[tuple[str, str, list[str]]]:
    """(group, question, evidence ids) of a conversation: its own questions of categories 1-4
    ("category N"), or with ``questions`` (a question set such as corpora/temporal_questions.json)
    the set's questions for it instead ("<kind>"), by the file's name ("26" for 26.json)."""
    if questions is not None:
        return [(q["kind"], q["question"], locomo_evidence(conversation, q["evidence"]))
                for q in questions["conversations"].get(conversation, [])]
    return [(f"category {q['category']}", q["question"], locomo_evidence(conversation, q.get("evidence") or []))
            for q in data["qa"] if q.get("category") in (1, 2, 3, 4)]


@dataclass
class _Conversation:
    name: str
    subject: Subject
    turn_of: dict[str, str]
    now: datetime
    questions: list[tuple[str, str, list[str]]]


@contextmanager
def _imported(*, paths: list[Path], context_turns: int, log: Callable[[str], None], consolidate: bool,
              extractor: str | None, dedicated: bool, questions: Path | None) -> Iterator[list[_Conversation]]:
    """Each conversation imported through the import service in one call, as an agent's import
    would, into a sandbox tenant that goes when the block ends."""
    asked_set = json.loads(questions.read_text()) if questions is not None else None
    with sandbox() as box:
        tenant = box.tenant(slug="locomo", name="LoCoMo", dedicated=dedicated)
        conversations = []
        for path in paths:
            data = json.loads(path.read_text())
            conversation = path.stem
            subject = subject_get_or_create(tenant=tenant, external_id=f"conv-{conversation}", actor="eval",
                                            lifetimes=KeyLifetimes.from_settings())
            episodes = locomo_episodes(conversation, data, context_turns=context_turns)
            turn_of = import_by_client_id(
                subject=subject, episodes=[{**e, "occurred_at": e["occurred_at"].isoformat()} for e in episodes])
            if consolidate:
                log(f"  {path.name}: consolidated {consolidate_all(subject=subject, extractor=extractor)}")
            asked = [q for q in locomo_questions(conversation, data, questions=asked_set) if q[2]]
            log(f"  {path.name}: {len(episodes)} turns, {len(asked)} questions")
            conversations.append(_Conversation(conversation, subject, turn_of,
                                               max(e["occurred_at"] for e in episodes), asked))
        yield conversations


def _ask(conversations: list[_Conversation], *, k: int, ranking: RankingConfig | None) -> dict[str, Scores]:
    """Each conversation's questions recalled through its subject's own key, over episodes, ranked
    by ``ranking`` (None: the deployment's)."""
    each: dict[str, Scores] = {}
    for conv in conversations:
        own = each.setdefault(conv.name, Scores())
        for group, question, expected in conv.questions:
            results = memory_recall(subject=conv.subject, query=question, k=k, types=["episodic"], now=conv.now,
                                    ranking=ranking)
            own.add(group, question_scores([conv.turn_of.get(r["id"], r["id"]) for r in results], expected))
    return each


def evaluate_locomo(*, paths: list[Path], k: int = 10, context_turns: int = 0,
                    log: Callable[[str], None] = print, consolidate: bool = False,
                    extractor: str | None = None, dedicated: bool = False,
                    questions: Path | None = None, ranking: RankingConfig | None = None) -> dict[str, Any]:
    """Each conversation goes through the import service in one call, as an agent's import
    would (the default: no client-side context, so Engram derives it); questions are recalled
    through the subject's own key, over episodes (the evidence is turns). ``consolidate``:
    consolidate each conversation first, so that the facts found credit the turns they came from
    (memory_app.recall.rank.facts_credit). ``dedicated``: the conversations' tenant in dedicated
    indices. ``questions``: a question set to ask instead of the files' own (``locomo_questions``).
    ``ranking``: how recall ranks (default: the deployment's; an ablation passes its own).
    With several files, the pooled rows are followed by the mean of the conversations' own
    figures ("mean overall", "mean category 1": each conversation counts once, as held-out
    conversations are judged) and then each conversation's rows ("26 overall")."""
    with _imported(paths=paths, context_turns=context_turns, log=log, consolidate=consolidate,
                   extractor=extractor, dedicated=dedicated, questions=questions) as conversations:
        each = _ask(conversations, k=k, ranking=ranking)
    pooled = Scores()
    for own in each.values():
        for group, figures in own.rows:
            pooled.add(group, figures)
    summary = pooled.summary()
    if len(each) > 1:
        summaries = {conversation: own.summary() for conversation, own in each.items()}
        summary.update({f"mean {group}": values for group, values in mean_of(list(summaries.values())).items()})
        for conversation, own_summary in summaries.items():
            summary.update({f"{conversation} {group}": values for group, values in own_summary.items()})
    return summary


def sweep_locomo(*, paths: list[Path], sweep: Sweep, folds: int, k: int = 10, context_turns: int = 0,
                 log: Callable[[str], None] = print, consolidate: bool = False, extractor: str | None = None,
                 dedicated: bool = False, questions: Path | None = None,
                 ranking: RankingConfig | None = None) -> dict[str, Any]:
    """The conversations, imported once, asked under each value of the ranking field
    ``sweep.setting`` (changed in ``ranking``, default the deployment's), then cross-validated over
    ``folds`` groups of conversations (``engram_eval.sweep.cross_validate``). Raises ValueError on
    bad folds."""
    groups = folds_of([p.stem for p in paths], folds)
    base = ranking or ranking_config()
    figures: list[dict[str, dict[str, dict[str, float]]]] = []
    with _imported(paths=paths, context_turns=context_turns, log=log, consolidate=consolidate,
                   extractor=extractor, dedicated=dedicated, questions=questions) as conversations:
        for value in sweep.values:
            log(f"  {sweep.setting}={value}")
            each = _ask(conversations, k=k, ranking=base.changed({sweep.setting: value}))
            figures.append({conversation: scores.summary() for conversation, scores in each.items()})
    return {"setting": sweep.setting, "each": figures,
            **cross_validate(values=sweep.values, figures=figures, folds=groups)}
