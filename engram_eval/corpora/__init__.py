"""The eval corpora, written for this project: the recall fixture, the labelled consolidation fixture,
the temporal question set on the LoCoMo development conversations, and the labelled changes of slot
values (our own sentences, and the changes in the LoCoMo development conversations by turn id)."""

from pathlib import Path

CORPORA = Path(__file__).resolve().parent
EVAL_CORPUS = CORPORA / "eval_corpus.json"
CONSOLIDATION_CORPUS = CORPORA / "consolidation_corpus.json"
TEMPORAL_QUESTIONS = CORPORA / "temporal_questions.json"
CHANGES = CORPORA / "changes.json"
LOCOMO_CHANGES = CORPORA / "locomo_changes.json"
