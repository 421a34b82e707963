"""One consultation: the customer agent and the advisor take turns, every advisor word gated.

The customer agent (`environments.customer_agent`) speaks first and decides when to stop; it
hears only what the gate delivered. Once it is over, the outcome is judged independently of the
advisor (`environments.outcomes`). The record it returns is the transcript, the compliance audit of
each advisor turn and that outcome. It holds no wall-clock figures, so a seeded scripted run
reproduces it byte for byte.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from environments.advisor import AdvisorSession, AdvisorTurn
from environments.customer_agent import CustomerAgent, Listener
from environments.outcomes import ConsultationOutcome, OutcomeJudge, compliance_record
from environments.population import Customer
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
    # Every judge's verdict on the first draft (empty with the rules-only validator): the trace
    # gets a span and an assessment per judge from these.
    judge_verdicts: list[dict[str, Any]] = Field(default_factory=list)
    used_rule_ids: list[str] = Field(default_factory=list)
    used_case_ids: list[str] = Field(default_factory=list)
    retrieved: dict[str, list[str]] = Field(default_factory=dict)
    plan_step: str | None = None
    # Kinds of the delivered reply's parts (a DB warning, a risk warning...), and what the advisor
    # knew when it drafted: what it takes to replay the turn or learn from it.
    delivered_kinds: list[str] = Field(default_factory=list)
    situation: dict[str, Any] = Field(default_factory=dict)
    # Customer turns only: the customer said they did not follow, or that they felt rushed.
    confused: bool = False
    pressured: bool = False


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
    # Judged after the consultation, independently of the advisor (None in records made before).
    outcome: ConsultationOutcome | None = None

    @property
    def advisor_turns(self) -> list[TurnRecord]:
        return [t for t in self.turns if t.speaker == "advisor"]


def consultation_id(index: int) -> str:
    return f"consultation-{index:05d}"


async def run_consultation(
    index: int,
    customer: Customer,
    session: AdvisorSession,
    llm: LLMClient,
    clock: VirtualClock,
    max_turns: int,
    *,
    customer_agent: CustomerAgent | None = None,
    judge: OutcomeJudge | None = None,
) -> ConsultationRecord:
    """Run one consultation; `session` is the advisor's side, built on the same `clock`.

    By default the customer agent and the outcome judge use the session's embedder, importance
    rater and knowledge base (the run's own), so a caller needs to pass nothing more.
    """
    start = clock.now()
    state = session.state
    knowledge = session.tools.knowledge
    agent = customer_agent or CustomerAgent(
        customer,
        consultation_id=state.consultation_id,
        llm=llm,
        clock=clock,
        embedder=session.stream.embedder,
        rater=session.stream.rater,
        listener=Listener(knowledge),
    )
    judge = judge or OutcomeJudge(llm, knowledge)
    await agent.start()
    await session.open()
    turns: list[TurnRecord] = []
    tokens = 0
    last: AdvisorTurn | None = None
    ended_by: Literal["customer", "escalation"] = "customer"
    for turn in range(max_turns + 1):
        conversation = [t.model_dump() for t in state.conversation]
        reply = await agent.speak(turn, max_turns, conversation)
        state.record_customer(reply)
        turns.append(
            TurnRecord(
                speaker="customer",
                text=reply.text,
                at=clock.now(),
                confused=reply.confused,
                pressured=reply.pressured,
            )
        )
        clock.advance(TURN_DURATION)
        if reply.ends or turn == max_turns:
            break
        last = await session.reply(turn=turn + 1, max_turns=max_turns)
        tokens += last.tokens
        outcome = last.outcome
        state.record_advisor(outcome.delivered_text)
        await agent.hear(
            turn + 1,
            outcome.delivered_text,
            last.delivered_segments,
            [] if outcome.holding else last.draft.asked_topics,
            outcome.holding,
        )
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
                judge_verdicts=outcome.first_pass.judge_verdicts,
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
    judged = await judge.judge(
        agent,
        [t.model_dump() for t in state.conversation],
        compliance_record([t for t in turns if t.speaker == "advisor"]),
    )
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
        tokens=tokens + agent.tokens + judged.tokens,
        outcome=judged,
    )
