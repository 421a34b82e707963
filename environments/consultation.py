"""One consultation: the customer agent and the advisor take turns, every advisor word gated.

The record it returns is the transcript and the compliance audit of each advisor turn. It holds
no wall-clock figures, so a seeded scripted run reproduces it byte for byte.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from environments.advisor import AdvisorSession, AdvisorTurn, ConsultationState
from environments.population import Customer
from environments.tasks import CUSTOMER_REPLY, CustomerTurn
from simulacra.clock import VirtualClock
from simulacra.llm.client import LLMClient

TURN_DURATION = timedelta(minutes=3)  # virtual time one exchange takes


class TurnRecord(BaseModel):
    speaker: Literal["customer", "advisor"]
    text: str
    at: datetime
    # Advisor turns only: what the gate saw and did.
    draft: str | None = None
    first_pass_compliant: bool | None = None
    first_pass_violations: list[str] = Field(default_factory=list)
    final_violations: list[str] = Field(default_factory=list)
    refinements: int = 0
    holding: bool = False
    escalated: bool = False
    escalation_reasons: list[str] = Field(default_factory=list)
    # The held turn reached the review queue. Its item id is not kept here: it includes the run id
    # (runs share the queue), and the transcript of a seeded run must not depend on the run.
    queued: bool = False
    decided_by: str | None = None
    used_rule_ids: list[str] = Field(default_factory=list)
    used_case_ids: list[str] = Field(default_factory=list)
    retrieved: dict[str, list[str]] = Field(default_factory=dict)
    plan_step: str | None = None
    # Kinds of the delivered reply's parts (a DB warning, a risk warning...), and what the advisor
    # knew when it drafted: what it takes to replay the turn or learn from it.
    delivered_kinds: list[str] = Field(default_factory=list)
    situation: dict[str, Any] = Field(default_factory=dict)
    # Customer turns only: the customer said they did not follow.
    confused: bool = False


class ConsultationRecord(BaseModel):
    id: str
    index: int
    customer_id: str
    goal: str
    vulnerable: bool
    has_db: bool
    started_at: datetime
    ended_at: datetime
    revealed: list[str]
    # Why it ended: the customer finished, or an escalation handed it to a human reviewer.
    ended_by: Literal["customer", "escalation"] = "customer"
    turns: list[TurnRecord]
    tokens: int

    @property
    def advisor_turns(self) -> list[TurnRecord]:
        return [t for t in self.turns if t.speaker == "advisor"]


def customer_variables(
    customer: Customer, state: ConsultationState, turn: int, max_turns: int, last: AdvisorTurn | None
) -> dict:
    persona = customer.model_dump(
        include={
            "name",
            "age",
            "literacy",
            "vulnerable",
            "situation",
            "goal",
            "wants_db_transfer",
            "income_gbp",
        }
    )
    return {
        "persona": persona,
        "hidden": [
            h.model_dump(include={"topic", "statement"})
            for h in customer.hidden
            if h.topic not in state.revealed
        ],
        "advisor_asked": list(last.draft.asked_topics) if last and not last.outcome.holding else [],
        "advisor_jargon": bool(
            last and not last.outcome.holding and any(s.kind == "jargon" for s in last.delivered_segments)
        ),
        "conversation": [t.model_dump() for t in state.conversation],
        "turn": turn,
        "max_turns": max_turns,
    }


def consultation_id(index: int) -> str:
    return f"consultation-{index:05d}"


async def run_consultation(
    index: int,
    customer: Customer,
    session: AdvisorSession,
    llm: LLMClient,
    clock: VirtualClock,
    max_turns: int,
) -> ConsultationRecord:
    """Run one consultation; `session` is the advisor's side, built on the same `clock`."""
    start = clock.now()
    state = session.state
    await session.open()
    turns: list[TurnRecord] = []
    tokens = 0
    last: AdvisorTurn | None = None
    ended_by: Literal["customer", "escalation"] = "customer"
    for turn in range(max_turns + 1):
        said = await llm.call(CUSTOMER_REPLY, customer_variables(customer, state, turn, max_turns, last))
        tokens += said.usage.total
        reply: CustomerTurn = said.output
        state.record_customer(reply)
        turns.append(TurnRecord(speaker="customer", text=reply.text, at=clock.now(), confused=reply.confused))
        clock.advance(TURN_DURATION)
        if reply.ends or turn == max_turns:
            break
        last = await session.reply(turn=turn + 1, max_turns=max_turns)
        tokens += last.tokens
        outcome = last.outcome
        state.record_advisor(outcome.delivered_text)
        turns.append(
            TurnRecord(
                speaker="advisor",
                text=outcome.delivered_text,
                at=clock.now(),
                draft=outcome.attempts[0].draft,
                first_pass_compliant=outcome.first_pass_compliant,
                first_pass_violations=[str(c) for c in outcome.first_pass.violations],
                final_violations=[str(c) for c in outcome.final.violations],
                refinements=outcome.refinements,
                holding=outcome.holding,
                escalated=outcome.escalated,
                escalation_reasons=[r for a in outcome.attempts for r in a.validation.escalation_reasons],
                queued=outcome.escalation_id is not None,
                decided_by=outcome.final.decided_by,
                used_rule_ids=last.draft.used_rule_ids,
                used_case_ids=last.draft.used_case_ids,
                retrieved=last.retrieved,
                plan_step=last.plan_step,
                delivered_kinds=[s.kind for s in last.delivered_segments],
                situation={
                    "disclosed": sorted(state.revealed),
                    "db_transfer_raised": state.db_transfer_raised,
                    "asks_for_recommendation": reply.asks_for_recommendation,
                },
            )
        )
        clock.advance(TURN_DURATION)
        if outcome.escalated:
            # A human now owns the conversation: the customer has been told a colleague will come
            # back to them, so the simulated consultation stops here.
            ended_by = "escalation"
            break
    return ConsultationRecord(
        id=state.consultation_id,
        index=index,
        customer_id=customer.id,
        goal=customer.goal,
        vulnerable=customer.vulnerable,
        has_db=customer.has_db,
        started_at=start,
        ended_at=clock.now(),
        revealed=sorted(state.revealed),
        ended_by=ended_by,
        turns=turns,
        tokens=tokens,
    )
