"""Judging a finished consultation from outside the advisor.

Three independent parts, none of them the advisor's own view of how it went:

- the customer's verdict: the customer agent rates its satisfaction and says whether it got what
  it came for, from its memories and its own account of the conversation (`CUSTOMER_RATING`);
- an understanding quiz: questions put to the customer agent, answered from the memories each
  question brings to mind (`CUSTOMER_QUIZ`), whose right answers are computed here from the
  customer's true profile with the same calculators the advisor's tools use, and scored in code;
- the compliance record of the advisor's turns (first-pass and final verdicts, holds, escalation).

From these come the compliance codes whose protection the customer ended up without (`gaps`): it
did not know what a warning it never heard would have told it. Learning reads them to send a
suboptimal consultation to rule accumulation even when every reply passed the validator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from compliance.calculators import state_pension_age, tax_free_cash
from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.text import normalise
from environments.customer_agent import GOAL_WORDS, CustomerAgent, Experience, persona
from environments.population import Customer
from environments.tasks import (
    CUSTOMER_QUIZ,
    CUSTOMER_RATING,
    CustomerRating,
    QuizAnswer,
    QuizAnswerKind,
    QuizAnswers,
)
from simulacra.llm.client import LLMClient

QuizTopic = Literal[
    "tax_free_cash",
    "db_guarantees",
    "pension_wise",
    "state_pension_age",
    "annual_allowance",
    "investment_risk",
    "transfer_losses",
]
# Below this share of right answers a consultation left the customer not understanding its options.
UNDERSTANDING_PASS = 0.5
# Memories brought to mind per question and for the rating: a little more than a turn's, since the
# whole conversation is being looked back on.
RECALL_K = 8
# Goals that mean taking money from DC savings, where the Pension Wise nudge applies (COBS 19.7).
ACCESS_GOALS = frozenset({"drawdown", "tax", "retirement_age"})
# Goals that put a DB scheme's benefits in play (taking, moving or combining pensions).
DB_GOALS = frozenset({"drawdown", "tax", "consolidation", "retirement_age"})
# A wrong answer on one of these topics, when the point that teaches it was never heard, is a
# protection the customer went without.
QUIZ_PROTECTIONS: dict[str, tuple[str, ComplianceCode]] = {
    "db_guarantees": ("db_warning", ComplianceCode.MISSING_DB_WARNING),
    "pension_wise": ("pension_wise", ComplianceCode.MISSING_PENSION_WISE_NUDGE),
    "investment_risk": ("risk_warning", ComplianceCode.MISSING_RISK_DISCLOSURE),
}
SATISFACTION_MIN, SATISFACTION_MAX = 1, 5


class QuizQuestion(BaseModel):
    """One understanding question and its right answer, computed from the customer's profile."""

    id: str
    topic: QuizTopic
    kind: QuizAnswerKind
    question: str
    expected: float | bool
    # Amounts: the relative error a remembered figure may have. Ages: the accepted range in years.
    tolerance: float = 0.0
    accepted_range: tuple[float, float] | None = None
    must_name: str | None = None  # a name the answer must contain (lower case)
    basis: str  # how the right answer was worked out

    def score(self, answer: QuizAnswer | None) -> bool:
        if answer is None:
            return False
        if self.kind == "yes_no":
            named = self.must_name is None or self.must_name in normalise(answer.answer)
            return answer.yes is self.expected and named
        if answer.value is None:
            return False
        if self.kind == "age_years":
            assert self.accepted_range is not None
            low, high = self.accepted_range
            return low <= answer.value <= high
        expected = float(self.expected)
        return abs(answer.value - expected) <= self.tolerance * expected


class QuizResult(BaseModel):
    question: QuizQuestion
    answer: QuizAnswer | None
    correct: bool


class AuditedTurn(Protocol):
    """What the compliance record needs of an advisor turn (`environments.consultation.TurnRecord`)."""

    first_pass_compliant: bool | None
    first_pass_violations: list[str]
    final_violations: list[str]
    refinements: int
    holding: bool
    escalated: bool


class ComplianceRecord(BaseModel):
    advisor_turns: int
    first_pass_compliant: bool
    first_pass_violations: list[str]
    final_violations: list[str]
    refinements: int
    holding_replies: int
    escalated: bool


def compliance_record(turns: Sequence[AuditedTurn]) -> ComplianceRecord:
    return ComplianceRecord(
        advisor_turns=len(turns),
        first_pass_compliant=all(bool(t.first_pass_compliant) for t in turns),
        first_pass_violations=sorted({c for t in turns for c in t.first_pass_violations}),
        final_violations=sorted({c for t in turns for c in t.final_violations}),
        refinements=sum(t.refinements for t in turns),
        holding_replies=sum(t.holding for t in turns),
        escalated=any(t.escalated for t in turns),
    )


class ConsultationOutcome(BaseModel):
    """How the consultation went, judged independently of the advisor."""

    rating: int = Field(ge=SATISFACTION_MIN, le=SATISFACTION_MAX)
    satisfaction: float = Field(ge=0.0, le=1.0)  # the rating on [0, 1]
    goal_achieved: bool
    reason: str = ""
    quiz: list[QuizResult] = Field(default_factory=list)
    understanding: float | None = Field(default=None, ge=0.0, le=1.0)  # None: nothing to ask
    experience: Experience
    compliance: ComplianceRecord
    gaps: list[str] = Field(default_factory=list)
    tokens: int = 0

    @property
    def understood(self) -> bool:
        return self.understanding is None or self.understanding >= UNDERSTANDING_PASS


def quiz_for(customer: Customer, kb: KnowledgeBase) -> list[QuizQuestion]:
    """The questions this consultation should have left the customer able to answer.

    Only what its topic and its (true) profile make relevant: a customer who came about paying in
    is not asked about Pension Wise; one with a DB scheme who came about taking, moving or
    combining pensions is asked about its guarantees, whether or not the advisor found out about it.
    """
    goal = customer.goal
    out: list[QuizQuestion] = []
    tolerance = kb.figure_check.approximate_tolerance  # people remember figures roughly
    dc_pots = [p for p in customer.all_pots if p.type == "DC"]
    if goal in ("drawdown", "tax") and dc_pots:
        tfc = tax_free_cash(customer.all_pots, kb)
        out.append(
            QuizQuestion(
                id="tax_free_cash",
                topic="tax_free_cash",
                kind="amount_gbp",
                question="Roughly how much could you take from your pensions tax-free, in pounds?",
                expected=tfc.amount_gbp,
                tolerance=tolerance,
                basis=f"tax_free_cash over all {len(dc_pots)} DC pot(s) of £{tfc.dc_total_gbp:,.0f} "
                f"({', '.join(tfc.knowledge_used)})",
            )
        )
    if customer.has_db and (goal in DB_GOALS or customer.wants_db_transfer):
        out.append(
            QuizQuestion(
                id="db_guarantees",
                topic="db_guarantees",
                kind="yes_no",
                question=(
                    "If you moved your final salary (defined benefit) pension to another kind of pension, "
                    "would you give up its guaranteed income?"
                ),
                expected=True,
                basis="the customer has a DB pension: a transfer gives up its guarantees",
            )
        )
    if goal in ACCESS_GOALS or customer.wants_db_transfer:
        out.append(
            QuizQuestion(
                id="pension_wise",
                topic="pension_wise",
                kind="yes_no",
                question=(
                    "Is there a free, impartial government service that can talk you through your options "
                    "before you take money from your pension? If so, what is it called?"
                ),
                expected=True,
                must_name="pension wise",
                basis="accessing DC savings: Pension Wise is free and impartial (COBS 19.7 nudge)",
            )
        )
    if goal == "retirement_age":
        spa = state_pension_age(customer.age, kb)
        earliest = spa.earliest.years + spa.earliest.months / 12
        latest = spa.latest.years + spa.latest.months / 12
        out.append(
            QuizQuestion(
                id="state_pension_age",
                topic="state_pension_age",
                kind="age_years",
                question="At what age will you start getting your State Pension?",
                expected=latest,
                # Someone of this age may fall either side of a band boundary; half a year either way
                # of the possible ages is a right answer remembered in whole years.
                accepted_range=(earliest - 0.5, latest + 0.5),
                basis=f"state_pension_age for age {customer.age}: {spa.earliest} to {spa.latest} "
                f"({', '.join(spa.sources)})",
            )
        )
    if goal == "contribution_planning":
        allowance = kb.figure("annual_allowance")
        out.append(
            QuizQuestion(
                id="annual_allowance",
                topic="annual_allowance",
                kind="amount_gbp",
                question="How much can most people pay into their pensions each year with tax relief, in pounds?",
                expected=allowance.value,
                tolerance=tolerance,
                basis=f"annual_allowance {allowance.tax_year} ({allowance.source})",
            )
        )
    if goal in ("risk_assessment", "drawdown"):
        out.append(
            QuizQuestion(
                id="investment_risk",
                topic="investment_risk",
                kind="yes_no",
                question="Could the value of your pension investments fall as well as rise?",
                expected=True,
                basis="invested pensions can fall in value (COBS 4 risk warnings)",
            )
        )
    if goal == "consolidation":
        out.append(
            QuizQuestion(
                id="transfer_losses",
                topic="transfer_losses",
                kind="yes_no",
                question="Could moving an old pension lose you valuable guarantees or cost you exit fees?",
                expected=True,
                basis="transfers can lose guarantees such as guaranteed annuity rates, or incur exit fees",
            )
        )
    return out


def score_quiz(questions: Sequence[QuizQuestion], answers: QuizAnswers) -> list[QuizResult]:
    given = {a.id: a for a in answers.answers}
    return [
        QuizResult(question=q, answer=given.get(q.id), correct=q.score(given.get(q.id))) for q in questions
    ]


def gaps_of(
    results: Sequence[QuizResult], heard_kinds: set[str], experience: Experience, customer: Customer
) -> list[str]:
    gaps = set()
    for result in results:
        protection = QUIZ_PROTECTIONS.get(result.question.topic)
        if protection is not None and not result.correct and protection[0] not in heard_kinds:
            gaps.add(str(protection[1]))
    needs_plain = customer.vulnerable or customer.literacy == "low"
    if needs_plain and (experience.confusing_replies or experience.pressured_replies):
        gaps.add(str(ComplianceCode.UNSUITABLE_FOR_VULNERABLE))
    return sorted(gaps)


class OutcomeJudge:
    """Asks the customer agent for its verdict and puts the quiz to it once the consultation is over."""

    def __init__(self, llm: LLMClient, kb: KnowledgeBase, recall_k: int = RECALL_K) -> None:
        self.llm = llm
        self.kb = kb
        self.recall_k = recall_k

    def rating_variables(self, agent: CustomerAgent, conversation: list[dict[str, Any]]) -> dict[str, Any]:
        goal_words = GOAL_WORDS[agent.customer.goal]
        return {
            "persona": persona(agent.customer),
            "goal_words": goal_words,
            "memories": agent.recall(goal_words, self.recall_k),
            "experience": agent.experience().model_dump(),
            "conversation": conversation,
        }

    def quiz_variables(self, agent: CustomerAgent, questions: Sequence[QuizQuestion]) -> dict[str, Any]:
        return {
            "persona": persona(agent.customer),
            "experience": agent.experience().model_dump(),
            "questions": [
                {
                    "id": q.id,
                    "topic": q.topic,
                    "kind": q.kind,
                    "question": q.question,
                    "memories": agent.recall(q.question, self.recall_k),
                }
                for q in questions
            ],
        }

    async def judge(
        self, agent: CustomerAgent, conversation: list[dict[str, Any]], compliance: ComplianceRecord
    ) -> ConsultationOutcome:
        questions = quiz_for(agent.customer, self.kb)
        # Both calls' variables are built (their memories recalled) in this order before either runs.
        calls = [self.llm.call(CUSTOMER_RATING, self.rating_variables(agent, conversation))]
        if questions:
            calls.append(self.llm.call(CUSTOMER_QUIZ, self.quiz_variables(agent, questions)))
        done = await asyncio.gather(*calls)
        rating: CustomerRating = done[0].output
        results = score_quiz(questions, done[1].output) if questions else []
        experience = agent.experience()
        heard_kinds = {k for h in agent.heard for k in h.kinds}
        return ConsultationOutcome(
            rating=rating.satisfaction,
            satisfaction=(rating.satisfaction - SATISFACTION_MIN) / (SATISFACTION_MAX - SATISFACTION_MIN),
            goal_achieved=rating.goal_achieved,
            reason=rating.reason,
            quiz=results,
            understanding=sum(r.correct for r in results) / len(results) if results else None,
            experience=experience,
            compliance=compliance,
            gaps=gaps_of(results, heard_kinds, experience, agent.customer),
            tokens=sum(r.usage.total for r in done),
        )
