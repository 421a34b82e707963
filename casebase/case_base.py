"""The case base (episodic memory): consultations that went well, found again by their situation.

Agent Hospital's medical-record library, with two changes. A case is searched for within its task
type and only ever comes back if it passed compliance, so the advisor never imitates a reply the
validator would refuse. And a case that nearly repeats one already stored is merged into it (the
better-judged of the two speaks for both, and the merged record keeps every source id) instead of
piling up, so a long run's base grows with variety rather than with copies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel

from casebase.classify import Classification, TaskClassifier
from casebase.config import CaseBaseSettings
from casebase.jsonl import read_jsonl, write_jsonl
from casebase.models import MERGEABLE_PROVENANCE, Case, TaskType
from casebase.store import VectorCollection, and_where
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder


class CaseMatch(BaseModel):
    case: Case
    similarity: float


class AddResult(BaseModel):
    """What `add` did: stored a new case, or merged it into a near-duplicate (`merged_into`)."""

    case: Case  # the record as stored now
    merged: bool
    merged_into: str | None = None
    similarity: float | None = None


def _flat_fields(case: Case) -> dict[str, str | int | float | bool]:
    return {
        "task_type": case.task_type,
        "compliance_verified": case.compliance_verified,
        "provenance": case.provenance,
        "covered_codes": ",".join(case.covered_codes),
    }


def case_collection(
    client, name: str, embedder: Embedder, *, empty_recheck_s: float = 0.0
) -> VectorCollection[Case]:
    return VectorCollection(
        client,
        name,
        embedder,
        Case,
        flat_fields=_flat_fields,
        text_of=Case.search_text,
        empty_recheck_s=empty_recheck_s,
    )


def merge_cases(kept: Case, other: Case, *, at) -> Case:
    """Fold `other` into `kept`'s record: the better-ranked text wins, the id and all sources stay."""
    winner = other if other.rank() > kept.rank() else kept
    return winner.model_copy(
        update={
            "id": kept.id,
            "created_at": kept.created_at,
            "updated_at": at,
            "source_ids": list(dict.fromkeys([*kept.source_ids, *other.source_ids])),
            "merged_from": [
                i for i in dict.fromkeys([*kept.merged_from, other.id, *other.merged_from]) if i != kept.id
            ],
        }
    )


class CaseBase:
    def __init__(
        self,
        collection: VectorCollection[Case],
        clock: Clock,
        settings: CaseBaseSettings | None = None,
        classifier: TaskClassifier | None = None,
    ) -> None:
        self.collection = collection
        self.clock = clock
        self.settings = settings or CaseBaseSettings()
        self.classifier = classifier or TaskClassifier()

    @property
    def embedder(self) -> Embedder:
        return self.collection.embedder

    # --- writing ---------------------------------------------------------------------------

    def add(self, case: Case) -> AddResult:
        """Store a case, or fold it into a near-duplicate consultation of the same task type.

        Knowledge-learning cases are never merged (each states a different sourced fact, however
        alike two questions read), and consultations never merge into them. Adding a case whose id
        is already stored rewrites that record with the new verdict and outcome, keeping the time
        it was first stored; if that record already speaks for merged cases, the case is folded in
        like any duplicate so the others' sources and text are not lost.
        """
        now = self.clock.now()
        stored = self.collection.get(case.id)
        if stored is not None:
            record = (
                merge_cases(stored, case, at=now)
                if stored.merged_from
                else case.model_copy(update={"created_at": stored.created_at, "updated_at": now})
            )
            self._rewrite(record, stored)
            return AddResult(case=record, merged=False)
        case = case.model_copy(
            update={"created_at": case.created_at or now, "updated_at": case.updated_at or now}
        )
        vector = self.collection.embed([case.search_text()])[0]
        if case.mergeable:
            where = and_where(
                {"task_type": case.task_type}, {"provenance": {"$in": list(MERGEABLE_PROVENANCE)}}
            )
            nearest = self.collection.query(vector, 1, where=where)
            if nearest and nearest[0][1] >= self.settings.merge_threshold:
                existing, similarity = nearest[0]
                merged = merge_cases(existing, case, at=now)
                self._rewrite(
                    merged, existing, vector if merged.search_text() == case.search_text() else None
                )
                return AddResult(case=merged, merged=True, merged_into=existing.id, similarity=similarity)
        self.collection.upsert([case], vector.reshape(1, -1))
        return AddResult(case=case, merged=False)

    def _rewrite(self, record: Case, previous: Case, vector: np.ndarray | None = None) -> None:
        """Store a changed record, re-embedding only when the text it is found by changed."""
        if record.search_text() == previous.search_text():
            self.collection.replace(record)
        elif vector is not None:
            self.collection.upsert([record], vector.reshape(1, -1))
        else:
            self.collection.upsert([record])

    # --- reading ---------------------------------------------------------------------------

    def search(self, query: str, task_type: TaskType | None = None, k: int | None = None) -> list[CaseMatch]:
        """The most similar verified cases (of the task type, when given), best first."""
        where = and_where({"compliance_verified": True}, {"task_type": task_type} if task_type else None)
        vector = self.collection.embed([query])[0]
        found = self.collection.query(vector, k or self.settings.k, where=where)
        return [CaseMatch(case=case, similarity=similarity) for case, similarity in found]

    async def classify_task(self, query: str) -> Classification:
        return await self.classifier.classify(query)

    def get(self, case_id: str) -> Case | None:
        return self.collection.get(case_id)

    def all(self) -> list[Case]:
        return sorted(self.collection.all(), key=lambda c: (c.created_at is None, c.created_at, c.id))

    @property
    def size(self) -> int:
        return self.collection.count()

    def count(self, *, verified_only: bool = False, task_type: TaskType | None = None) -> int:
        where = and_where(
            {"compliance_verified": True} if verified_only else None,
            {"task_type": task_type} if task_type else None,
        )
        return self.collection.count(where)

    # --- exchange --------------------------------------------------------------------------

    def export_jsonl(self, path: Path) -> int:
        return write_jsonl(path, self.all())

    def import_jsonl(self, path: Path, *, merge: bool = False) -> int:
        """Load an export. By default records go in exactly as written (ids, merges and times kept);
        `merge=True` adds them one by one through `add`, folding them into near-duplicates here."""
        cases = read_jsonl(path, Case)
        if merge:
            for case in cases:
                self.add(case)
        else:
            for start in range(0, len(cases), 500):
                self.collection.upsert(cases[start : start + 500])
        return len(cases)
