"""Token and cost accounting per task, and per-provider concurrency limits."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from pydantic import BaseModel, Field


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1_000_000


class TaskUsage(BaseModel):
    calls: int = 0
    cached_calls: int = 0
    failed_attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0


class UsageLedger:
    """Accumulates usage per task; `snapshot()` is what goes to MLflow."""

    def __init__(self, prices: dict[str, ModelPrice] | None = None) -> None:
        self.prices = prices or {}
        self._by_task: dict[str, TaskUsage] = defaultdict(TaskUsage)

    def price_of(self, model: str) -> ModelPrice:
        return self.prices.get(model, ModelPrice())

    def record(
        self, task: str, model: str, input_tokens: int, output_tokens: int, latency_s: float, cached: bool
    ) -> float:
        cost = 0.0 if cached else self.price_of(model).cost(input_tokens, output_tokens)
        usage = self._by_task[task]
        usage.calls += 1
        usage.cached_calls += int(cached)
        usage.input_tokens += input_tokens
        usage.output_tokens += output_tokens
        usage.cost_usd += cost
        usage.latency_s += latency_s
        return cost

    def record_failure(self, task: str) -> None:
        self._by_task[task].failed_attempts += 1

    def snapshot(self) -> dict[str, TaskUsage]:
        return {task: usage.model_copy() for task, usage in sorted(self._by_task.items())}

    def totals(self) -> TaskUsage:
        total = TaskUsage()
        for usage in self._by_task.values():
            for name in TaskUsage.model_fields:
                setattr(total, name, getattr(total, name) + getattr(usage, name))
        return total


class ProviderLimits(BaseModel):
    max_concurrency: int = Field(default=8, ge=1)


class ConcurrencyLimiter:
    """One semaphore per provider, created lazily inside the running event loop."""

    def __init__(self, limits: dict[str, ProviderLimits] | None = None, default: int = 8) -> None:
        self._limits = limits or {}
        self._default = default
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    def slot(self, provider: str) -> asyncio.Semaphore:
        if provider not in self._semaphores:
            limit = self._limits.get(provider)
            self._semaphores[provider] = asyncio.Semaphore(limit.max_concurrency if limit else self._default)
        return self._semaphores[provider]
