"""The cognitive loop end to end: perceive, decide, retrieve, generate, gate, act, reflect."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import simulacra
from simulacra.agent import (
    AgentConfig,
    AgentState,
    AgentTurn,
    ExtraSource,
    GateDecision,
    GenerativeAgent,
    Observation,
    OpenGate,
    RetrievedItem,
    generic_utterance,
)
from simulacra.clock import VirtualClock
from simulacra.context import ContextBudget, ContextItem, approx_tokens
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider
from simulacra.memory.importance import LLMImportanceRater
from simulacra.memory.node import MemoryKind, Provenance
from simulacra.memory.reflection import ReflectionConfig
from simulacra.memory.stream import MemoryStream
from simulacra.scripted_tasks import keywords, register_simulacra_handlers

PROMPTS = Path(simulacra.__file__).parent / "prompts"
START = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)
SAID = Provenance(author="customer_statement", consultation_id="c-1")
ME = Provenance(author="agent", consultation_id="c-1")
GOAL = "explain the options for the train tickets and check for travel disruption"
EXPECTED = "I would like to understand the options for my train tickets"
UNEXPECTED = "Someone phoned offering a free upgrade with guaranteed refunds"
NOTES = {
    "note-tickets": "Two single train tickets can often be cheaper, but check the return rules first",
    "note-upgrade": "A cold call offering a free train upgrade is a common warning sign",
    "note-garden": "The community garden opens at nine on Saturdays",
}

TICKETS_NOTE_TOKENS = approx_tokens(NOTES["note-tickets"])


class WordGate:
    """Holds any draft using a banned word (saying which); delivers the others, optionally signed off."""

    def __init__(self, banned: set[str], sign_off: str = "") -> None:
        self.banned = banned
        self.sign_off = sign_off
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def check(self, draft: str, context: dict[str, Any]) -> GateDecision:
        self.seen.append((draft, context))
        hits = sorted(w for w in self.banned if re.search(rf"\b{re.escape(w)}\b", draft, re.IGNORECASE))
        if hits:
            return GateDecision(deliver=False, reasons=[f"uses the word '{w}'" for w in hits])
        return GateDecision(deliver=True, text=draft + self.sign_off, metadata={"checked": "words"})


class ReviewEverythingGate:
    """Lets nothing through: every draft waits for a human (the strictest possible gate)."""

    async def check(self, draft: str, context: dict[str, Any]) -> GateDecision:
        return GateDecision(deliver=False, reasons=["queued for human review"])


class KeywordNotes:
    """A small retriever over fixed notes, scored by shared content words (what a case base does)."""

    def __init__(self, notes: dict[str, str]) -> None:
        self.notes = notes

    async def retrieve(self, query: str, k: int) -> list[RetrievedItem]:
        asked = set(keywords(query))
        scored = []
        for note_id, text in self.notes.items():
            words = set(keywords(text))
            overlap = len(asked & words) / max(1, len(asked | words))
            if overlap > 0:
                scored.append(
                    RetrievedItem(id=note_id, text=text, score=overlap, source="notes", kind="note")
                )
        return sorted(scored, key=lambda item: -item.score)[:k]


def build(gate, config: AgentConfig | None = None) -> tuple[GenerativeAgent, MemoryStream, VirtualClock]:
    handlers = ScriptedHandlers()
    register_simulacra_handlers(handlers)
    llm = LLMClient([ChainLink(ScriptedProvider(handlers, seed=11))], PromptLibrary([PROMPTS]))
    clock = VirtualClock(START)
    stream = MemoryStream(HashingEmbedder(64), clock, LLMImportanceRater(llm))
    agent = GenerativeAgent(
        "Advisor",
        stream,
        llm,
        clock,
        generic_utterance(),
        gate,
        retrievers=[ExtraSource("cases", KeywordNotes(NOTES), k=2)],
        config=config or AgentConfig(reflection=ReflectionConfig(threshold=1000)),
        sections={"system": [ContextItem(id="system", text="You are a careful guide.", score=1.0)]},
        provenance=ME,
    )
    return agent, stream, clock


def heard(text: str) -> Observation:
    return Observation(text=text, provenance=SAID, speaker="customer")


async def test_a_consultation_turn_by_turn() -> None:
    gate = WordGate({"guaranteed"})
    agent, stream, clock = build(gate)
    start = await agent.start(GOAL)
    assert start is not None and start.phase_title == "Open the conversation"

    opening = await agent.respond()
    assert opening.delivered and opening.observation is None and opening.decision is None
    assert opening.text and opening.text.startswith("Hello")
    assert opening.plan == start and opening.next_plan is not None and opening.next_plan.action_index == 1

    clock.advance(timedelta(minutes=1))
    expected = await agent.respond(heard(EXPECTED))
    assert expected.decision is not None and expected.decision.decision == "continue"
    assert expected.pushed_plan_id is None and expected.plan is not None and expected.plan.depth == 0
    assert expected.retrieved["cases"][0] == "note-tickets"
    # Sources in a fixed order (memories, then the retrievers as given): it reaches transcripts.
    assert list(expected.retrieved) == ["memories", "cases"]
    assert expected.observation_id is not None
    assert expected.observation_id not in expected.retrieved["memories"]  # it is in the prompt already
    assert set(expected.retrieved["memories"]) <= {n.id for n in stream.nodes()}

    clock.advance(timedelta(minutes=1))
    turn = await agent.respond(heard(UNEXPECTED))
    # The plan did not expect this: a reaction was pushed, and the reply was drafted for it.
    assert turn.decision is not None and turn.decision.decision == "react"
    assert turn.pushed_plan_id is not None and turn.plan is not None
    assert turn.plan.depth == 1 and turn.plan.plan_id == turn.pushed_plan_id
    assert "note-upgrade" in turn.retrieved["cases"]
    # The first draft repeated the banned word and was held; the redraft was delivered instead.
    assert len(turn.drafts) == 2 and "guaranteed" in turn.drafts[0]
    assert [d.deliver for d in turn.gate_decisions] == [False, True]
    assert turn.gate == turn.gate_decisions[-1] and turn.delivered
    assert turn.text == turn.drafts[1] and "guaranteed" not in turn.text
    assert gate.seen[-1][1]["observation"] == UNEXPECTED and gate.seen[-1][1]["plan"]["depth"] == 1
    assert gate.seen[-1][1]["attempt"] == 1 and "cases" in gate.seen[-1][1]["retrieved"]
    # What was said is remembered as said; the held draft is nowhere in memory.
    said = stream.get(turn.utterance_id or "")
    assert said.kind is MemoryKind.OBSERVATION and said.provenance == ME
    assert said.description == f'I said: "{turn.text}"'
    assert all(turn.drafts[0] not in n.description for n in stream.nodes())
    # The turn accounts for its calls: the decision, the detour's planning and both drafts.
    assert {
        "agent.react@v1",
        "planning.consultation@v1",
        "planning.decompose@v1",
        "agent.utterance@v1",
    } <= set(turn.usage_by_task)
    assert turn.usage.total == sum(u.total for u in turn.usage_by_task.values()) > 0
    assert turn.turn == 3 and turn.at == clock.now()
    assert agent.recent[-2:] == [f"customer: {UNEXPECTED}", f"Advisor: {turn.text}"]


async def test_a_gate_that_holds_every_draft_delivers_nothing_and_the_plan_waits() -> None:
    agent, stream, _ = build(ReviewEverythingGate(), AgentConfig(max_drafts=3))
    await agent.start(GOAL)
    turn = await agent.respond(heard(EXPECTED))
    assert not turn.delivered and turn.text is None and turn.utterance_id is None
    assert len(turn.drafts) == 3 and not any(d.deliver for d in turn.gate_decisions)
    assert turn.next_plan == turn.plan  # nothing was said, so no action was carried out
    said = [n for n in stream.nodes() if n.provenance == ME and n.kind is MemoryKind.OBSERVATION]
    assert len(said) == 1 and said[0].metadata["held"] is True
    assert "queued for human review" in said[0].description
    assert all(d not in said[0].description for d in turn.drafts)
    assert agent.recent == [f"customer: {EXPECTED}"]


async def test_a_refining_gate_delivers_its_own_text_not_the_draft() -> None:
    agent, stream, _ = build(WordGate(set(), sign_off=" This is general guidance."))
    turn = await agent.respond(heard(EXPECTED))  # no plan: the agent simply answers
    assert turn.plan is None and turn.decision is None
    assert turn.delivered and turn.text == turn.drafts[0] + " This is general guidance."
    assert stream.get(turn.utterance_id or "").metadata["refined"] is True


def test_only_what_the_gate_delivered_can_be_recorded_as_delivered() -> None:
    held = GateDecision(deliver=False, reasons=["no"])
    base = {"agent": "a", "turn": 1, "at": START, "drafts": ["draft"]}
    with pytest.raises(ValidationError, match="no delivered text"):
        AgentTurn(**base, gate=held, delivered=False, text="draft")
    with pytest.raises(ValidationError, match="exactly when"):
        AgentTurn(**base, gate=held, delivered=True, text="draft")
    passed = GateDecision(deliver=True, text="refined")
    with pytest.raises(ValidationError, match="the text the gate delivered"):
        AgentTurn(**base, gate=passed, delivered=True, text="draft")
    with pytest.raises(ValidationError, match="must say what it delivers"):
        GateDecision(deliver=True, text="  ")


async def test_the_context_budget_decides_which_memories_are_used() -> None:
    budget = ContextBudget(memories=30, extra=TICKETS_NOTE_TOKENS)  # room for the better note only
    config = AgentConfig(context=budget, reflection=ReflectionConfig(threshold=1000))
    agent, stream, clock = build(OpenGate(), config)
    for i in range(6):
        clock.advance(timedelta(minutes=1))
        text = f"The traveller mentioned train ticket number {i} from an old booking"
        await stream.add(text, MemoryKind.OBSERVATION, SAID)
    turn = await agent.respond(heard(EXPECTED))
    kept, dropped = turn.retrieved["memories"], turn.dropped["memories"]
    assert kept and dropped and not set(kept) & set(dropped)
    assert sum(len(stream.get(i).description) for i in kept) <= 4 * 30
    # Both notes were retrieved; only the better one fits the extra section.
    assert turn.retrieved["cases"] == ["note-tickets"] and turn.dropped["extra"] == ["note-upgrade"]
    assert turn.prompt_tokens <= config.context.prompt_tokens


async def test_reflection_runs_inside_the_turn_when_it_is_due() -> None:
    agent, stream, clock = build(OpenGate(), AgentConfig(reflection=ReflectionConfig(threshold=12)))
    turns = []
    for text in [
        EXPECTED,
        "My train tickets were booked by two old employers",
        "One train ticket has a refund guarantee",
    ]:
        clock.advance(timedelta(minutes=2))
        turns.append(await agent.respond(heard(text)))
    reflected = [t for t in turns if t.reflection is not None]
    assert reflected, "enough happened for a reflection"
    report = reflected[0].reflection
    assert report is not None and report.status == "stored" and report.nodes
    assert {n.id for n in stream.nodes(kind=MemoryKind.REFLECTION)} >= {n.id for n in report.nodes}
    assert "reflection.insights@v1" in reflected[0].usage_by_task


async def test_agent_state_round_trips_and_the_plan_carries_on() -> None:
    agent, stream, clock = build(OpenGate())
    await agent.start(GOAL)
    await agent.respond()
    await agent.respond(heard(UNEXPECTED))
    state = AgentState.model_validate_json(agent.state().model_dump_json())
    assert state.plan.stack[-1].kind == "reaction"

    again = GenerativeAgent(
        "Advisor", stream, agent.llm.inner, clock, generic_utterance(), OpenGate(), state=state, provenance=ME
    )
    assert again.planner.position() == agent.planner.position()
    assert again.recent == agent.recent and again.turns == agent.turns == 2
    turn = await again.respond(heard("Yes, it was a free upgrade they offered"))
    assert turn.turn == 3 and turn.plan is not None and turn.plan.depth == 1


async def test_agent_state_is_a_snapshot_later_turns_do_not_change() -> None:
    agent, _, _ = build(OpenGate())
    await agent.start(GOAL)
    await agent.respond()
    snapshot = agent.state()
    before = snapshot.model_dump_json()
    assert snapshot.plan == agent.planner.state and snapshot.plan is not agent.planner.state
    await agent.respond(heard(UNEXPECTED))
    await agent.respond()
    assert agent.state().model_dump_json() != before, "the turns moved the plan on"
    assert snapshot.model_dump_json() == before


def test_extra_retrievers_need_distinct_names() -> None:
    handlers = ScriptedHandlers()
    register_simulacra_handlers(handlers)
    llm = LLMClient([ChainLink(ScriptedProvider(handlers))], PromptLibrary([PROMPTS]))
    clock = VirtualClock(START)
    stream = MemoryStream(HashingEmbedder(64), clock, LLMImportanceRater(llm))
    notes = KeywordNotes(NOTES)
    for names in (["cases", "cases"], ["memories"]):
        with pytest.raises(ValueError, match="distinct names"):
            GenerativeAgent(
                "a",
                stream,
                llm,
                clock,
                generic_utterance(),
                OpenGate(),
                retrievers=[ExtraSource(n, notes) for n in names],
            )
