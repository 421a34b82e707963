"""The cognitive loop of a generative agent: perceive, store, decide, retrieve, generate, gate, act, reflect.

This is Park et al.'s agent architecture turned into one generic conversational turn. Everything
domain-specific comes in through small protocols, so this module knows nothing of any domain:

- `Retriever`: extra knowledge beyond the agent's own memories (a domain passes, say, a case base
  and a rules base), each landing in a context section with its own token budget;
- `UtteranceGenerator`: the LLM task that drafts the reply and the function that builds its
  variables, both chosen by whoever assembles the agent;
- `Gate`: the check every draft must pass before anyone sees it; it may deliver the draft, a refined
  version or a holding reply, or deliver nothing. A held draft is redrafted with the gate's reasons,
  a bounded number of times, and is never returned as delivered text.

Each turn returns an `AgentTurn` recording what was perceived, the plan position it acted on, which
memories and retrieved items made it into the prompt (and which were dropped for room), every draft
and gate decision, what was delivered, and the tokens the turn's LLM calls used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from simulacra.clock import Clock
from simulacra.context import AssembledContext, ContextAssembler, ContextBudget, ContextItem, TokenCounter
from simulacra.llm.errors import LLMChainExhausted, LLMError
from simulacra.llm.types import LLMResult, Task, Usage
from simulacra.memory.importance import LLMCaller
from simulacra.memory.node import MemoryKind, Provenance
from simulacra.memory.planning import (
    Planner,
    PlanningConfig,
    PlanPosition,
    PlanState,
    PlanUpdate,
    ReactDecision,
)
from simulacra.memory.reflection import ReflectionConfig, ReflectionReport, Reflector
from simulacra.memory.retrieval import RetrievalFilter
from simulacra.memory.stream import MemoryStream

log = logging.getLogger(__name__)

MEMORY_SOURCE = "memories"


# --- protocols for what a domain plugs in -----------------------------------------------------


class RetrievedItem(BaseModel):
    """One item from an extra retriever; `score` ranks it against the other items of its section."""

    id: str
    text: str
    score: float
    source: str  # which store it came from ("cases", "rules", ...)
    kind: str = ""  # what it is within that store
    metadata: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Retriever(Protocol):
    async def retrieve(self, query: str, k: int) -> list[RetrievedItem]: ...


class GateDecision(BaseModel):
    """A gate's verdict on a draft.

    `deliver=True` means `text` goes to the other party: the draft itself, a refined version, or a
    holding reply the gate vouches for. `deliver=False` means nothing goes.
    """

    deliver: bool
    text: str = ""
    reasons: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _delivered_text_is_not_empty(self) -> GateDecision:
        if self.deliver and not self.text.strip():
            raise ValueError("a gate that delivers must say what it delivers (text is empty)")
        return self


@runtime_checkable
class Gate(Protocol):
    async def check(self, draft: str, context: dict[str, Any]) -> GateDecision: ...


class OpenGate:
    """Delivers every draft unchanged: for agents whose words need no check (e.g. simulated customers).

    An explicit object rather than "no gate" so that an ungated agent is a visible decision.
    """

    async def check(self, draft: str, context: dict[str, Any]) -> GateDecision:
        return GateDecision(deliver=True, text=draft, reasons=["ungated agent"], metadata={"gate": "open"})


class GenerationRequest(BaseModel):
    """Everything the domain's variable builder may draw on to prompt for one draft."""

    agent: str
    turn: int
    observation: str | None
    context: AssembledContext
    plan: PlanPosition | None
    decision: ReactDecision | None
    recent: list[str]
    attempt: int
    feedback: list[str]  # the gate's reasons for holding the previous draft
    extra: dict[str, Any]  # whatever the caller passed for this turn


class UtteranceGenerator(Protocol):
    """Which task drafts the reply, how its variables are built, and how its text is read back."""

    @property
    def task(self) -> Task: ...

    def variables(self, request: GenerationRequest) -> dict[str, Any]: ...

    def text_of(self, output: Any) -> str: ...


@dataclass(frozen=True)
class TaskUtterance:
    """The usual generator: a domain's task plus a function from the request to its variables.

    The task may return plain text, or a model with a `text` field (e.g. a reply plus the reasoning
    the domain wants recorded).
    """

    task: Task
    build_variables: Callable[[GenerationRequest], dict[str, Any]]

    def variables(self, request: GenerationRequest) -> dict[str, Any]:
        return self.build_variables(request)

    def text_of(self, output: Any) -> str:
        if isinstance(output, str):
            return output.strip()
        text = getattr(output, "text", None)
        if not isinstance(text, str):
            raise TypeError(f"task {self.task.key} returned {type(output).__name__}, which has no text field")
        return text.strip()


class Utterance(BaseModel):
    text: str = Field(min_length=1)


# A generic conversational turn; a domain usually brings its own task with its own instructions.
UTTERANCE: Task[Utterance] = Task("agent.utterance", "v1", Utterance)


def utterance_variables(request: GenerationRequest) -> dict[str, Any]:
    """The variables of `agent.utterance`: the budgeted sections, the plan position and the dialogue."""
    return {
        "agent": request.agent,
        "observation": request.observation,
        "plan": None if request.plan is None else request.plan.model_dump(mode="json"),
        "sections": request.context.texts(),
        "recent": request.recent,
        "feedback": request.feedback,
        "attempt": request.attempt,
        "extra": request.extra,
    }


def generic_utterance() -> TaskUtterance:
    return TaskUtterance(UTTERANCE, utterance_variables)


@dataclass(frozen=True)
class ExtraSource:
    """An extra retriever, how many items to ask it for, and which context section they compete in."""

    name: str
    retriever: Retriever
    k: int = 5
    section: Literal["extra", "domain_rules"] = "extra"


# --- configuration, inputs and outputs --------------------------------------------------------


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memories_k: int = Field(default=12, ge=0, description="memories retrieved per turn")
    # Plans are left out by default: the current one is in the prompt already, as the plan position.
    memory_kinds: set[MemoryKind] = Field(
        default_factory=lambda: {MemoryKind.OBSERVATION, MemoryKind.REFLECTION}
    )
    recent_turns: int = Field(default=8, ge=0, description="dialogue lines kept for prompts")
    max_drafts: int = Field(default=2, ge=1, description="drafts tried before the turn delivers nothing")
    utterance_memory: str = Field(default='I said: "{text}"', description="how own words are remembered")
    remember_held_drafts: bool = True
    context: ContextBudget = Field(default_factory=ContextBudget)
    planning: PlanningConfig = Field(default_factory=PlanningConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)


class Observation(BaseModel):
    """What the agent perceives: the text to remember, and who it came from."""

    text: str = Field(min_length=1)
    provenance: Provenance
    speaker: str = "other"
    importance: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentTurn(BaseModel):
    """The record of one turn; `text` is what was delivered, and only what the gate delivered."""

    agent: str
    turn: int
    at: datetime
    observation: str | None = None
    observation_id: str | None = None
    decision: ReactDecision | None = None
    pushed_plan_id: str | None = None
    plan: PlanPosition | None = None  # the position the reply was drafted for
    next_plan: PlanPosition | None = None  # after the turn
    drafts: list[str] = Field(default_factory=list)
    gate_decisions: list[GateDecision] = Field(default_factory=list)
    gate: GateDecision
    delivered: bool
    text: str | None = None
    utterance_id: str | None = None
    retrieved: dict[str, list[str]] = Field(default_factory=dict)  # source -> ids used in the prompt
    dropped: dict[str, list[str]] = Field(default_factory=dict)  # context section -> ids left out
    prompt_tokens: int = 0  # by the budget's token counter
    usage: Usage = Field(default_factory=Usage)
    usage_by_task: dict[str, Usage] = Field(default_factory=dict)
    reflection: ReflectionReport | None = None
    notes: list[str] = Field(default_factory=list)  # steps that failed without stopping the turn

    @computed_field  # type: ignore[prop-decorator]
    @property
    def draft(self) -> str:
        """The last draft: the one the final gate decision is about."""
        return self.drafts[-1] if self.drafts else ""

    @model_validator(mode="after")
    def _only_gated_text_is_delivered(self) -> AgentTurn:
        if self.delivered != self.gate.deliver:
            raise ValueError("a turn is delivered exactly when its final gate decision delivers")
        if self.delivered and self.text != self.gate.text:
            raise ValueError("the delivered text must be the text the gate delivered")
        if not self.delivered and self.text is not None:
            raise ValueError("a turn the gate did not deliver has no delivered text")
        return self


class AgentState(BaseModel):
    """What the agent itself keeps between turns (the memory stream saves itself)."""

    turns: int = 0
    recent: list[str] = Field(default_factory=list)
    plan: PlanState = Field(default_factory=PlanState)


# --- metering ---------------------------------------------------------------------------------


class UsageMeter:
    """Passes calls through to the LLM client and adds up their tokens, so a turn can report its cost.

    The memory stream's importance rater holds its own client, so its calls are not in a turn's usage.
    """

    def __init__(self, inner: LLMCaller) -> None:
        self.inner = inner
        self._by_task: dict[str, Usage] = {}

    async def call(self, task: Task, variables: dict[str, Any], **options: Any) -> LLMResult:
        result = await self.inner.call(task, variables, **options)
        before = self._by_task.get(task.key, Usage())
        self._by_task[task.key] = Usage(
            input_tokens=before.input_tokens + result.usage.input_tokens,
            output_tokens=before.output_tokens + result.usage.output_tokens,
        )
        return result

    def take(self) -> dict[str, Usage]:
        taken, self._by_task = self._by_task, {}
        return taken


# --- the agent --------------------------------------------------------------------------------


@dataclass
class _TurnScratch:
    notes: list[str] = field(default_factory=list)
    decision: ReactDecision | None = None
    pushed: str | None = None


class GenerativeAgent:
    """One agent: its memory stream, planner and reflector, driven one conversational turn at a time.

    Turns are serialised by a lock, because a turn reads and moves the plan and the recent dialogue;
    many agents run concurrently, each with its own instance.
    """

    def __init__(
        self,
        name: str,
        stream: MemoryStream,
        llm: LLMCaller,
        clock: Clock,
        generator: UtteranceGenerator,
        gate: Gate,
        *,
        retrievers: Sequence[ExtraSource] = (),
        config: AgentConfig | None = None,
        sections: Mapping[str, Sequence[ContextItem]] | None = None,
        provenance: Provenance | None = None,
        memory_filter: RetrievalFilter | None = None,
        token_counter: TokenCounter | None = None,
        state: AgentState | None = None,
    ) -> None:
        self.name = name
        self.stream = stream
        self.clock = clock
        self.generator = generator
        self.gate = gate
        self.config = config or AgentConfig()
        names = [r.name for r in retrievers]
        if len(set(names)) != len(names) or MEMORY_SOURCE in names:
            raise ValueError(f"extra retrievers need distinct names other than '{MEMORY_SOURCE}': {names}")
        self.retrievers = list(retrievers)
        self.sections = {k: list(v) for k, v in (sections or {}).items()}  # static: system text, ...
        self.provenance = provenance or Provenance(author="agent")
        self.memory_filter = memory_filter
        base = memory_filter or RetrievalFilter()
        kinds = (
            set(self.config.memory_kinds)
            if base.kinds is None
            else set(self.config.memory_kinds) & base.kinds
        )
        self._retrieval_filter = base.model_copy(update={"kinds": kinds})
        self.assembler = (
            ContextAssembler(self.config.context, token_counter)
            if token_counter
            else ContextAssembler(self.config.context)
        )
        self.llm = UsageMeter(llm)
        state = state or AgentState()
        self.turns = state.turns
        self.recent = list(state.recent)
        self.planner = Planner(
            self.llm, stream, config=self.config.planning, provenance=self.provenance, state=state.plan
        )
        self.reflector = Reflector.from_config(
            stream, self.llm, self.config.reflection, provenance=self.provenance, filter=memory_filter
        )
        self._lock = asyncio.Lock()

    def state(self) -> AgentState:
        """A snapshot: later turns do not change it (the planner edits its state in place)."""
        # Dumped and validated back rather than deep-copied: pydantic does both in Rust, about
        # four times faster than copy.deepcopy on a plan, and the state round-trips exactly.
        plan = PlanState.model_validate(self.planner.state.model_dump())
        return AgentState(turns=self.turns, recent=list(self.recent), plan=plan)

    async def start(self, goal: str, context: Mapping[str, Any] | None = None) -> PlanPosition | None:
        """Plan the conversation ahead (optional: an agent without a plan simply responds)."""
        async with self._lock:
            await self.planner.start(goal, context)
            self.llm.take()  # planning before the first turn is not any turn's cost
            return self.planner.position()

    def _remember_line(self, line: str) -> None:
        self.recent.append(line)
        if self.config.recent_turns:
            del self.recent[: -self.config.recent_turns]
        else:
            self.recent.clear()

    async def respond(
        self,
        observation: Observation | None = None,
        *,
        sections: Mapping[str, Sequence[ContextItem]] | None = None,
        extra: Mapping[str, Any] | None = None,
        gate_context: Mapping[str, Any] | None = None,
    ) -> AgentTurn:
        """One turn. `observation=None` lets the agent speak first (e.g. to open a conversation)."""
        async with self._lock:
            return await self._turn(observation, sections or {}, dict(extra or {}), dict(gate_context or {}))

    async def _turn(
        self,
        observation: Observation | None,
        sections: Mapping[str, Sequence[ContextItem]],
        extra: dict[str, Any],
        gate_context: dict[str, Any],
    ) -> AgentTurn:
        self.turns += 1
        self.llm.take()  # calls made between turns (e.g. by the caller) are not this turn's
        scratch = _TurnScratch()

        # Perceive and store.
        observed_id = None
        if observation is not None:
            node = await self.stream.add(
                observation.text,
                MemoryKind.OBSERVATION,
                observation.provenance,
                importance=observation.importance,
                metadata={**observation.metadata, "speaker": observation.speaker, "turn": self.turns},
            )
            observed_id = node.id

        # Decide: continue the plan or react to the unexpected.
        await self._decide(observation, observed_id, scratch)
        position = self.planner.position()

        # Retrieve and budget the prompt.
        query = self._query(observation, position)
        context = await self._context(query, observed_id, sections)

        # Generate and gate, redrafting with the gate's reasons while drafts remain.
        drafts: list[str] = []
        decisions: list[GateDecision] = []
        feedback: list[str] = []
        for attempt in range(self.config.max_drafts):
            request = GenerationRequest(
                agent=self.name,
                turn=self.turns,
                observation=None if observation is None else observation.text,
                context=context,
                plan=position,
                decision=scratch.decision,
                recent=list(self.recent),
                attempt=attempt,
                feedback=feedback,
                extra=extra,
            )
            result = await self.llm.call(self.generator.task, self.generator.variables(request))
            draft = self.generator.text_of(result.output)
            drafts.append(draft)
            verdict = await self.gate.check(
                draft, self._gate_context(observation, position, context, attempt, gate_context)
            )
            decisions.append(verdict)
            if verdict.deliver:
                break
            feedback = list(verdict.reasons)
        final = decisions[-1]

        # Act: remember what was said (or that nothing was), and move the plan on.
        if observation is not None:
            # Only now: prompts show the dialogue before this utterance and the utterance apart.
            self._remember_line(f"{observation.speaker}: {observation.text}")
        utterance_id = None
        if final.deliver:
            said = await self.stream.add(
                self.config.utterance_memory.format(text=final.text),
                MemoryKind.OBSERVATION,
                self.provenance,
                metadata={"speaker": self.name, "turn": self.turns, "refined": final.text != drafts[-1]},
            )
            utterance_id = said.id
            self._remember_line(f"{self.name}: {final.text}")
            if self.planner.active:
                try:
                    await self.planner.advance()
                except (LLMChainExhausted, LLMError) as exc:
                    scratch.notes.append(f"planning the next phase failed, will retry next turn: {exc}")
        elif self.config.remember_held_drafts:
            reasons = "; ".join(r for d in decisions for r in d.reasons) or "no reason given"
            await self.stream.add(
                f"A reply I drafted was held back and not delivered ({reasons}).",
                MemoryKind.OBSERVATION,
                self.provenance,
                metadata={"speaker": self.name, "turn": self.turns, "held": True},
            )

        # Reflect when enough has happened.
        reflection = None
        if self.reflector.should_reflect():
            reflection = await self.reflector.reflect_with_report()

        by_task = self.llm.take()
        return AgentTurn(
            agent=self.name,
            turn=self.turns,
            at=self.clock.now(),
            observation=None if observation is None else observation.text,
            observation_id=observed_id,
            decision=scratch.decision,
            pushed_plan_id=scratch.pushed,
            plan=position,
            next_plan=self.planner.position(),
            drafts=drafts,
            gate_decisions=decisions,
            gate=final,
            delivered=final.deliver,
            text=final.text if final.deliver else None,
            utterance_id=utterance_id,
            retrieved=self._used_by_source(context),
            dropped={k: v for k, v in context.dropped_ids().items() if v},
            prompt_tokens=context.prompt_tokens,
            usage=Usage(
                input_tokens=sum(u.input_tokens for u in by_task.values()),
                output_tokens=sum(u.output_tokens for u in by_task.values()),
            ),
            usage_by_task=by_task,
            reflection=reflection,
            notes=scratch.notes,
        )

    async def _decide(
        self, observation: Observation | None, observed_id: str | None, scratch: _TurnScratch
    ) -> None:
        if not self.planner.active:
            return
        try:
            if observation is not None:
                update: PlanUpdate = await self.planner.perceive(
                    observation.text, trigger_id=observed_id, recent=self.recent
                )
                scratch.decision = update.decision
                scratch.pushed = None if update.pushed is None else update.pushed.id
                if update.note:
                    scratch.notes.append(update.note)
            await self.planner.ensure_ready()
        except (LLMChainExhausted, LLMError) as exc:
            # Without a decision the agent carries on with its plan; the turn still gets a reply.
            scratch.notes.append(f"continue-or-react step failed, continuing the plan: {exc}")

    @staticmethod
    def _query(observation: Observation | None, position: PlanPosition | None) -> str:
        if observation is not None:
            return observation.text
        if position is not None:
            return position.action or position.phase_description or position.goal
        return "the conversation so far"

    async def _context(
        self, query: str, observed_id: str | None, sections: Mapping[str, Sequence[ContextItem]]
    ) -> AssembledContext:
        # The observation itself is already in the prompt; retrieving it again would waste room.
        scored = (
            self.stream.retrieve(query, k=self.config.memories_k + 1, filter=self._retrieval_filter)
            if self.config.memories_k
            else []
        )
        memories = [
            ContextItem(
                id=s.node.id,
                text=s.node.description,
                score=s.score,
                source=MEMORY_SOURCE,
                metadata={"kind": str(s.node.kind)},
            )
            for s in scored
            if s.node.id != observed_id
        ][: self.config.memories_k]
        found = await asyncio.gather(*(src.retriever.retrieve(query, src.k) for src in self.retrievers))
        merged: dict[str, list[ContextItem]] = {name: list(items) for name, items in self.sections.items()}
        for name, items in sections.items():
            merged.setdefault(name, []).extend(items)
        merged.setdefault("memories", []).extend(memories)
        for src, items in zip(self.retrievers, found, strict=True):
            merged.setdefault(src.section, []).extend(
                ContextItem(
                    id=item.id,
                    text=item.text,
                    score=item.score,
                    source=src.name,
                    metadata={**item.metadata, "kind": item.kind, "store": item.source},
                )
                for item in items[: src.k]
            )
        return self.assembler.assemble(merged)

    def _used_by_source(self, context: AssembledContext) -> dict[str, list[str]]:
        # A list, not a set: the keys' order reaches transcripts, and a set of strings iterates in
        # a different order in every process (string hashing is randomised), so two runs of one
        # seed would write different files.
        used: dict[str, list[str]] = {
            name: [] for name in [MEMORY_SOURCE, *(r.name for r in self.retrievers)]
        }
        for section in context.sections.values():
            for item in section.kept:
                if item.source in used:
                    used[item.source].append(item.id)
        return used

    def _gate_context(
        self,
        observation: Observation | None,
        position: PlanPosition | None,
        context: AssembledContext,
        attempt: int,
        gate_context: dict[str, Any],
    ) -> dict[str, Any]:
        return {
            "agent": self.name,
            "turn": self.turns,
            "attempt": attempt,
            "observation": None if observation is None else observation.text,
            "recent": list(self.recent),
            "plan": None if position is None else position.model_dump(mode="json"),
            "sections": context.texts(),
            "retrieved": self._used_by_source(context),
            **gate_context,
        }
