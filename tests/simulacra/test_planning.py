"""Hierarchical planning: plan, phases, actions; reactions pushed and popped; state that reloads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

import simulacra
from simulacra.clock import VirtualClock
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider
from simulacra.memory.importance import LLMImportanceRater
from simulacra.memory.node import MemoryKind, Provenance
from simulacra.memory.planning import (
    Planner,
    PlanningConfig,
    PlanState,
    PlanStatus,
    ReactDecision,
)
from simulacra.memory.stream import MemoryStream
from simulacra.scripted_tasks import register_simulacra_handlers

PROMPTS = Path(simulacra.__file__).parent / "prompts"
START = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)
SAID = Provenance(author="customer_statement", consultation_id="c-1")
GOAL = "explain the options for the train tickets and check for travel disruption"
EXPECTED = "Hello, I would like to understand the options for my train tickets"
UNEXPECTED = "Someone phoned offering a free upgrade with guaranteed refunds"


def build() -> tuple[Planner, MemoryStream, LLMClient, ScriptedHandlers]:
    handlers = ScriptedHandlers()
    register_simulacra_handlers(handlers)
    llm = LLMClient([ChainLink(ScriptedProvider(handlers, seed=3))], PromptLibrary([PROMPTS]))
    stream = MemoryStream(HashingEmbedder(64), VirtualClock(START), LLMImportanceRater(llm))
    return Planner(llm, stream, config=PlanningConfig(max_phases=5, max_actions=3)), stream, llm, handlers


async def hear(planner: Planner, stream: MemoryStream, text: str):
    node = await stream.add(text, MemoryKind.OBSERVATION, SAID, importance=5)
    return await planner.perceive(text, trigger_id=node.id), node.id


async def test_a_goal_becomes_phases_and_the_first_phase_becomes_actions() -> None:
    planner, stream, _, _ = build()
    plan = await planner.start(GOAL, {"traveller": "Maria"})

    titles = [p.title for p in plan.phases]
    assert titles[0] == "Open the conversation" and titles[-1] == "Summarise and agree next steps"
    assert "Explain the options for the train tickets" in titles and "Check for travel disruption" in titles
    assert all(p.expected_topics for p in plan.phases)
    # Only the phase being worked on is decomposed; later ones wait for what is learned first.
    assert plan.phases[0].decomposed and not any(p.decomposed for p in plan.phases[1:])
    assert 1 <= len(plan.phases[0].actions) <= 3
    position = planner.position()
    assert position is not None
    assert (position.depth, position.phase_index, position.action_index) == (0, 0, 0)
    assert position.action == plan.phases[0].actions[0].description

    # Both levels above the actions are plan memories, the phase citing its plan.
    plans = stream.nodes(kind=MemoryKind.PLAN)
    assert [n.metadata["level"] for n in plans] == ["plan", "phase"]
    assert plans[0].id == plan.memory_id and plans[1].citations == [plan.memory_id]
    assert "Check for travel disruption" in plans[0].description
    assert plan.phases[0].actions[0].description in plans[1].description


async def test_advancing_walks_every_action_of_every_phase_then_finishes() -> None:
    planner, stream, _, _ = build()
    plan = await planner.start(GOAL)
    visited = []
    position = planner.position()
    while position is not None:
        visited.append((position.phase_index, position.action_index))
        position = await planner.advance()
    per_phase = [len(p.actions) for p in plan.phases]
    assert all(n >= 1 for n in per_phase), "each phase was decomposed when it started"
    assert visited == [(p, a) for p, n in enumerate(per_phase) for a in range(n)]
    assert not planner.active and planner.state.finished[-1].status is PlanStatus.DONE
    assert all(a.status is PlanStatus.DONE for p in plan.phases for a in p.actions)
    assert len(stream.nodes(kind=MemoryKind.PLAN)) == 1 + len(plan.phases)


async def test_an_expected_utterance_continues_the_plan() -> None:
    planner, _, _, _ = build()
    await planner.start(GOAL)
    before = planner.position()
    update, _ = await hear(planner, planner.stream, EXPECTED)
    assert update.decision.decision == "continue" and update.pushed is None
    assert "tickets" in update.decision.reason
    assert planner.position() == before


async def test_an_unexpected_utterance_pushes_a_reaction_and_the_plan_resumes_where_it_was() -> None:
    planner, stream, _, _ = build()
    plan = await planner.start(GOAL)
    await planner.advance()
    interrupted = planner.position()
    assert interrupted is not None and interrupted.action_index == 1

    update, trigger_id = await hear(planner, stream, UNEXPECTED)
    assert update.decision.decision == "react"
    assert update.decision.sub_goal and "guaranteed" in update.decision.sub_goal
    sub = update.pushed
    assert sub is not None and sub.kind == "reaction" and sub.parent_id == plan.id
    inside = planner.position()
    assert inside is not None and inside.depth == 1 and inside.plan_id == sub.id
    assert inside.root_goal == GOAL
    # The reaction's memory cites the plan it interrupted and what triggered it.
    reaction_memory = stream.get(sub.memory_id or "")
    assert reaction_memory.kind is MemoryKind.PLAN
    assert reaction_memory.citations == [plan.memory_id, trigger_id]
    assert UNEXPECTED in reaction_memory.description

    steps = 0
    while (position := planner.position()) is not None and position.depth == 1:
        position = await planner.advance()
        steps += 1
    assert steps == sum(len(p.actions) for p in sub.phases)
    assert sub.status is PlanStatus.DONE and planner.state.finished == [sub]
    assert planner.position() == interrupted  # the interrupted action was not skipped


async def test_reactions_stop_at_the_maximum_depth() -> None:
    planner, stream, _, _ = build()
    planner.config = PlanningConfig(max_depth=1)
    await planner.start(GOAL)
    first, _ = await hear(planner, stream, UNEXPECTED)
    assert first.pushed is not None
    # The model is told no detour is possible, and the scripted one then carries on.
    second, _ = await hear(planner, stream, "My neighbour's parrot escaped through the kitchen window")
    assert second.decision.decision == "continue" and "no further detour" in second.decision.reason
    # Even a model that insists is not followed past the limit.
    forced = await planner.react(
        ReactDecision(decision="react", reason="insists", sub_goal="talk about parrots")
    )
    assert forced.pushed is None and forced.note and "max_depth=1" in forced.note
    assert len(planner.state.stack) == 2


def test_a_react_decision_needs_a_sub_goal() -> None:
    with pytest.raises(ValidationError, match="sub_goal"):
        ReactDecision(decision="react", reason="unexpected")
    with pytest.raises(ValidationError):
        ReactDecision(decision="pause", reason="?")  # type: ignore[arg-type]
    assert ReactDecision(decision="continue", reason="fits").sub_goal is None


async def test_starting_again_records_the_unfinished_plan_as_abandoned() -> None:
    planner, _, _, _ = build()
    first = await planner.start(GOAL)
    second = await planner.start("agree a date for the next meeting")
    assert planner.current is second and first.status is PlanStatus.ABANDONED
    assert planner.state.finished == [first]
    assert second.id != first.id


async def test_plan_state_survives_save_and_reload(tmp_path: Path) -> None:
    planner, stream, llm, _ = build()
    await planner.start(GOAL, {"traveller": "Maria"})
    await planner.advance()
    await hear(planner, stream, UNEXPECTED)
    await planner.advance()
    saved = planner.state.save(tmp_path / "checkpoint")
    assert saved.name == "plan_state.json"

    reloaded = PlanState.load(tmp_path / "checkpoint")
    assert reloaded == planner.state
    assert PlanState.from_json(planner.state.to_json()) == planner.state
    resumed = Planner(llm, stream, config=planner.config, state=reloaded)
    assert resumed.position() == planner.position()
    assert resumed.position() is not None and resumed.position().depth == 1  # type: ignore[union-attr]

    # The resumed planner walks on exactly as the original does: out of the reaction and back.
    async def walk(p: Planner) -> list[tuple[str, int, int, str | None]]:
        steps = []
        while (position := await p.advance()) is not None:
            steps.append((position.plan_id, position.phase_index, position.action_index, position.action))
        return steps

    original_walk, resumed_walk = await walk(planner), await walk(resumed)
    assert resumed_walk == original_walk
    assert resumed_walk[0][0] in {"plan-1", "plan-2"} and resumed_walk[-1][0] == "plan-1"
    assert [p.id for p in resumed.state.finished] == ["plan-2", "plan-1"]
