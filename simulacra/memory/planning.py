"""Hierarchical planning: a plan of phases of actions, with reactions pushed on a stack.

Park et al. (2023) plan top-down (a day's plan, then hourly chunks, then 5-15 minute actions) and,
when something unexpected is perceived, ask whether to react; a reaction re-plans from that point.
A conversation needs the same three levels (the whole consultation, its phases, the utterance-sized
actions) but a different repair: after answering the unexpected question the agent should go back to
where it was, not start over. So reactions are sub-plans pushed on a stack; when one finishes it is
popped and the interrupted plan resumes at the action it was on.

Phases are decomposed into actions only when they start, so later phases are planned with what was
learned in the earlier ones. Plans and phase decompositions are written to the memory stream as PLAN
memories (a phase's memory cites its plan's, a reaction's cites the plan it interrupted and the
observation that caused it), so retrieval and reflection see what the agent intended. `PlanState`
is plain pydantic data, so a consultation can be checkpointed and resumed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulacra.llm.client import to_jsonable
from simulacra.llm.types import Task
from simulacra.memory.node import MemoryKind, Provenance

if TYPE_CHECKING:
    from simulacra.memory.importance import LLMCaller
    from simulacra.memory.stream import MemoryStream

log = logging.getLogger(__name__)

STATE_FILE = "plan_state.json"


# --- what the model is asked to produce -------------------------------------------------------


class PhaseDraft(BaseModel):
    title: str = Field(min_length=1)
    description: str = Field(min_length=1)
    expected_topics: list[str] = Field(default_factory=list)


class ConsultationPlanDraft(BaseModel):
    phases: list[PhaseDraft] = Field(min_length=1)


class ActionDraft(BaseModel):
    description: str = Field(min_length=1)


class PhaseDecomposition(BaseModel):
    actions: list[ActionDraft] = Field(min_length=1)


class ReactDecision(BaseModel):
    """Whether an unexpected utterance should interrupt the plan, and with what sub-goal."""

    decision: Literal["continue", "react"]
    reason: str = Field(min_length=1)
    sub_goal: str | None = None

    @model_validator(mode="after")
    def _react_needs_a_goal(self) -> ReactDecision:
        if self.decision == "react" and not (self.sub_goal and self.sub_goal.strip()):
            raise ValueError("a 'react' decision needs a non-empty sub_goal")
        return self


PLAN_CONSULTATION: Task[ConsultationPlanDraft] = Task("planning.consultation", "v1", ConsultationPlanDraft)
DECOMPOSE_PHASE: Task[PhaseDecomposition] = Task("planning.decompose", "v1", PhaseDecomposition)
DECIDE_REACTION: Task[ReactDecision] = Task("agent.react", "v1", ReactDecision)


# --- the plan itself --------------------------------------------------------------------------


class PlanStatus(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    DONE = "done"
    ABANDONED = "abandoned"


class PlanAction(BaseModel):
    description: str
    status: PlanStatus = PlanStatus.PENDING


class PlanPhase(BaseModel):
    title: str
    description: str
    expected_topics: list[str] = Field(default_factory=list)
    actions: list[PlanAction] = Field(default_factory=list)  # empty until the phase starts
    status: PlanStatus = PlanStatus.PENDING
    memory_id: str | None = None  # the PLAN memory of this phase's decomposition

    @property
    def decomposed(self) -> bool:
        return bool(self.actions)


class ConsultationPlan(BaseModel):
    """A goal, its phases and a cursor; `kind="reaction"` marks a sub-plan pushed by a reaction."""

    id: str
    goal: str
    kind: Literal["plan", "reaction"] = "plan"
    phases: list[PlanPhase] = Field(min_length=1)
    phase_index: int = 0
    action_index: int = 0
    status: PlanStatus = PlanStatus.ACTIVE
    context: dict[str, Any] = Field(default_factory=dict)
    memory_id: str | None = None
    parent_id: str | None = None
    trigger: str | None = None  # the utterance a reaction answers
    trigger_id: str | None = None  # and its memory id

    @property
    def finished(self) -> bool:
        return self.phase_index >= len(self.phases)

    @property
    def phase(self) -> PlanPhase | None:
        return None if self.finished else self.phases[self.phase_index]

    @property
    def action(self) -> PlanAction | None:
        phase = self.phase
        if phase is None or self.action_index >= len(phase.actions):
            return None
        return phase.actions[self.action_index]


class PlanPosition(BaseModel):
    """Where the agent is: what an utterance is generated for and what a turn records."""

    plan_id: str
    goal: str
    kind: Literal["plan", "reaction"]
    depth: int  # 0 for the consultation plan, 1 for a reaction to it, ...
    phase_index: int
    phases: int
    phase_title: str
    phase_description: str
    expected_topics: list[str]
    action_index: int
    action: str | None
    root_goal: str


class PlanState(BaseModel):
    """Everything the planner knows; round-trips through JSON exactly."""

    stack: list[ConsultationPlan] = Field(default_factory=list)  # last is the one being followed
    finished: list[ConsultationPlan] = Field(default_factory=list)
    counter: int = 0  # for plan ids that are stable across save and reload

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> PlanState:
        return cls.model_validate_json(text)

    def save(self, folder: Path | str) -> Path:
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        target = path / STATE_FILE
        tmp = target.with_suffix(".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(target)  # never leave a half-written checkpoint behind
        return target

    @classmethod
    def load(cls, folder: Path | str) -> PlanState:
        return cls.from_json((Path(folder) / STATE_FILE).read_text(encoding="utf-8"))


class PlanningConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_phases: int = Field(default=6, ge=1)
    max_actions: int = Field(default=4, ge=1)
    reaction_phases: int = Field(default=2, ge=1, description="phases a reaction's sub-plan may have")
    max_depth: int = Field(default=2, ge=0, description="how many reactions may be stacked on the plan")
    recent_turns: int = Field(default=6, ge=0, description="recent utterances shown to the react decision")


class PlanUpdate(BaseModel):
    """What perceiving one utterance did to the plan."""

    decision: ReactDecision
    pushed: ConsultationPlan | None = None
    note: str | None = None


# --- the planner ------------------------------------------------------------------------------


def _phase_variables(phase: PlanPhase) -> dict[str, Any]:
    return {"title": phase.title, "description": phase.description, "expected_topics": phase.expected_topics}


class Planner:
    """Keeps the plan stack, asks the model for plans and decisions, and writes plan memories."""

    def __init__(
        self,
        llm: LLMCaller,
        stream: MemoryStream,
        *,
        config: PlanningConfig | None = None,
        provenance: Provenance | None = None,
        state: PlanState | None = None,
    ) -> None:
        self.llm = llm
        self.stream = stream
        self.config = config or PlanningConfig()
        self.provenance = provenance or Provenance(author="agent")
        self.state = state or PlanState()

    # -- reading the state

    @property
    def active(self) -> bool:
        return bool(self.state.stack)

    @property
    def current(self) -> ConsultationPlan | None:
        return self.state.stack[-1] if self.state.stack else None

    def position(self) -> PlanPosition | None:
        plan = self.current
        if plan is None or plan.phase is None:
            return None
        phase = plan.phase
        action = plan.action
        return PlanPosition(
            plan_id=plan.id,
            goal=plan.goal,
            kind=plan.kind,
            depth=len(self.state.stack) - 1,
            phase_index=plan.phase_index,
            phases=len(plan.phases),
            phase_title=phase.title,
            phase_description=phase.description,
            expected_topics=phase.expected_topics,
            action_index=plan.action_index,
            action=None if action is None else action.description,
            root_goal=self.state.stack[0].goal,
        )

    # -- making plans

    async def start(self, goal: str, context: Mapping[str, Any] | None = None) -> ConsultationPlan:
        """Plan a new consultation; an unfinished earlier one is recorded as abandoned, not lost."""
        while self.state.stack:
            old = self.state.stack.pop()
            old.status = PlanStatus.ABANDONED
            self.state.finished.append(old)
        # Plain JSON data, so the plan state saves and reloads unchanged.
        plan = await self._make_plan(goal, to_jsonable(dict(context or {})), kind="plan")
        self.state.stack.append(plan)
        await self.ensure_ready()
        return plan

    async def _make_plan(
        self,
        goal: str,
        context: dict[str, Any],
        *,
        kind: Literal["plan", "reaction"],
        parent: ConsultationPlan | None = None,
        trigger: str | None = None,
        trigger_id: str | None = None,
    ) -> ConsultationPlan:
        max_phases = self.config.max_phases if kind == "plan" else self.config.reaction_phases
        interrupted = self.position() if parent is not None else None
        result = await self.llm.call(
            PLAN_CONSULTATION,
            {
                "goal": goal,
                "context": context,
                "max_phases": max_phases,
                "kind": kind,
                "interrupted": None if interrupted is None else interrupted.model_dump(mode="json"),
                "trigger": trigger,
            },
        )
        draft: ConsultationPlanDraft = result.output
        phases = [
            PlanPhase(title=p.title, description=p.description, expected_topics=p.expected_topics)
            for p in draft.phases[:max_phases]
        ]
        phases[0].status = PlanStatus.ACTIVE
        self.state.counter += 1
        plan = ConsultationPlan(
            id=f"plan-{self.state.counter}",
            goal=goal,
            kind=kind,
            phases=phases,
            context=context,
            parent_id=None if parent is None else parent.id,
            trigger=trigger,
            trigger_id=trigger_id,
        )
        steps = "; ".join(f"{i + 1}) {p.title}" for i, p in enumerate(phases))
        lead = "Plan" if kind == "plan" else f"Reaction to '{trigger}'" if trigger else "Reaction"
        citations = [c for c in (None if parent is None else parent.memory_id, trigger_id) if c]
        node = await self.stream.add(
            f"{lead}: {goal}. Phases: {steps}.",
            MemoryKind.PLAN,
            self.provenance,
            citations=citations,
            metadata={"plan_id": plan.id, "level": "plan", "plan_kind": kind},
        )
        plan.memory_id = node.id
        return plan

    async def ensure_ready(self) -> PlanPosition | None:
        """Decompose the current phase into actions if it has none yet (phases start lazily)."""
        plan = self.current
        if plan is None or plan.phase is None or plan.phase.decomposed:
            return self.position()
        phase = plan.phase
        result = await self.llm.call(
            DECOMPOSE_PHASE,
            {
                "goal": plan.goal,
                "phase": _phase_variables(phase),
                "phase_number": plan.phase_index + 1,
                "phases": len(plan.phases),
                "context": plan.context,
                "max_actions": self.config.max_actions,
            },
        )
        decomposition: PhaseDecomposition = result.output
        actions = [
            PlanAction(description=a.description) for a in decomposition.actions[: self.config.max_actions]
        ]
        node = await self.stream.add(
            f"Phase {plan.phase_index + 1} of the plan to {plan.goal} ({phase.title}): "
            + "; ".join(a.description for a in actions)
            + ".",
            MemoryKind.PLAN,
            self.provenance,
            citations=[plan.memory_id] if plan.memory_id else [],
            metadata={"plan_id": plan.id, "level": "phase", "phase_index": plan.phase_index},
        )
        # Committed only once both the answer and its memory exist: a failure leaves the phase
        # undecomposed, and the next call simply tries again.
        actions[0].status = PlanStatus.ACTIVE
        phase.actions = actions
        phase.memory_id = node.id
        return self.position()

    # -- reacting

    async def consider(self, utterance: str, recent: Sequence[str] = ()) -> ReactDecision:
        """Ask whether `utterance` is something the current phase expected, or calls for a reaction."""
        position = self.position()
        if position is None:
            raise RuntimeError("there is no active plan to compare the utterance with; call start() first")
        result = await self.llm.call(
            DECIDE_REACTION,
            {
                "utterance": utterance,
                "goal": position.goal,
                "root_goal": position.root_goal,
                "phase": {
                    "title": position.phase_title,
                    "description": position.phase_description,
                    "expected_topics": position.expected_topics,
                },
                "action": position.action,
                "recent": list(recent)[-self.config.recent_turns :] if self.config.recent_turns else [],
                "depth": position.depth,
                "can_react": position.depth < self.config.max_depth,
            },
        )
        return result.output

    async def react(
        self, decision: ReactDecision, *, trigger: str | None = None, trigger_id: str | None = None
    ) -> PlanUpdate:
        """Push a sub-plan for a 'react' decision; the interrupted plan keeps its cursor."""
        if decision.decision != "react":
            return PlanUpdate(decision=decision)
        parent = self.current
        if parent is None:
            raise RuntimeError("cannot react without an active plan")
        depth = len(self.state.stack) - 1
        if depth >= self.config.max_depth:
            note = f"reaction not pushed: already {depth} reactions deep (max_depth={self.config.max_depth})"
            log.info(note)
            return PlanUpdate(decision=decision, note=note)
        assert decision.sub_goal is not None  # guaranteed by ReactDecision's validator
        sub = await self._make_plan(
            decision.sub_goal,
            dict(parent.context),
            kind="reaction",
            parent=parent,
            trigger=trigger,
            trigger_id=trigger_id,
        )
        self.state.stack.append(sub)
        await self.ensure_ready()
        return PlanUpdate(decision=decision, pushed=sub)

    async def perceive(
        self, utterance: str, *, trigger_id: str | None = None, recent: Sequence[str] = ()
    ) -> PlanUpdate:
        """Decide continue-or-react for one utterance and act on the decision."""
        decision = await self.consider(utterance, recent)
        return await self.react(decision, trigger=utterance, trigger_id=trigger_id)

    # -- moving on

    async def advance(self) -> PlanPosition | None:
        """The current action was carried out: move to the next one, the next phase, or back up the stack.

        Returns the new position, or None when every plan on the stack is finished.
        """
        plan = self.current
        if plan is None:
            return None
        if plan.phase is not None and not plan.phase.decomposed:
            # An earlier decomposition failed; plan the phase now so progress is counted against it.
            await self.ensure_ready()
        phase = plan.phase
        if phase is not None:
            if plan.action is not None:
                plan.action.status = PlanStatus.DONE
            plan.action_index += 1
            if plan.action_index >= len(phase.actions):
                phase.status = PlanStatus.DONE
                plan.phase_index += 1
                plan.action_index = 0
                if plan.phase is not None:
                    plan.phase.status = PlanStatus.ACTIVE
            elif plan.action is not None:
                plan.action.status = PlanStatus.ACTIVE
        while self.state.stack and self.state.stack[-1].finished:
            done = self.state.stack.pop()
            done.status = PlanStatus.DONE
            self.state.finished.append(done)
        return await self.ensure_ready()

    def abandon(self) -> ConsultationPlan | None:
        """Drop the plan being followed (e.g. a reaction made moot); the one below resumes."""
        if not self.state.stack:
            return None
        plan = self.state.stack.pop()
        plan.status = PlanStatus.ABANDONED
        self.state.finished.append(plan)
        return plan
