"""How the run loop hands a virtual day's consultations to whatever runs them.

The run loop owns learning: it runs a day's consultations through an executor, learns from them
in consultation order, writes a checkpoint and then tells the executor to refresh, so every
consultation of the next day reads the same memory, case base and rules base wherever it runs.
"""

from __future__ import annotations

from typing import Protocol

from environments.checkpoint import Checkpoint
from environments.executors.runner import ConsultationResult
from simulacra.llm.accounting import TaskUsage


class ConsultationExecutor(Protocol):
    name: str

    async def run(self, index: int) -> ConsultationResult:
        """Run consultation `index` (waiting for a free slot within the run's concurrency)."""
        ...

    async def end_day(self) -> list[str]:
        """Replies validated outside the driver's validator since the last call, for its novelty
        memory to commit with the day (empty when consultations run on the driver's validator)."""
        ...

    async def refresh(self, checkpoint: Checkpoint) -> None:
        """Bring whatever runs consultations up to the state `checkpoint` holds."""
        ...

    async def usage(self) -> dict[str, TaskUsage]:
        """LLM usage so far by clients other than the driver's (cumulative, per task)."""
        ...

    async def close(self) -> None: ...
