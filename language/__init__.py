"""English read without a model: words and stop words, names, time expressions, WordNet concepts,
sentences, question grammar."""
