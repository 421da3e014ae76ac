"""English read without a model: time expressions, WordNet concepts, sentences, question grammar."""
