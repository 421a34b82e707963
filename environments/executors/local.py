"""The default executor: consultations as asyncio tasks in the driver's process, on its world."""

from __future__ import annotations

import asyncio

from environments.checkpoint import Checkpoint
from environments.executors.runner import ConsultationResult, ConsultationRunner
from simulacra.llm.accounting import TaskUsage


class LocalExecutor:
    name = "local"

    def __init__(self, runner: ConsultationRunner, concurrency: int) -> None:
        self.runner = runner
        self.concurrency = concurrency
        self._limit: asyncio.Semaphore | None = None  # made inside the running loop

    async def run(self, index: int) -> ConsultationResult:
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.concurrency)
        async with self._limit:
            return await self.runner.run(index)

    async def end_day(self) -> list[str]:
        return []  # the driver's own validator saw every reply

    async def refresh(self, checkpoint: Checkpoint) -> None:
        return None  # consultations read the driver's world, which learning has already updated

    async def usage(self) -> dict[str, TaskUsage]:
        return {}  # every call went through the driver's client and its ledger

    async def close(self) -> None:
        return None
