"""LLM providers. Each turns a `CompletionRequest` into a `Completion` or raises a classified `LLMError`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from simulacra.llm.types import Completion, CompletionRequest


@runtime_checkable
class Provider(Protocol):
    """One model at one vendor (or the scripted stand-in)."""

    name: str  # vendor id: "openai", "anthropic", "scripted", ...
    model: str

    async def complete(self, request: CompletionRequest) -> Completion: ...
