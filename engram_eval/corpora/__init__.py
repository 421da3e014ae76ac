"""The eval corpora, written for this project: the recall fixture and the labelled consolidation fixture."""

from pathlib import Path

CORPORA = Path(__file__).resolve().parent
EVAL_CORPUS = CORPORA / "eval_corpus.json"
CONSOLIDATION_CORPUS = CORPORA / "consolidation_corpus.json"
