"""Reflection: when it triggers, what it stores, and that junk from the model is never stored."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simulacra
from simulacra.clock import VirtualClock
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers, ScriptedProvider
from simulacra.memory.importance import LLMImportanceRater, register_importance_handlers
from simulacra.memory.node import MemoryKind, Provenance
from simulacra.memory.reflection import (
    REFLECTION_INSIGHTS,
    REFLECTION_QUESTIONS,
    Insight,
    ReflectionInsights,
    Reflector,
)
from simulacra.memory.stream import MemoryStream
from simulacra.scripted_tasks import (
    handle_reflection_insights,
    handle_reflection_questions,
    register_simulacra_handlers,
)

PROMPTS = Path(simulacra.__file__).parent / "prompts"
START = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)
SAID = Provenance(author="customer_statement", consultation_id="c-1")

GARDEN = [
    "Maria said her allotment garden is where she feels calm",
    "Maria grows tomatoes and beans in her garden every summer",
    "Maria worries the garden rent will rise next year",
    "Maria asked whether the garden committee can lower the rent",
    "Maria mentioned her sister helps in the garden at weekends",
    "Maria said the bus to the garden stops running in winter",
    "Maria keeps bees at the edge of the garden plot",
    "Maria sold honey from the garden bees at the market",
]


def client(handlers: ScriptedHandlers, seed: int = 7) -> LLMClient:
    return LLMClient([ChainLink(ScriptedProvider(handlers, seed=seed))], PromptLibrary([PROMPTS]))


def standard_handlers() -> ScriptedHandlers:
    handlers = ScriptedHandlers()
    register_simulacra_handlers(handlers)
    return handlers


def handlers_with_insights(insights_handler) -> ScriptedHandlers:
    handlers = ScriptedHandlers()
    register_importance_handlers(handlers)
    handlers.register(REFLECTION_QUESTIONS.name, handle_reflection_questions)
    handlers.register(REFLECTION_INSIGHTS.name, insights_handler)
    return handlers


def make_stream(llm: LLMClient, clock: VirtualClock) -> MemoryStream:
    return MemoryStream(HashingEmbedder(64), clock, LLMImportanceRater(llm))


async def observe(
    stream: MemoryStream, clock: VirtualClock, texts: list[str], importance: int = 5
) -> list[str]:
    ids = []
    for text in texts:
        clock.advance(timedelta(minutes=5))
        ids.append((await stream.add(text, MemoryKind.OBSERVATION, SAID, importance=importance)).id)
    return ids


def reflection_ids(stream: MemoryStream) -> list[str]:
    return [n.id for n in stream.nodes(kind=MemoryKind.REFLECTION)]


async def test_reflection_triggers_only_when_observed_importance_exceeds_the_threshold() -> None:
    clock = VirtualClock(START)
    llm = client(standard_handlers())
    stream = make_stream(llm, clock)
    reflector = Reflector(stream, llm, threshold=20.0)
    await observe(stream, clock, GARDEN[:4], importance=5)
    assert reflector.pending_importance() == 20.0
    assert not reflector.should_reflect()  # exceeds, not reaches
    # Plans are not observations: they do not count towards reflection.
    await stream.add("Plan to visit the garden", MemoryKind.PLAN, SAID, importance=10)
    assert not reflector.should_reflect()
    await observe(stream, clock, GARDEN[4:5], importance=1)
    assert reflector.pending_importance() == 21.0
    assert reflector.should_reflect()
    # Observations sharing one virtual instant are each counted once, however often we ask.
    await stream.add("Maria waved", MemoryKind.OBSERVATION, SAID, importance=2)
    await stream.add("Maria smiled", MemoryKind.OBSERVATION, SAID, importance=3)
    assert reflector.pending_importance() == reflector.pending_importance() == 26.0


async def test_reflect_stores_insights_that_cite_the_evidence_they_were_shown() -> None:
    clock = VirtualClock(START)
    llm = client(standard_handlers())
    stream = make_stream(llm, clock)
    observed = await observe(stream, clock, GARDEN, importance=6)
    reflector = Reflector(stream, llm, threshold=40.0)
    assert reflector.should_reflect()

    nodes = await reflector.reflect()
    report = reflector.last_report
    assert report is not None and report.status == "stored" and report.reason is None
    assert len(report.questions) == 3
    assert "garden" in " ".join(report.questions).lower()  # asked about what the memories share
    assert 1 <= len(nodes) <= 3 * 5
    assert [n.id for n in nodes] == reflection_ids(stream)
    shown_for = {node_id: o.evidence_ids for o in report.outcomes for node_id in o.stored_ids}
    for node in nodes:
        assert node.kind is MemoryKind.REFLECTION
        assert node.citations, "every insight cites something"
        assert set(node.citations) <= set(shown_for[node.id])
        assert all(c in stream for c in node.citations)
        assert {leaf.id for leaf in stream.explain(node.id).leaves()} <= set(observed)
    assert report.usage.total > 0
    # Counting starts again after a reflection.
    assert reflector.pending_importance() == 0.0
    assert not reflector.should_reflect()


async def test_unparseable_and_miscited_answers_are_retried_and_never_stored() -> None:
    seen_attempts: list[int] = []

    def flaky(call: ScriptedCall):
        attempt = call.variables["attempt"]
        seen_attempts.append(attempt)
        evidence = [m["id"] for m in call.variables["evidence"]]
        if attempt == 0:
            return "Insights: the garden matters (because of 1, 2)"  # not JSON at all
        if attempt == 1:
            assert call.variables.get("previous_error")
            return ReflectionInsights(
                insights=[
                    Insight(insight="The garden calms Maria.", evidence=[evidence[0]]),
                    Insight(insight="Maria made this one up.", evidence=["mem-999999"]),
                ]
            )
        return ReflectionInsights(
            insights=[Insight(insight="The garden calms Maria.", evidence=evidence[:2])]
        )

    clock = VirtualClock(START)
    llm = client(handlers_with_insights(flaky))
    stream = make_stream(llm, clock)
    await observe(stream, clock, GARDEN, importance=6)
    reflector = Reflector(stream, llm, threshold=10.0, questions=1, max_retries=2)

    nodes = await reflector.reflect()
    report = reflector.last_report
    assert report is not None and report.status == "stored"
    # Attempt 0 failed to parse twice (the client's one repair), then 1 was refused, then 2 kept.
    assert seen_attempts == [0, 0, 1, 2]
    (outcome,) = report.outcomes
    assert [r.attempt for r in outcome.rejected] == [0, 1]
    assert "no usable answer" in outcome.rejected[0].reason
    assert "not among the evidence shown: mem-999999" in outcome.rejected[1].reason
    assert [n.description for n in nodes] == ["The garden calms Maria."]
    assert nodes[0].citations == outcome.evidence_ids[:2]
    assert reflection_ids(stream) == [nodes[0].id]
    assert "Maria made this one up." not in {n.description for n in stream.nodes()}


@pytest.mark.parametrize(
    ("citation", "expected"),
    [
        ("unknown", "not among the evidence shown: mem-424242"),
        ("none", "cites no memory"),
        ("not shown", "not among the evidence shown: mem-000000"),
    ],
)
async def test_when_retries_run_out_nothing_is_stored_and_the_report_says_why(
    citation: str, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    def stubborn(call: ScriptedCall) -> ReflectionInsights:
        shown = [m["id"] for m in call.variables["evidence"]]
        assert "mem-000000" not in shown  # the first memory exists but is never retrieved here
        cites = {"unknown": ["mem-424242"], "none": [], "not shown": ["mem-000000"]}[citation]
        return ReflectionInsights(insights=[Insight(insight=f"A claim citing {citation}.", evidence=cites)])

    clock = VirtualClock(START)
    llm = client(handlers_with_insights(stubborn))
    stream = make_stream(llm, clock)
    await observe(stream, clock, ["An unrelated note about the weather in March"], importance=1)
    await observe(stream, clock, GARDEN, importance=6)
    reflector = Reflector(stream, llm, threshold=10.0, questions=2, max_retries=1, evidence=3)
    before = len(stream)

    with caplog.at_level(logging.WARNING, logger="simulacra.memory.reflection"):
        nodes = await reflector.reflect()

    assert nodes == []
    assert len(stream) == before and reflection_ids(stream) == []
    report = reflector.last_report
    assert report is not None and report.status == "failed"
    assert expected in (report.reason or "")
    assert all(len(o.rejected) == 2 and not o.stored_ids for o in report.outcomes)
    assert any("reflection failed" in r.getMessage() for r in caplog.records)


async def test_questions_that_never_parse_store_nothing() -> None:
    handlers = ScriptedHandlers()
    register_importance_handlers(handlers)
    handlers.register(REFLECTION_QUESTIONS.name, lambda call: '{"questions": "not a list"}')
    handlers.register(REFLECTION_INSIGHTS.name, handle_reflection_insights)
    clock = VirtualClock(START)
    llm = client(handlers)
    stream = make_stream(llm, clock)
    await observe(stream, clock, GARDEN, importance=6)
    reflector = Reflector(stream, llm, threshold=10.0, max_retries=1)

    assert await reflector.reflect() == []
    report = reflector.last_report
    assert report is not None and report.status == "failed" and report.questions == []
    assert "no usable questions after 2 attempts" in (report.reason or "")
    assert reflection_ids(stream) == []


async def test_reflections_cite_reflections_and_explain_walks_down_to_observations() -> None:
    clock = VirtualClock(START)
    llm = client(standard_handlers())
    stream = make_stream(llm, clock)
    observed = set(await observe(stream, clock, GARDEN, importance=6))
    reflector = Reflector(stream, llm, threshold=25.0)
    first = {n.id for n in await reflector.reflect()}
    assert first

    observed |= set(
        await observe(
            stream,
            clock,
            [
                "Maria said the garden bees swarmed in May",
                "Maria asked how much the garden rent rise would be",
                "Maria said the garden tomatoes failed this year",
            ],
            importance=9,
        )
    )
    assert reflector.should_reflect()
    second = await reflector.reflect()
    citing_reflections = [n for n in second if set(n.citations) & first]
    assert citing_reflections, "a second-round insight builds on a first-round one"
    for node in citing_reflections:
        tree = stream.explain(node.id)
        assert any(child.node.kind is MemoryKind.REFLECTION for child in tree.children)
        assert {leaf.id for leaf in tree.leaves()} <= observed
        assert all(leaf.kind is MemoryKind.OBSERVATION for leaf in tree.leaves())


async def test_a_reflector_on_a_reloaded_stream_counts_only_what_came_after_the_last_reflection(
    tmp_path: Path,
) -> None:
    clock = VirtualClock(START)
    llm = client(standard_handlers())
    stream = make_stream(llm, clock)
    await observe(stream, clock, GARDEN, importance=6)
    assert await Reflector(stream, llm, threshold=30.0).reflect()
    await observe(stream, clock, ["Maria said the garden gate was broken"], importance=7)
    stream.save(tmp_path / "memory")

    reloaded = MemoryStream.load(tmp_path / "memory", HashingEmbedder(64), clock, LLMImportanceRater(llm))
    assert Reflector(reloaded, llm, threshold=30.0).pending_importance() == 7.0


WORDS = ["garden", "rent", "bees", "sister", "bus", "honey", "market", "winter", "tomatoes", "committee"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memories=st.lists(
        st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), st.integers(1, 10)),
        min_size=1,
        max_size=20,
    ),
    slip_rate=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    seed=st.integers(0, 1000),
)
def test_stored_reflections_always_cite_evidence_they_were_shown(
    memories: list[tuple[list[str], int]], slip_rate: float, seed: int
) -> None:
    """Whatever the memories and however often the model miscites, nothing miscited is stored."""

    async def run() -> None:
        clock = VirtualClock(START)
        handlers = standard_handlers()
        llm = LLMClient(
            [
                ChainLink(
                    ScriptedProvider(handlers, seed=seed, behaviour={"reflection_bad_citation": slip_rate})
                )
            ],
            PromptLibrary([PROMPTS]),
        )
        stream = make_stream(llm, clock)
        for words, importance in memories:
            clock.advance(timedelta(minutes=1))
            await stream.add(
                "Maria spoke of " + " ".join(words), MemoryKind.OBSERVATION, SAID, importance=importance
            )
        reflector = Reflector(stream, llm, threshold=1.0, max_retries=1, evidence=5)
        nodes = await reflector.reflect()
        report = reflector.last_report
        assert report is not None
        shown_for = {node_id: o.evidence_ids for o in report.outcomes for node_id in o.stored_ids}
        for node in nodes:
            assert node.citations and set(node.citations) <= set(shown_for[node.id])
            assert all(c in stream for c in node.citations)
        assert reflection_ids(stream) == [n.id for n in nodes]
        if slip_rate == 1.0:
            assert nodes == [] and report.status == "failed"
        if slip_rate == 0.0:
            assert report.status == "stored" and not any(o.rejected for o in report.outcomes)

    asyncio.run(run())
