"""The pension advisor: a generative agent whose every utterance passes the compliance gate.

Each consultation gets its own `GenerativeAgent` over a session memory stream (what this customer
said, the consultation plan, the advisor's own replies), with the advisor's long-term memory, the
case base and the rules base plugged in as extra retrievers. Long-term memory is only read during
a virtual day and written between days (see `environments.memory`), so consultations running at
the same time cannot see each other's half-finished state.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from compliance.escalation import EscalationContext
from compliance.models import CustomerProfile, Turn, UtteranceContext, ValidationResult
from compliance.review_queue.models import RetrievedContext, RetrievedRecord
from compliance.validator_gate import ComplianceGate, GateOutcome
from environments.population import HiddenFact
from environments.tasks import ADVISOR_REFINE, ADVISOR_REPLY, AdvisorDraft, CustomerTurn, Segment
from environments.tools import AdvisorTools
from simulacra.agent import (
    AgentConfig,
    AgentState,
    ExtraSource,
    GateDecision,
    GenerationRequest,
    GenerativeAgent,
    Observation,
)
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.llm.client import LLMClient
from simulacra.llm.types import Task
from simulacra.memory.importance import ImportanceRater
from simulacra.memory.node import MemoryKind, Provenance, Scope
from simulacra.memory.stream import MemoryStream

QUESTION_TOPICS = ["other_pensions", "db_scheme", "circumstances", "scam_contact", "retirement_plans"]
GOAL_DESCRIPTIONS = {
    "drawdown": "explain the ways of taking money from a pension, their risks, and Pension Wise",
    "tax": "explain how pension withdrawals are taxed and the tax-free cash rules",
    "consolidation": "explain what combining pensions involves and what could be lost",
    "retirement_age": "explain when pensions and the State Pension can be taken",
    "contribution_planning": "explain the limits and tax relief on paying into pensions",
    "risk_assessment": "explain investment risk in pensions in plain terms",
}


# Retrieved items that reach the prompt as memories: the advisor's own experience, and what a
# real customer told it in earlier sessions (environments.live scopes that to the one customer).
MEMORY_SOURCES = ("experience", "customer_memory")


@runtime_checkable
class AdvisedCustomer(Protocol):
    """Who the advisor talks to: a simulated `Customer`, or a real one (`environments.live`).

    `hidden` holds facts the advisor learns only once the customer reveals their topic.
    """

    name: str
    goal: str
    literacy: str
    hidden: list[HiddenFact]

    def profile(self, revealed: set[str] | None = None) -> CustomerProfile: ...


class ConsultationState(BaseModel):
    """What the advisor side knows of one consultation so far."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    consultation_id: str
    customer: AdvisedCustomer
    # Set for a real customer's session: a held reply is delivered back to it after review.
    session_id: str | None = None
    revealed: set[str] = Field(default_factory=set)
    asked: set[str] = Field(default_factory=set)
    conversation: list[Turn] = Field(default_factory=list)
    last_customer: CustomerTurn | None = None
    db_transfer_raised: bool = False

    def record_customer(self, turn: CustomerTurn) -> None:
        self.revealed.update(turn.revealed)
        self.db_transfer_raised = self.db_transfer_raised or turn.raises_db_transfer
        self.conversation.append(Turn(speaker="customer", text=turn.text))
        self.last_customer = turn

    def record_advisor(self, text: str) -> None:
        self.conversation.append(Turn(speaker="advisor", text=text))

    def disclosed(self) -> list[dict[str, str]]:
        return [
            {"topic": h.topic, "statement": h.statement}
            for h in self.customer.hidden
            if h.topic in self.revealed
        ]


class AdvisorTurn(BaseModel):
    draft: AdvisorDraft  # the first draft: what it asked, which rules and cases it followed
    delivered_segments: list[Segment]
    outcome: GateOutcome
    tokens: int
    retrieved: dict[str, list[str]] = Field(default_factory=dict)
    plan_step: str | None = None


def section_items(request: GenerationRequest, section: str) -> list[dict[str, Any]]:
    return [
        {"id": item.id, "text": item.text, "source": item.source, **item.metadata}
        for item in request.context.section(section).kept
    ]


class AdvisorUtterance:
    """The advisor's drafting task; keeps the structured draft so the gate can refine it."""

    def __init__(self) -> None:
        self.last: AdvisorDraft | None = None
        # The variables of the last draft (with what was retrieved for it), for refinement and audit.
        self.last_variables: dict[str, Any] = {}

    @property
    def task(self) -> Task:
        return ADVISOR_REPLY

    def variables(self, request: GenerationRequest) -> dict[str, Any]:
        extra = dict(request.extra)
        retrieved = section_items(request, "extra")
        plan = request.plan
        self.last_variables = {
            **extra,
            "memories": [{"id": m["id"], "text": m["text"]} for m in section_items(request, "memories")]
            + [m for m in retrieved if m["source"] in MEMORY_SOURCES],
            "cases": [c for c in retrieved if c["source"] == "cases"],
            "rules": section_items(request, "domain_rules"),
            "plan_step": "" if plan is None else (plan.action or plan.phase_description or plan.goal),
        }
        return self.last_variables

    def text_of(self, output: Any) -> str:
        assert isinstance(output, AdvisorDraft)
        self.last = output
        return output.text


class AdvisorGate:
    """Adapts the compliance gate to the agent's `Gate` protocol (validate, refine, hold)."""

    def __init__(self, gate: ComplianceGate, llm: LLMClient, utterance: AdvisorUtterance) -> None:
        self.gate = gate
        self.llm = llm
        self.utterance = utterance
        self.outcome: GateOutcome | None = None
        self.final_draft: AdvisorDraft | None = None
        self.tokens = 0

    async def check(self, draft: str, context: dict[str, Any]) -> GateDecision:
        ctx: UtteranceContext = context["utterance_context"]
        variables: dict[str, Any] = self.utterance.last_variables
        latest = self.utterance.last
        assert latest is not None and latest.text == draft

        async def refine(text: str, validation: ValidationResult) -> str:
            nonlocal latest
            issues = [{"code": str(h.code), "message": h.message} for h in validation.rule_hits]
            issues += [
                {"code": str(c), "message": "flagged by the compliance judges"}
                for c in validation.violations
                if str(c) not in {i["code"] for i in issues}
            ]
            refined = await self.llm.call(
                ADVISOR_REFINE, {**variables, "draft": latest.model_dump(mode="json"), "issues": issues}
            )
            self.tokens += refined.usage.total
            latest = refined.output
            return latest.text

        notes = {draft: annotate(latest)}

        async def refine_and_note(text: str, validation: ValidationResult) -> str:
            refined = await refine(text, validation)
            notes[refined] = annotate(latest)
            return refined

        outcome = await self.gate.pass_through(
            ctx,
            draft,
            refine_and_note,
            annotations_for=lambda text: notes.get(text, {}),
            where=EscalationContext(
                consultation_id=context["consultation_id"],
                session_id=context.get("session_id"),
                turn=int(variables["turn"]),
                retrieved=RetrievedContext(
                    cases=retrieved_records(variables.get("cases", [])),
                    rules=retrieved_records(variables.get("rules", [])),
                    memories=retrieved_records(variables.get("memories", [])),
                ),
            ),
        )
        self.outcome = outcome
        self.final_draft = None if outcome.holding else latest
        reasons = [
            f"{a.validation.decided_by}: {', '.join(map(str, a.validation.violations)) or 'passed'}"
            for a in outcome.attempts
        ]
        return GateDecision(
            deliver=True,
            text=outcome.delivered_text,
            reasons=reasons,
            metadata={"holding": outcome.holding, "escalated": outcome.escalated},
        )


def retrieved_records(items: list[dict[str, Any]]) -> list[RetrievedRecord]:
    return [RetrievedRecord(id=str(i["id"]), text=str(i["text"]), score=i.get("score")) for i in items]


def annotate(draft: AdvisorDraft) -> dict[str, Any]:
    """Structured facts about a draft that a judge may use (the kinds of its parts)."""
    return {"segment_kinds": [s.kind for s in draft.segments]}


class AdvisorSession:
    """The advisor's side of one consultation."""

    def __init__(
        self,
        state: ConsultationState,
        *,
        llm: LLMClient,
        gate: ComplianceGate,
        tools: AdvisorTools,
        embedder: Embedder,
        rater: ImportanceRater,
        clock: Clock,
        retrievers: list[ExtraSource],
        config: AgentConfig,
        agent_state: AgentState | None = None,
    ) -> None:
        """`agent_state` resumes a session saved earlier (its memory stream is restored by the caller)."""
        self.state = state
        self.llm = llm
        self.tools = tools
        self.utterance = AdvisorUtterance()
        self.gate = AdvisorGate(gate, llm, self.utterance)
        self.provenance = Provenance(
            author="agent", scope=Scope.SESSION, consultation_id=state.consultation_id
        )
        self.stream = MemoryStream(embedder, clock, rater)
        self.agent = GenerativeAgent(
            "advisor",
            self.stream,
            llm,
            clock,
            self.utterance,
            self.gate,
            retrievers=retrievers,
            config=config,
            provenance=self.provenance,
            state=agent_state,
        )

    async def open(self) -> None:
        customer = self.state.customer
        goal = f"Give {customer.name} pension guidance: {GOAL_DESCRIPTIONS[customer.goal]}"
        await self.agent.start(goal, {"topic": customer.goal, "literacy": customer.literacy})

    def variables(self, turn: int, max_turns: int) -> dict[str, Any]:
        state = self.state
        profile = state.customer.profile(state.revealed)
        last = state.last_customer
        return {
            "customer": {"name": state.customer.name, **profile.model_dump(mode="json")},
            "goal": state.customer.goal,
            "disclosed": state.disclosed(),
            "unasked_topics": [
                t for t in QUESTION_TOPICS if t not in state.asked and t not in state.revealed
            ],
            "conversation": [t.model_dump() for t in state.conversation[:-1]],
            "customer_utterance": last.text if last else "",
            "asks_for_recommendation": bool(last and last.asks_for_recommendation),
            "db_transfer_raised": state.db_transfer_raised,
            "tools": self.tools.run(profile),
            "figures": self.tools.figures(),
            "tax_year": self.tools.tax_year,
            "turn": turn,
            "max_turns": max_turns,
        }

    async def reply(self, turn: int, max_turns: int) -> AdvisorTurn:
        state = self.state
        variables = self.variables(turn, max_turns)
        profile = state.customer.profile(state.revealed)
        ctx = UtteranceContext(
            customer=profile,
            customer_utterance=variables["customer_utterance"],
            advisor_utterance="",
            history=state.conversation[:-1],
            facts=self.tools.facts(variables["tools"]),
        )
        self.gate.tokens = 0
        observation = Observation(
            text=variables["customer_utterance"] or "(the customer has just arrived)",
            provenance=Provenance(
                author="customer_statement", scope=Scope.SESSION, consultation_id=state.consultation_id
            ),
            speaker="customer",
        )
        turn_record = await self.agent.respond(
            observation,
            extra=variables,
            gate_context={
                "utterance_context": ctx,
                "consultation_id": state.consultation_id,
                "session_id": state.session_id,
            },
        )
        outcome = self.gate.outcome
        draft = self.utterance.last  # the gate refines copies; this is still the turn's first draft
        assert outcome is not None and draft is not None, "the advisor gate decides every turn"
        state.asked.update(draft.asked_topics)
        delivered = [] if outcome.holding or self.gate.final_draft is None else self.gate.final_draft.segments
        return AdvisorTurn(
            draft=draft,
            delivered_segments=delivered,
            outcome=outcome,
            tokens=turn_record.usage.total + self.gate.tokens,
            retrieved=turn_record.retrieved,
            plan_step=None
            if turn_record.plan is None
            else (turn_record.plan.action or turn_record.plan.goal),
        )

    def plan_nodes(self) -> list[dict[str, Any]]:
        return [n.model_dump(mode="json") for n in self.stream.nodes(kind=MemoryKind.PLAN)]
