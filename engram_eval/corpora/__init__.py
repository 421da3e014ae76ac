"""The eval corpora, written for this project: the recall fixture, the labelled consolidation fixture and
the temporal question set on the LoCoMo development conversations."""

from pathlib import Path

CORPORA = Path(__file__).resolve().parent
EVAL_CORPUS = CORPORA / "eval_corpus.json"
CONSOLIDATION_CORPUS = CORPORA / "consolidation_corpus.json"
TEMPORAL_QUESTIONS = CORPORA / "temporal_questions.json"
