"""Memory upkeep: folding near-duplicates together and summarising finished sessions.

Over thousands of consultations an agent observes the same things again and again ("the
customer has a workplace pension"); left alone, these crowd retrieval's top-k with copies. Merging
keeps the earliest memory as the survivor and retires the rest without deleting them, so every
citation still resolves and every original statement keeps its author, scope and consultation.
Only memories of the same kind, author, scope and scope id are merged: a customer's statement is
never folded into the agent's own inference.

A finished session's memories are summarised (an LLM task) into one customer-scope memory that
cites them all, so later sessions with the same customer retrieve the gist without the detail.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel, Field, field_validator

from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers
from simulacra.llm.types import Task
from simulacra.memory.ann import bucket_rows
from simulacra.memory.columns import node_id
from simulacra.memory.importance import LLMCaller, clamp_importance
from simulacra.memory.node import MemoryKind, MemoryNode, Provenance, Scope
from simulacra.memory.retrieval import RetrievalFilter, filter_mask
from simulacra.memory.stream import MemoryStream

# Groups larger than this are first split into coarse clusters, and only rows in the same cluster
# are compared (all pairs of a million memories would take hours); a duplicate pair split across
# two clusters is then missed, which near-duplicates (cosine >= 0.95) rarely are.
EXACT_GROUP_LIMIT = 20_000
_BLOCK = 1024


class MergeGroup(BaseModel):
    survivor: str
    merged: list[str]


class MergeReport(BaseModel):
    threshold: float
    compared: int
    groups: list[MergeGroup] = Field(default_factory=list)

    @property
    def retired(self) -> int:
        return sum(len(g.merged) for g in self.groups)


def _leaders(vectors: np.ndarray, threshold: float) -> np.ndarray:
    """For each row (in creation order): -1 if it leads, else the position of the leader it joins.

    Leader clustering: a row joins the most similar earlier leader at or above the threshold, so
    a chain of slightly different paraphrases cannot drag unrelated memories together.
    """
    m = len(vectors)
    leader_of = np.full(m, -1, dtype=np.int64)
    is_leader = np.ones(m, dtype=bool)
    for start in range(0, m, _BLOCK):
        stop = min(m, start + _BLOCK)
        sims = vectors[start:stop] @ vectors[:stop].T
        # Only earlier rows count: blank out the diagonal and everything after it.
        sims[np.arange(stop - start)[:, None] <= np.arange(stop)[None, :] - start] = -np.inf
        for offset in np.flatnonzero((sims >= threshold).any(axis=1)):
            i = start + int(offset)
            row = np.where(is_leader[:stop], sims[offset], -np.inf)
            j = int(np.argmax(row))
            if row[j] >= threshold:
                leader_of[i] = j
                is_leader[i] = False
    return leader_of


def find_near_duplicates(
    stream: MemoryStream,
    threshold: float = 0.95,
    filter: RetrievalFilter | None = None,
    *,
    exact_limit: int = EXACT_GROUP_LIMIT,
) -> MergeReport:
    """Which active memories would merge, without changing anything."""
    if not 0 < threshold <= 1:
        raise ValueError("the similarity threshold must be in (0, 1]")
    rows = np.flatnonzero(filter_mask(stream.table, filter))
    report = MergeReport(threshold=threshold, compared=len(rows))
    keys = stream.table.group_keys()[rows]
    groups: dict[int, list[int]] = {}
    for key in np.unique(keys):
        for part in _parts(stream, rows[keys == key], exact_limit):
            vectors = stream.matrix.rows(part)
            for position, leader in enumerate(_leaders(vectors, threshold)):
                if leader >= 0:
                    groups.setdefault(int(part[leader]), []).append(int(part[position]))
    report.groups = [
        MergeGroup(survivor=node_id(s), merged=[node_id(d) for d in sorted(groups[s])])
        for s in sorted(groups)
    ]
    return report


def _parts(stream: MemoryStream, rows: np.ndarray, exact_limit: int) -> Iterable[np.ndarray]:
    if len(rows) <= exact_limit:
        yield rows
        return
    # Clusters of about exact_limit / 20 rows: each is compared exactly, pairs across them are not.
    buckets = max(2, len(rows) // max(50, exact_limit // 20))
    labels = bucket_rows(stream.matrix, rows, buckets, seed=stream.config.ann_seed)
    for label in np.unique(labels):
        yield rows[labels == label]  # stays in creation order


def merge_near_duplicates(
    stream: MemoryStream,
    threshold: float = 0.95,
    *,
    filter: RetrievalFilter | None = None,
    exact_limit: int = EXACT_GROUP_LIMIT,
) -> MergeReport:
    """Merge active memories whose embeddings have cosine >= threshold (see module docstring)."""
    report = find_near_duplicates(stream, threshold, filter, exact_limit=exact_limit)
    for group in report.groups:
        stream.retire_duplicates(group.survivor, group.merged)
    return report


# -- session summaries


class SessionSummary(BaseModel):
    summary: str = Field(min_length=1)
    importance: int

    @field_validator("importance")
    @classmethod
    def _clamp(cls, value: int) -> int:
        return clamp_importance(value)


SESSION_SUMMARY_TASK: Task[SessionSummary] = Task("memory.session_summary", "v1", SessionSummary)


async def summarise_session(
    stream: MemoryStream,
    llm: LLMCaller,
    consultation_id: str,
    *,
    customer_id: str,
    author: str = "agent",
    kind: MemoryKind = MemoryKind.REFLECTION,
    kinds: Iterable[MemoryKind] = (MemoryKind.OBSERVATION, MemoryKind.REFLECTION),
    max_memories: int = 200,
) -> MemoryNode:
    """Store one customer-scope memory summarising a session's memories and citing each of them.

    When a session holds more than `max_memories`, the most important ones are summarised (in
    creation order) and cited. The summary is a REFLECTION by default (it rests on evidence and
    `explain` walks down to it); pass `kind` to store it as something else.
    """
    session = RetrievalFilter(consultation_id=consultation_id, scopes={Scope.SESSION}, kinds=set(kinds))
    nodes = stream.nodes(filter=session)
    if not nodes:
        raise ValueError(f"consultation {consultation_id!r} has no session memories to summarise")
    if len(nodes) > max_memories:
        keep = sorted(sorted(range(len(nodes)), key=lambda i: -nodes[i].importance)[:max_memories])
        nodes = [nodes[i] for i in keep]
    variables = {
        "consultation_id": consultation_id,
        "memories": [
            {
                "id": n.id,
                "description": n.description,
                "kind": n.kind.value,
                "importance": n.importance,
                "author": n.provenance.author,
                "created_at": n.created_at.isoformat(),
            }
            for n in nodes
        ],
    }
    result = await llm.call(SESSION_SUMMARY_TASK, variables)
    summary: SessionSummary = result.parsed(SessionSummary)
    text = summary.summary.strip()
    if not text:
        raise ValueError(f"the session summary for {consultation_id!r} came back empty")
    return await stream.add(
        text,
        kind,
        Provenance(
            author=author, scope=Scope.CUSTOMER, scope_id=customer_id, consultation_id=consultation_id
        ),
        importance=summary.importance,
        citations=[n.id for n in nodes],
        metadata={"upkeep": "session_summary", "summarised": len(nodes)},
    )


def handle_session_summary(call: ScriptedCall) -> SessionSummary:
    """Summarise from the most important memories shown, as a hurried but honest note-taker would."""
    memories = list(call.variables["memories"])
    ranked = sorted(memories, key=lambda m: -int(m["importance"]))
    take = ranked[: call.rng.choice((2, 3, 3, 4))]
    chronological = [m for m in memories if m in take]
    points = "; ".join(m["description"].rstrip(".") for m in chronological)
    peak = max(int(m["importance"]) for m in take)
    return SessionSummary(
        summary=f"Session {call.variables['consultation_id']} ({len(memories)} memories): {points}.",
        importance=clamp_importance(peak - call.rng.choice((0, 1))),
    )


def register_upkeep_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(SESSION_SUMMARY_TASK.name, handle_session_summary)
