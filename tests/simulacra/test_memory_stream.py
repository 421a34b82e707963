"""The memory stream: adding (all-or-nothing), lookup, touch, explain, bulk import, importance rating."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
    NewMemory,
    Provenance,
    RetrievalFilter,
    Scope,
    register_memory_handlers,
)

PROMPTS = Path(__file__).resolve().parents[2] / "simulacra" / "prompts"
START = datetime(2026, 4, 6, 9, 0)
CUSTOMER = Provenance(author="customer_statement", consultation_id="c-1")
AGENT = Provenance(author="agent", consultation_id="c-1")


def scripted_llm(**behaviour: float) -> LLMClient:
    handlers = ScriptedHandlers()
    register_memory_handlers(handlers)
    provider = ScriptedProvider(handlers, seed=7, behaviour=behaviour)
    return LLMClient([ChainLink(provider)], PromptLibrary([PROMPTS]))


def new_stream(clock: VirtualClock | None = None, **behaviour: float) -> MemoryStream:
    clock = clock or VirtualClock(START)
    return MemoryStream(HashingEmbedder(64), clock, LLMImportanceRater(scripted_llm(**behaviour)))


async def test_add_rates_embeds_and_reads_back() -> None:
    stream = new_stream()
    node = await stream.add(
        "The customer said hello and mentioned the weather", MemoryKind.OBSERVATION, CUSTOMER
    )
    assert node.id in stream and len(stream) == 1
    assert stream.get(node.id) == node
    assert node.created_at == node.last_accessed_at == START
    assert node.provenance == CUSTOMER
    assert 1 <= node.importance <= 10
    assert np.isclose(np.linalg.norm(stream.embedding(node.id)), 1.0, atol=1e-5)


async def test_importance_follows_content() -> None:
    stream = new_stream()
    routine, loss = await stream.add_many(
        [
            NewMemory(
                description="The customer said hello", kind=MemoryKind.OBSERVATION, provenance=CUSTOMER
            ),
            NewMemory(
                description="Her husband died in March and she lost £12,000 to a scam; she decided to complain",
                kind=MemoryKind.OBSERVATION,
                provenance=CUSTOMER,
            ),
        ]
    )
    assert routine.importance <= 2
    assert loss.importance >= 9


async def test_given_importance_skips_the_model() -> None:
    stream = new_stream()
    node = await stream.add("Anything at all", MemoryKind.PLAN, AGENT, importance=4)
    assert node.importance == 4
    assert isinstance(stream.rater, LLMImportanceRater) and stream.rater.calls == 0


async def test_add_with_a_bad_citation_stores_nothing_and_calls_no_model() -> None:
    stream = new_stream()
    first = await stream.add("An observation", MemoryKind.OBSERVATION, CUSTOMER)
    calls = stream.rater.calls
    with pytest.raises(ValueError, match="mem-999999"):
        await stream.add_many(
            [
                NewMemory(description="fine", kind=MemoryKind.OBSERVATION, provenance=CUSTOMER),
                NewMemory(
                    description="An insight",
                    kind=MemoryKind.REFLECTION,
                    provenance=AGENT,
                    citations=[first.id, "mem-999999"],
                ),
            ]
        )
    assert len(stream) == 1 and stream.rater.calls == calls
    with pytest.raises(ValueError, match="not-an-id"):
        await stream.add("x", MemoryKind.REFLECTION, AGENT, citations=["not-an-id"])
    assert len(stream) == 1


async def test_bad_metadata_stores_nothing() -> None:
    stream = new_stream()
    with pytest.raises(ValueError, match="JSON"):
        await stream.add("x", MemoryKind.OBSERVATION, CUSTOMER, importance=3, metadata={"when": START})
    with pytest.raises(ValueError, match="round-trip"):
        await stream.add("x", MemoryKind.OBSERVATION, CUSTOMER, importance=3, metadata={"pair": (1, 2)})
    assert len(stream) == 0


async def test_get_unknown_id_says_which() -> None:
    stream = new_stream()
    await stream.add("x", MemoryKind.OBSERVATION, CUSTOMER, importance=3)
    for bad in ("mem-000001", "mem-0", "mem-0000000", "nope"):
        assert bad not in stream
        with pytest.raises(KeyError, match="no memory with id"):
            stream.get(bad)


async def test_retrieve_touches_only_what_it_returns() -> None:
    clock = VirtualClock(START)
    stream = new_stream(clock)
    nodes = await stream.add_many(
        [
            NewMemory(description=f"note {i} about {topic}", kind=MemoryKind.OBSERVATION, provenance=CUSTOMER)
            for i, topic in enumerate(["pensions", "weather", "pensions and tax", "holidays"])
        ]
    )
    clock.advance(timedelta(hours=30))
    found = stream.retrieve("pensions", k=2)
    returned = {s.node.id for s in found}
    assert len(returned) == 2
    for node in nodes:
        expected = clock.now() if node.id in returned else START
        assert stream.get(node.id).last_accessed_at == expected
    assert all(s.node.last_accessed_at == clock.now() for s in found)
    clock.advance(timedelta(hours=1))
    stream.retrieve("pensions", k=2, touch=False)
    assert {stream.get(i).last_accessed_at for i in returned} == {clock.now() - timedelta(hours=1)}
    stream.touch([nodes[1].id])
    assert stream.get(nodes[1].id).last_accessed_at == clock.now()


async def test_nodes_in_creation_order_with_filters() -> None:
    clock = VirtualClock(START)
    stream = new_stream(clock)
    a = await stream.add("a", MemoryKind.OBSERVATION, CUSTOMER, importance=2)
    clock.advance(timedelta(hours=1))
    b = await stream.add("b", MemoryKind.REFLECTION, AGENT, importance=8, citations=[a.id])
    clock.advance(timedelta(hours=1))
    c = await stream.add("c", MemoryKind.OBSERVATION, CUSTOMER, importance=5)
    assert [n.id for n in stream.nodes()] == [a.id, b.id, c.id]
    assert [n.id for n in stream.nodes(MemoryKind.OBSERVATION)] == [a.id, c.id]
    assert [n.id for n in stream.nodes(since=START + timedelta(hours=1))] == [b.id, c.id]
    assert [n.id for n in stream.nodes(filter=RetrievalFilter(min_importance=5))] == [b.id, c.id]
    assert [n.id for n in stream.nodes(filter=RetrievalFilter(until=START + timedelta(hours=1)))] == [a.id]
    assert [n.id for n in stream.nodes(filter=RetrievalFilter(authors={"agent"}))] == [b.id]
    assert [n.id for n in stream.nodes(last=2)] == [b.id, c.id]
    assert stream.nodes(last=0) == []
    assert stream.nodes(MemoryKind.PLAN) == []
    assert stream.nodes(filter=RetrievalFilter(consultation_id="unknown")) == []


async def test_explain_walks_citations_down_to_observations() -> None:
    stream = new_stream()
    o1 = await stream.add("saw one", MemoryKind.OBSERVATION, CUSTOMER, importance=3)
    o2 = await stream.add("saw two", MemoryKind.OBSERVATION, CUSTOMER, importance=3)
    o3 = await stream.add("saw three", MemoryKind.OBSERVATION, CUSTOMER, importance=3)
    r1 = await stream.add("insight", MemoryKind.REFLECTION, AGENT, importance=6, citations=[o1.id, o2.id])
    r2 = await stream.add(
        "deeper", MemoryKind.REFLECTION, AGENT, importance=7, citations=[r1.id, o3.id, o1.id]
    )
    tree = stream.explain(r2.id)
    assert tree.node.id == r2.id
    assert [c.node.id for c in tree.children] == [r1.id, o3.id, o1.id]
    assert [c.node.id for c in tree.children[0].children] == [o1.id, o2.id]
    assert {leaf.kind for leaf in tree.leaves()} == {MemoryKind.OBSERVATION}
    assert set(tree.ids()) == {r2.id, r1.id, o1.id, o2.id, o3.id}
    assert stream.explain(r2.id, max_depth=1).children[0].children == []
    duplicate_citation = await stream.add(
        "again", MemoryKind.REFLECTION, AGENT, importance=5, citations=[o1.id, o1.id]
    )
    assert duplicate_citation.citations == [o1.id]


async def test_import_rows_bulk_and_validation() -> None:
    clock = VirtualClock(START)
    stream = new_stream(clock)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5, 64)).astype(np.float32)
    created = np.array([START - timedelta(days=d) for d in range(5)], dtype="datetime64[us]")
    rows = stream.import_rows(
        descriptions=[f"imported {i}" for i in range(5)],
        embeddings=vectors,
        importance=np.array([1, 2, 3, 4, 10]),
        kinds=MemoryKind.OBSERVATION,
        provenance=Provenance(author="tool", scope=Scope.APPLICATION),
        created_at=created,
    )
    assert list(rows) == [0, 1, 2, 3, 4]
    node = stream.get("mem-000003")
    assert node.created_at == node.last_accessed_at == START - timedelta(days=3)
    assert node.importance == 4 and node.provenance.scope is Scope.APPLICATION
    unit = vectors[3] / np.linalg.norm(vectors[3])
    assert np.allclose(stream.embedding(node.id), unit, atol=1e-6)
    bad = dict(
        descriptions=["a", "b"],
        embeddings=vectors[:2],
        kinds=MemoryKind.OBSERVATION,
        provenance=CUSTOMER,
        created_at=created[:2],
    )
    with pytest.raises(ValueError, match="importance"):
        stream.import_rows(importance=np.array([0, 5]), **bad)
    with pytest.raises(ValueError, match="NaN"):
        stream.import_rows(importance=np.array([3, 5]), **{**bad, "embeddings": np.full((2, 64), np.nan)})
    with pytest.raises(ValueError, match="shape"):
        stream.import_rows(importance=np.array([3, 5]), **{**bad, "embeddings": vectors[:2, :10]})
    assert len(stream) == 5


async def test_timezone_aware_clock_round_trips_and_rejects_naive() -> None:
    clock = VirtualClock(datetime(2026, 4, 6, 9, 0, tzinfo=UTC))
    stream = new_stream(clock)
    node = await stream.add("x", MemoryKind.OBSERVATION, CUSTOMER, importance=3)
    assert node.created_at == clock.now() and node.created_at.tzinfo is not None
    with pytest.raises(ValueError, match="timezone-aware"):
        stream.nodes(since=START)


async def test_rater_batches_and_caches_by_text() -> None:
    llm = scripted_llm()
    rater = LLMImportanceRater(llm, batch_size=4)
    texts = [f"memory number {i} about savings" for i in range(10)]
    first = await rater.rate(texts)
    assert rater.calls == 3  # 4 + 4 + 2
    again = await rater.rate([*texts[::-1], texts[0]])
    assert rater.calls == 3
    assert again == [*first[::-1], first[0]]
    assert all(1 <= r <= 10 for r in first)


async def test_rater_asks_again_for_omitted_ratings_and_fails_loudly() -> None:
    from simulacra.memory import ImportanceRatingError

    patchy = LLMImportanceRater(scripted_llm(importance_omission=0.3), batch_size=8)
    ratings = await patchy.rate([f"memory {i}" for i in range(8)])
    assert len(ratings) == 8 and patchy.calls >= 2
    silent = LLMImportanceRater(scripted_llm(importance_omission=1.0))
    with pytest.raises(ImportanceRatingError, match="unrated"):
        await silent.rate(["memory"])
    stream = MemoryStream(HashingEmbedder(64), VirtualClock(START), silent)
    with pytest.raises(ImportanceRatingError):
        await stream.add("never stored", MemoryKind.OBSERVATION, CUSTOMER)
    assert len(stream) == 0


def test_scripted_importance_ranks_loss_over_money_over_routine() -> None:
    from simulacra.memory.importance import score_description

    routine = score_description("We said hello and talked about the weather")
    money = score_description("She pays a fee on her savings")
    decision = score_description("He decided to withdraw his savings")
    loss = score_description("Her husband died and she lost her income")
    assert routine < money < decision < loss
