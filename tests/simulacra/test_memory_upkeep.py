"""Upkeep: merging near-duplicates keeps every node and its provenance; session summaries cite the session."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from simulacra.clock import VirtualClock
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider
from simulacra.memory import (
    LLMImportanceRater,
    MemoryKind,
    MemoryStream,
    Provenance,
    RetrievalFilter,
    Scope,
    merge_near_duplicates,
    register_memory_handlers,
    summarise_session,
)
from simulacra.memory.upkeep import find_near_duplicates

PROMPTS = Path(__file__).resolve().parents[2] / "simulacra" / "prompts"
START = datetime(2026, 4, 6, 9, 0)
CUSTOMER = Provenance(author="customer_statement", scope=Scope.SESSION, scope_id="s-1", consultation_id="c-1")
AGENT = Provenance(author="agent", scope=Scope.SESSION, scope_id="s-1", consultation_id="c-1")


def scripted_llm() -> LLMClient:
    handlers = ScriptedHandlers()
    register_memory_handlers(handlers)
    return LLMClient([ChainLink(ScriptedProvider(handlers, seed=3))], PromptLibrary([PROMPTS]))


def new_stream(clock: VirtualClock, dim: int = 64) -> MemoryStream:
    return MemoryStream(HashingEmbedder(dim), clock, LLMImportanceRater(scripted_llm()))


async def test_merge_folds_duplicates_into_the_earliest_and_keeps_provenance() -> None:
    clock = VirtualClock(START)
    stream = new_stream(clock)
    text = "The customer has a workplace pension with Acme worth £30,000"
    first = await stream.add(text, MemoryKind.OBSERVATION, CUSTOMER, importance=4)
    clock.advance(timedelta(hours=1))
    again = await stream.add(text, MemoryKind.OBSERVATION, CUSTOMER, importance=7)
    other_author = await stream.add(text, MemoryKind.OBSERVATION, AGENT, importance=5)
    other_kind = await stream.add(text, MemoryKind.REFLECTION, CUSTOMER, importance=5)
    other_session = await stream.add(
        text, MemoryKind.OBSERVATION, CUSTOMER.model_copy(update={"scope_id": "s-2"}), importance=5
    )
    unrelated = await stream.add("She plans to retire at 60", MemoryKind.OBSERVATION, CUSTOMER, importance=3)
    citing = await stream.add(
        "Pension noted twice", MemoryKind.REFLECTION, AGENT, importance=5, citations=[again.id]
    )
    clock.advance(timedelta(hours=1))
    stream.touch([again.id])

    preview = find_near_duplicates(stream, 0.95)
    assert len(stream.nodes()) == 7  # finding changes nothing
    report = merge_near_duplicates(stream, 0.95)
    assert preview == report and report.retired == 1
    assert [(g.survivor, g.merged) for g in report.groups] == [(first.id, [again.id])]

    survivor, retired = stream.get(first.id), stream.get(again.id)
    assert survivor.importance == 7 and survivor.last_accessed_at == clock.now()
    assert survivor.metadata == {"merged_from": [again.id], "mentions": 2}
    assert survivor.provenance == CUSTOMER and retired.provenance == CUSTOMER
    assert retired.metadata == {"merged_into": first.id} and retired.description == text
    active = {n.id for n in stream.nodes()}
    assert again.id not in active
    assert {first.id, other_author.id, other_kind.id, other_session.id, unrelated.id, citing.id} <= active
    assert again.id in {n.id for n in stream.nodes(include_retired=True)}
    assert all(s.node.id != again.id for s in stream.retrieve(text, k=10, touch=False))
    assert [c.node.id for c in stream.explain(citing.id).children] == [again.id]
    assert merge_near_duplicates(stream, 0.95).groups == []


def _import(stream: MemoryStream, vectors: np.ndarray, provenance: Provenance = CUSTOMER) -> None:
    n = len(vectors)
    stream.import_rows(
        descriptions=[f"row {len(stream) + i}" for i in range(n)],
        embeddings=vectors,
        importance=np.full(n, 5),
        kinds=MemoryKind.OBSERVATION,
        provenance=provenance,
        created_at=np.full(n, np.datetime64(START, "us")),
    )


def test_a_chain_of_paraphrases_does_not_drag_distant_memories_together() -> None:
    stream = new_stream(VirtualClock(START), dim=8)
    e1, e2 = np.eye(8, dtype=np.float32)[:2]
    a, b, c = e1, e1 + 0.3 * e2, e1 + 0.6 * e2  # cos(a,b)=0.958, cos(b,c)=0.969, cos(a,c)=0.857
    _import(stream, np.stack([a, b, c]))
    report = merge_near_duplicates(stream, 0.95)
    assert [(g.survivor, g.merged) for g in report.groups] == [("mem-000000", ["mem-000001"])]
    assert stream.get("mem-000002").metadata == {}


def test_large_groups_are_compared_within_clusters() -> None:
    rng = np.random.default_rng(0)
    stream = new_stream(VirtualClock(START), dim=48)
    base = rng.standard_normal((3_000, 48)).astype(np.float32)
    _import(stream, base)
    copies = rng.choice(3_000, size=40, replace=False)
    _import(stream, base[copies] + 0.01 * rng.standard_normal((40, 48)).astype(np.float32))
    bucketed = merge_near_duplicates(stream, 0.97, exact_limit=1_000)
    found = {(g.survivor, m) for g in bucketed.groups for m in g.merged}
    expected = {(f"mem-{c:06d}", f"mem-{3_000 + i:06d}") for i, c in enumerate(copies)}
    assert found == expected


def test_filter_limits_what_is_merged() -> None:
    stream = new_stream(VirtualClock(START), dim=8)
    e1 = np.eye(8, dtype=np.float32)[0]
    _import(stream, np.stack([e1, e1]), CUSTOMER)
    _import(stream, np.stack([e1, e1]), CUSTOMER.model_copy(update={"consultation_id": "c-2"}))
    report = merge_near_duplicates(stream, 0.95, filter=RetrievalFilter(consultation_id="c-2"))
    assert [(g.survivor, g.merged) for g in report.groups] == [("mem-000002", ["mem-000003"])]
    with pytest.raises(ValueError, match="threshold"):
        merge_near_duplicates(stream, 0.0)


async def test_summarise_session_stores_one_customer_memory_citing_the_session() -> None:
    clock = VirtualClock(START)
    stream = new_stream(clock)
    llm = scripted_llm()
    said = [
        "Hello, thanks for seeing me",
        "My husband died last year and I am worried about money",
        "I have a final salary pension worth £80,000",
        "I decided to ask about taking a lump sum",
    ]
    session = [await stream.add(t, MemoryKind.OBSERVATION, CUSTOMER) for t in said]
    plan = await stream.add("Explain options", MemoryKind.PLAN, AGENT, importance=3)
    elsewhere = await stream.add(
        "Another customer's worry",
        MemoryKind.OBSERVATION,
        CUSTOMER.model_copy(update={"consultation_id": "c-9"}),
    )
    clock.advance(timedelta(hours=1))
    summary = await summarise_session(stream, llm, "c-1", customer_id="alice")
    assert summary.kind is MemoryKind.REFLECTION
    assert summary.provenance == Provenance(
        author="agent", scope=Scope.CUSTOMER, scope_id="alice", consultation_id="c-1"
    )
    assert summary.citations == [n.id for n in session]
    assert plan.id not in summary.citations and elsewhere.id not in summary.citations
    assert "worried about money" in summary.description
    assert summary.importance >= 7 and summary.metadata["upkeep"] == "session_summary"
    assert {leaf.id for leaf in stream.explain(summary.id).leaves()} == {n.id for n in session}
    customer = stream.nodes(filter=RetrievalFilter(scopes={Scope.CUSTOMER}, scope_id="alice"))
    assert [n.id for n in customer] == [summary.id]
    assert all(stream.get(n.id).provenance == CUSTOMER for n in session)


async def test_summarise_keeps_the_most_important_when_a_session_is_long() -> None:
    clock = VirtualClock(START)
    stream = new_stream(clock)
    nodes = [
        await stream.add(f"point {i}", MemoryKind.OBSERVATION, CUSTOMER, importance=1 + i % 10)
        for i in range(30)
    ]
    summary = await summarise_session(stream, scripted_llm(), "c-1", customer_id="alice", max_memories=5)
    # The three rated 10, then the earliest two rated 9; cited in creation order.
    assert summary.citations == [nodes[i].id for i in (8, 9, 18, 19, 29)]
    with pytest.raises(ValueError, match="no session memories"):
        await summarise_session(stream, scripted_llm(), "c-404", customer_id="alice")
