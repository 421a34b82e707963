"""A deterministic, offline embedder by feature hashing.

Word unigrams, bigrams and character trigrams are hashed (blake2b, stable across processes, unlike
Python's salted `hash`) into signed buckets. Texts sharing words land near each other, which is
enough for tests and quick starts; it knows no synonyms, which is what `minilm` is for.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from simulacra.embeddings.base import normalise_rows

_WORD = re.compile(r"[a-z0-9£%.]+")


class HashingEmbedder:
    name = "hashing"

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 8:
            raise ValueError("hashing embedder needs a dimension of at least 8")
        self.dimension = dimension

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = _WORD.findall(text.lower())
        feats: list[tuple[str, float]] = [(f"w:{w}", 1.0) for w in words]
        feats += [(f"b:{a} {b}", 0.7) for a, b in itertools.pairwise(words)]
        for w in words:
            padded = f"#{w}#"
            feats += [(f"c:{padded[i : i + 3]}", 0.3) for i in range(len(padded) - 2)]
        return feats

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dimension, dtype=np.float32)
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            sign = 1.0 if value & 1 else -1.0
            vec[(value >> 1) % self.dimension] += sign * weight
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalise_rows(np.stack([self._vector(t) for t in texts]))
