"""A deterministic, offline embedder by feature hashing.

Word unigrams, bigrams and character trigrams are hashed (blake2b, stable across processes, unlike
Python's salted `hash`) into signed buckets. Texts sharing words land near each other, which is
enough for tests and quick starts; it knows no synonyms, which is what `minilm` is for.

Hashing every feature of every text is the embedder's whole cost, and the same words recur in
nearly every text of a run, so each word's buckets (its unigram and its trigrams) and each
bigram's bucket are hashed once and kept. The kept buckets are added in the order the features
come, so a vector is the same float for float whether its words were cached or not.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from simulacra.embeddings.base import normalise_rows

_WORD = re.compile(r"[a-z0-9£%.]+")
UNIGRAM, BIGRAM, TRIGRAM = 1.0, 0.7, 0.3  # feature weights
# Words and bigrams whose buckets are kept; past this the cache starts again (a run's vocabulary is
# far smaller, so this only bounds memory on an endless stream of new words).
MAX_CACHED = 200_000

Buckets = tuple[np.ndarray, np.ndarray]  # (bucket indices, signed float32 weights), in feature order


class HashingEmbedder:
    name = "hashing"

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 8:
            raise ValueError("hashing embedder needs a dimension of at least 8")
        self.dimension = dimension
        self._words: dict[str, tuple[Buckets, Buckets]] = {}  # word -> (unigram, trigrams)
        self._bigrams: dict[str, Buckets] = {}

    def _hash(self, features: list[str], weight: float) -> Buckets:
        indices = np.empty(len(features), dtype=np.intp)
        weights = np.empty(len(features), dtype=np.float32)
        for i, feature in enumerate(features):
            value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
            indices[i] = (value >> 1) % self.dimension
            weights[i] = weight if value & 1 else -weight
        return indices, weights

    def _word(self, word: str) -> tuple[Buckets, Buckets]:
        found = self._words.get(word)
        if found is None:
            if len(self._words) >= MAX_CACHED:
                self._words.clear()
            padded = f"#{word}#"
            trigrams = [f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2)]
            found = (self._hash([f"w:{word}"], UNIGRAM), self._hash(trigrams, TRIGRAM))
            self._words[word] = found
        return found

    def _bigram(self, first: str, second: str) -> Buckets:
        key = f"b:{first} {second}"
        found = self._bigrams.get(key)
        if found is None:
            if len(self._bigrams) >= MAX_CACHED:
                self._bigrams.clear()
            found = self._hash([key], BIGRAM)
            self._bigrams[key] = found
        return found

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dimension, dtype=np.float32)
        words = _WORD.findall(text.lower())
        if not words:
            return vec
        per_word = [self._word(w) for w in words]
        # Unigrams, then bigrams, then trigrams: the order the features were always added in, so
        # a bucket that several features share sums them in the same order (float32 sums are not
        # associative).
        parts = [u for u, _ in per_word]
        parts += [self._bigram(a, b) for a, b in itertools.pairwise(words)]
        parts += [t for _, t in per_word]
        indices = np.concatenate([p[0] for p in parts])
        weights = np.concatenate([p[1] for p in parts])
        np.add.at(vec, indices, weights)  # unbuffered: repeated buckets accumulate, in order
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalise_rows(np.stack([self._vector(t) for t in texts]))
