"""OpenAI embeddings through the official SDK; `base_url` also reaches OpenAI-compatible servers.

The vector size must be known before the first call (a vector store is created with a fixed
dimension), so it comes from the model's published size or from `dimensions`, and every answer
is checked against it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import openai

from simulacra.embeddings.base import normalise_rows
from simulacra.llm.errors import ConfigurationError

# Output sizes OpenAI publishes for its embedding models (platform.openai.com/docs/guides/embeddings).
KNOWN_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# The API accepts at most 2,048 inputs a request.
MAX_BATCH = 2048


class OpenAIEmbedder:
    """Unit float32 vectors from an OpenAI (or OpenAI-compatible) embeddings endpoint."""

    name = "openai"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ConfigurationError(
                "the 'openai' embedder needs an API key: set OPENAI_API_KEY or pass api_key=... "
                "(a local OpenAI-compatible server that ignores keys still needs a placeholder value)"
            )
        if not 1 <= batch_size <= MAX_BATCH:
            raise ConfigurationError(f"openai batch_size must be between 1 and {MAX_BATCH}, got {batch_size}")
        if dimensions is not None and dimensions < 1:
            raise ConfigurationError(f"openai dimensions must be positive, got {dimensions}")
        dimension = dimensions or KNOWN_DIMENSIONS.get(model)
        if dimension is None:
            raise ConfigurationError(
                f"the size of embedding model '{model}' is not known: pass dimensions=... "
                f"(known models: {', '.join(sorted(KNOWN_DIMENSIONS))})"
            )
        self.model = model
        self.dimension = dimension
        self.batch_size = batch_size
        self._dimensions = dimensions
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # The API rejects empty strings; they carry no meaning, so they get the zero vector
        # (as the hashing embedder gives them) without a request.
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        for start in range(0, len(wanted), self.batch_size):
            rows = wanted[start : start + self.batch_size]
            out[rows] = self._embed_batch([texts[i] for i in rows])
        return out

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        extra = {"dimensions": self._dimensions} if self._dimensions is not None else {}
        response = self._client.embeddings.create(model=self.model, input=batch, **extra)
        items = sorted(response.data, key=lambda item: item.index)
        if len(items) != len(batch):
            raise ValueError(f"embeddings endpoint returned {len(items)} vectors for {len(batch)} texts")
        matrix = np.asarray([item.embedding for item in items], dtype=np.float32)
        if matrix.shape[1] != self.dimension:
            raise ValueError(
                f"model '{self.model}' returned {matrix.shape[1]}-dimensional vectors, expected "
                f"{self.dimension}; set dimensions=... to match the model"
            )
        return normalise_rows(matrix)
