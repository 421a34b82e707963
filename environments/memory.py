"""The advisor's long-term memory: what it learned across consultations.

During a virtual day consultations only read it (without touching access times); between days the
day's consultations are written into it in consultation order and it reflects when enough has
happened. That keeps a seeded run identical whatever the concurrency.
"""

from __future__ import annotations

from pathlib import Path

from environments.consultation import ConsultationRecord
from simulacra.agent import RetrievedItem
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.llm.client import LLMClient
from simulacra.memory.importance import ImportanceRater
from simulacra.memory.node import MemoryKind, Provenance, Scope
from simulacra.memory.reflection import ReflectionConfig, ReflectionReport, Reflector
from simulacra.memory.retrieval import RetrievalFilter
from simulacra.memory.stream import MemoryStream, NewMemory

EXPERIENCE = Provenance(author="agent", scope=Scope.APPLICATION, scope_id="advisor")


def lessons(record: ConsultationRecord) -> list[str]:
    """What the advisor should remember of one consultation, from its audit record."""
    out = []
    first_pass_codes = sorted({c for t in record.advisor_turns for c in t.first_pass_violations})
    held = sum(t.holding for t in record.advisor_turns)
    who = [record.goal.replace("_", " ")]
    if record.vulnerable:
        who.append("vulnerable customer")
    if record.has_db:
        who.append("defined benefit pension")
    out.append(
        f"Consultation {record.id} ({', '.join(who)}): {len(record.advisor_turns)} replies, "
        f"{sum(bool(t.first_pass_compliant) for t in record.advisor_turns)} passed compliance first time, "
        f"{held} held for human review."
    )
    for code in first_pass_codes:
        out.append(
            f"In a {record.goal.replace('_', ' ')} consultation my first draft was flagged for {code}."
        )
    if "scam_contact" in record.revealed:
        out.append(f"The customer in {record.id} had been approached by a possible pension scammer.")
    return out


class ExperienceRetriever:
    """Reads long-term memory for a consultation without changing it (no access-time updates)."""

    def __init__(self, stream: MemoryStream) -> None:
        self.stream = stream

    async def retrieve(self, query: str, k: int) -> list[RetrievedItem]:
        found = self.stream.retrieve(
            query,
            k=k,
            filter=RetrievalFilter(kinds={MemoryKind.OBSERVATION, MemoryKind.REFLECTION}),
            touch=False,
        )
        return [
            RetrievedItem(
                id=s.node.id,
                text=s.node.description,
                score=s.score,
                source="experience",
                kind=str(s.node.kind),
            )
            for s in found
        ]


class AdvisorMemory:
    def __init__(
        self,
        embedder: Embedder,
        clock: Clock,
        rater: ImportanceRater,
        llm: LLMClient,
        reflection: ReflectionConfig,
    ) -> None:
        self.stream = MemoryStream(embedder, clock, rater)
        self.reflector = Reflector.from_config(self.stream, llm, reflection, provenance=EXPERIENCE)
        self.reports: list[ReflectionReport] = []

    def retriever(self) -> ExperienceRetriever:
        return ExperienceRetriever(self.stream)

    async def consolidate(self, records: list[ConsultationRecord]) -> ReflectionReport | None:
        """Write a finished day into memory (in consultation order) and reflect if it is due."""
        items = [
            NewMemory(
                description=text,
                kind=MemoryKind.OBSERVATION,
                provenance=EXPERIENCE.model_copy(update={"consultation_id": record.id}),
                metadata={"consultation": record.id},
            )
            for record in sorted(records, key=lambda r: r.index)
            for text in lessons(record)
        ]
        if items:
            await self.stream.add_many(items)
        if self.reflector.should_reflect():
            report = await self.reflector.reflect_with_report()
            self.reports.append(report)
            return report
        return None

    def save(self, folder: Path) -> Path:
        return self.stream.save(folder)

    def export_jsonl(self, path: Path) -> Path:
        with path.open("w", encoding="utf-8") as out:
            for node in self.stream.nodes():
                out.write(node.model_dump_json() + "\n")
        return path
