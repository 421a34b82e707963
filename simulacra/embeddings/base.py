"""The embedder interface: texts in, an (n, dimension) float32 array of unit vectors out."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise rows so cosine similarity is a dot product; zero rows stay zero."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


async def embed_async(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Run a (CPU-bound or blocking) embedder off the event loop."""
    return await asyncio.to_thread(embedder.embed, list(texts))


class CachedEmbedder:
    """Wraps an embedder with an in-memory LRU keyed by text.

    Embedding is a CPU hot spot in the simulation (the same phrases recur across consultations),
    so repeated texts are served from memory.
    """

    def __init__(self, inner: Embedder, max_entries: int = 50_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self._max = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            vectors = self.inner.embed(missing)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = vector
                if len(self._cache) > self._max:
                    self._cache.popitem(last=False)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            vector = self._cache.get(text)
            if vector is None:  # evicted within this very batch: recompute just that one
                vector = self.inner.embed([text])[0]
            else:
                self._cache.move_to_end(text)
            out[i] = vector
        return out
