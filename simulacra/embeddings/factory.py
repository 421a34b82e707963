"""Builds an embedder from a name and options, as a config file gives them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from simulacra.embeddings.base import CachedEmbedder, Embedder
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.embeddings.minilm import MiniLMEmbedder
from simulacra.embeddings.openai_embedder import OpenAIEmbedder
from simulacra.llm.errors import ConfigurationError

EMBEDDERS: dict[str, Callable[..., Embedder]] = {
    "hashing": HashingEmbedder,
    "minilm": MiniLMEmbedder,
    "openai": OpenAIEmbedder,
}


def build_embedder(
    name: str, *, cache: bool = False, cache_max_entries: int = 50_000, **options: Any
) -> Embedder:
    """`cache=True` wraps the embedder in an LRU by text, since the same phrases recur in a run.

    Option names are checked here so a typo in a config file fails with the accepted names
    instead of a bare TypeError from a constructor.
    """
    factory = EMBEDDERS.get(name)
    if factory is None:
        raise ConfigurationError(f"unknown embedder '{name}'; choose one of: {', '.join(EMBEDDERS)}")
    accepted = list(inspect.signature(factory).parameters)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {', '.join(unknown)} for embedder '{name}'; accepted: "
            f"{', '.join([*accepted, 'cache', 'cache_max_entries'])}"
        )
    embedder = factory(**options)
    return CachedEmbedder(embedder, max_entries=cache_max_entries) if cache else embedder
