"""Builds an embedder from a name and options, as a config file gives them."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from simulacra.embeddings.base import CachedEmbedder, Embedder
from simulacra.llm.errors import ConfigurationError

# Name -> (module, class). A module is imported only when its embedder is built: the OpenAI SDK
# alone takes seconds to import and MiniLM loads onnxruntime, which a run with another embedder
# (and every server process at startup) should not pay for.
EMBEDDERS: dict[str, tuple[str, str]] = {
    "hashing": ("simulacra.embeddings.hashing", "HashingEmbedder"),
    "minilm": ("simulacra.embeddings.minilm", "MiniLMEmbedder"),
    "openai": ("simulacra.embeddings.openai_embedder", "OpenAIEmbedder"),
}


def embedder_class(name: str) -> Callable[..., Embedder]:
    where = EMBEDDERS.get(name)
    if where is None:
        raise ConfigurationError(f"unknown embedder '{name}'; choose one of: {', '.join(EMBEDDERS)}")
    module, attribute = where
    return getattr(importlib.import_module(module), attribute)


def build_embedder(
    name: str, *, cache: bool = False, cache_max_entries: int = 50_000, **options: Any
) -> Embedder:
    """`cache=True` wraps the embedder in an LRU by text, since the same phrases recur in a run.

    Option names are checked here so a typo in a config file fails with the accepted names
    instead of a bare TypeError from a constructor.
    """
    factory = embedder_class(name)
    accepted = list(inspect.signature(factory).parameters)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {', '.join(unknown)} for embedder '{name}'; accepted: "
            f"{', '.join([*accepted, 'cache', 'cache_max_entries'])}"
        )
    embedder = factory(**options)
    return CachedEmbedder(embedder, max_entries=cache_max_entries) if cache else embedder
