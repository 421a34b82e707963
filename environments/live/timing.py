"""How long a request spent waiting for the model, so the endpoint's own overhead can be measured.

Every provider of every LLM client the endpoint uses (the advisor's and each judge's) is wrapped
so that the time spent inside `complete` is added to the meter of the request that made the call.
The meter travels in a context variable, which asyncio copies into every task a request starts,
so concurrent requests never mix their figures.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from simulacra.llm.client import LLMClient
from simulacra.llm.types import Completion, CompletionRequest


@dataclass
class ModelMeter:
    seconds: float = 0.0  # inside the model providers
    calls: int = 0
    advisor_seconds: float = 0.0  # inside the advisor's turn (drafting, retrieval, the gate), model included


_CURRENT: ContextVar[ModelMeter | None] = ContextVar("model_meter", default=None)


def start_meter() -> ModelMeter:
    """A fresh meter for the current request (and every task it starts from here on)."""
    meter = ModelMeter()
    _CURRENT.set(meter)
    return meter


def current_meter() -> ModelMeter | None:
    return _CURRENT.get()


class TimedProvider:
    """A provider that reports the time of each completion to the current request's meter."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: CompletionRequest) -> Completion:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request)
        finally:
            meter = _CURRENT.get()
            if meter is not None:
                meter.seconds += time.perf_counter() - started
                meter.calls += 1


def time_model_calls(client: LLMClient) -> LLMClient:
    client.chain = [replace(link, provider=TimedProvider(link.provider)) for link in client.chain]
    return client
