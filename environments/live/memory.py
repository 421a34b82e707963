"""The advisor's memories in live sessions: saved with every turn, restored after a restart, and
the memory of a customer kept to that customer.

A session's memory stream is saved as its nodes (each turn appends the new ones) and restored by
adding them again in order, each at its original time, so ids, citations and plan references
come back the same. Embeddings are recomputed (the embedder is deterministic), and access times
restart at creation times.

Across sessions the advisor remembers only what this customer said, and only in sessions where
they agreed to it (`Consent.remember`): the retriever is built from that customer's own messages
and from nothing else, so one customer's words can never surface in another's consultation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from environments.live.store import MessageRecord
from simulacra.agent import RetrievedItem
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.memory.importance import ImportanceRater
from simulacra.memory.node import MemoryKind, MemoryNode, Provenance, Scope
from simulacra.memory.retrieval import RetrievalFilter
from simulacra.memory.stream import MemoryStream, NewMemory

CUSTOMER_MEMORY = "customer_memory"  # the retriever's name: environments.advisor.MEMORY_SOURCES
STATEMENT_IMPORTANCE = 6  # fixed, so building a customer's memory costs no model calls


class ResumableClock:
    """A session's clock: real time, except while its memories are being restored."""

    def __init__(self, inner: Clock) -> None:
        self.inner = inner
        self._at: datetime | None = None

    def now(self) -> datetime:
        return self._at if self._at is not None else self.inner.now()

    @contextmanager
    def at(self, moment: datetime) -> Iterator[None]:
        self._at = moment
        try:
            yield
        finally:
            self._at = None


def new_nodes(stream: MemoryStream, saved: int) -> list[tuple[int, dict[str, Any]]]:
    """The memories added since `saved` were stored, as (row, node) to save."""
    return [(row, stream.table.node(row).model_dump(mode="json")) for row in range(saved, len(stream))]


async def restore_nodes(stream: MemoryStream, clock: ResumableClock, nodes: list[dict[str, Any]]) -> None:
    for raw in nodes:
        node = MemoryNode.model_validate(raw)
        with clock.at(node.created_at):
            added = await stream.add(
                node.description,
                node.kind,
                node.provenance,
                importance=node.importance,
                citations=node.citations,
                metadata=node.metadata,
            )
        if added.id != node.id:
            raise ValueError(f"restoring memory {node.id} gave {added.id}: the saved stream is incomplete")


class CustomerMemory:
    """What one customer said in their earlier sessions, retrievable in their new ones."""

    def __init__(self, owner: str, embedder: Embedder, clock: Clock, rater: ImportanceRater) -> None:
        self.owner = owner
        self.stream = MemoryStream(embedder, clock, rater)
        self.provenance = Provenance(author="customer_statement", scope=Scope.CUSTOMER, scope_id=owner)

    async def load(self, statements: list[MessageRecord]) -> CustomerMemory:
        await self.stream.add_many(
            [
                NewMemory(
                    description=f'In an earlier session ({s.created_at:%d %B %Y}) the customer said: "{s.text}"',
                    kind=MemoryKind.OBSERVATION,
                    provenance=self.provenance.model_copy(update={"consultation_id": s.session_id}),
                    importance=STATEMENT_IMPORTANCE,
                    metadata={"message_id": s.id},
                )
                for s in statements
            ]
        )
        return self

    async def retrieve(self, query: str, k: int) -> list[RetrievedItem]:
        found = self.stream.retrieve(
            query, k=k, filter=RetrievalFilter(scopes={Scope.CUSTOMER}, scope_id=self.owner), touch=False
        )
        return [
            RetrievedItem(
                id=f"{self.owner}:{s.node.id}",
                text=s.node.description,
                score=s.score,
                source=CUSTOMER_MEMORY,
                kind=str(s.node.kind),
            )
            for s in found
        ]
