"""Outcome judging independent of the advisor: the customer's verdict, the quiz, the compliance record,
and how learning reads them."""

from __future__ import annotations

from datetime import datetime

import pytest

from compliance.knowledge import KnowledgeBase, load_knowledge
from environments.consultation import ConsultationRecord, TurnRecord
from environments.customer_agent import CustomerAgent
from environments.learning import failure_codes, outcome_of, outcome_summary, succeeded
from environments.outcomes import ConsultationOutcome, OutcomeJudge, compliance_record, quiz_for, score_quiz
from environments.scripted import phrases
from environments.tasks import QuizAnswer, QuizAnswers, Segment
from tests.environments.test_customer_agent import make_agent, make_customer, say

SEEDS = range(12)
AT = datetime(2026, 4, 6, 10, 0)


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_knowledge()


# -- right answers, computed from the profile


def test_quiz_right_answers_come_from_the_true_profile(kb: KnowledgeBase) -> None:
    # DC £40,000 on file plus £20,000 held elsewhere: a quarter of £60,000 is £15,000, well under
    # the lump sum allowance. A DB scheme, so its guarantees; drawdown, so Pension Wise and risk.
    questions = {q.id: q for q in quiz_for(make_customer(), kb)}
    assert set(questions) == {"tax_free_cash", "db_guarantees", "pension_wise", "investment_risk"}
    assert questions["tax_free_cash"].expected == 15000
    assert questions["db_guarantees"].expected is True
    assert questions["pension_wise"].must_name == "pension wise"

    # Aged 60 on 6 April 2026: born April 1965 to April 1966, State Pension age 67.
    spa = {q.id: q for q in quiz_for(make_customer(goal="retirement_age"), kb)}["state_pension_age"]
    assert spa.expected == 67 and spa.accepted_range == (66.5, 67.5)
    # Aged 66: born April 1959 to April 1960, either side of the start of the rise (66 or 66 and a month).
    spa66 = {q.id: q for q in quiz_for(make_customer(goal="retirement_age", age=66), kb)}["state_pension_age"]
    assert spa66.accepted_range == pytest.approx((65.5, 66 + 1 / 12 + 0.5))

    # Paying in: the annual allowance, and nothing about Pension Wise or a DB transfer.
    paying_in = {q.id: q for q in quiz_for(make_customer(goal="contribution_planning"), kb)}
    assert set(paying_in) == {"annual_allowance"} and paying_in["annual_allowance"].expected == 60000
    # No DB scheme, no question about one.
    no_db = make_customer(hidden=[h for h in make_customer().hidden if h.topic != "db_scheme"])
    assert "db_guarantees" not in {q.id for q in quiz_for(no_db, kb)}


def test_answers_are_scored_in_code(kb: KnowledgeBase) -> None:
    questions = quiz_for(make_customer(goal="tax"), kb) + quiz_for(make_customer(goal="retirement_age"), kb)
    answers = QuizAnswers(
        answers=[
            QuizAnswer(id="tax_free_cash", answer="about £14,000", value=14000),  # within 10%
            QuizAnswer(id="db_guarantees", answer="yes", yes=True),
            QuizAnswer(id="pension_wise", answer="Yes, there is one, it's free", yes=True),  # not named
            QuizAnswer(id="state_pension_age", answer="67", value=67),
        ]
    )
    results = {r.question.id: r.correct for r in score_quiz(questions, answers)}
    assert results == {
        "tax_free_cash": True,
        "db_guarantees": True,
        "pension_wise": False,
        "state_pension_age": True,
    }
    wrong = QuizAnswers(
        answers=[
            QuizAnswer(id="tax_free_cash", answer="a third, £20,000", value=20000),
            QuizAnswer(id="db_guarantees", answer="no", yes=False),
            QuizAnswer(id="pension_wise", answer="Yes, Pension Wise", yes=True),
            QuizAnswer(id="state_pension_age", answer="65", value=65),
        ]
    )
    results = {r.question.id: r.correct for r in score_quiz(questions, wrong)}
    assert results == {
        "tax_free_cash": False,
        "db_guarantees": False,
        "pension_wise": True,
        "state_pension_age": False,
    }
    unanswered = score_quiz(questions, QuizAnswers(answers=[]))
    assert not any(r.correct for r in unanswered)


# -- the customer's own verdict and understanding


FULL_ANSWER = [
    Segment(kind="information", text="There are a few ways to take money from a pension."),
    Segment(
        kind="figure",
        text="Across your defined contribution pensions of £60,000, usually up to 25% can be taken "
        "tax-free, which would be £15,000; the rest is taxed as income when you take it.",
    ),
    phrases.db_warning(),
    phrases.risk_warning("drawdown"),
    phrases.pension_wise(),
]
HOLDING = "Thank you. A colleague will check this and come back to you shortly."


async def judged(kb: KnowledgeBase, seed: int, replies: list[list[Segment] | None]) -> ConsultationOutcome:
    """A consultation in which the customer heard `replies` (None: a holding reply)."""
    agent: CustomerAgent = make_agent(kb, make_customer(), seed)
    await agent.start()
    await agent.speak(0, 4, [])
    turns = []
    for turn, segments in enumerate(replies, start=1):
        if segments is None:
            await agent.hear(turn, HOLDING, [], [], holding=True)
        else:
            await say(agent, turn, segments)
        turns.append(
            TurnRecord(
                speaker="advisor",
                text="...",
                at=AT,
                first_pass_compliant=segments is not None,
                first_pass_violations=[] if segments is not None else ["PERSONAL_RECOMMENDATION"],
                holding=segments is None,
                escalated=segments is None,
            )
        )
        if segments is not None:
            await agent.speak(turn, 4, [])
    return await OutcomeJudge(agent.llm, kb).judge(agent, [], compliance_record(turns))


async def test_satisfaction_is_lower_when_the_advisor_only_gave_holding_replies(kb: KnowledgeBase) -> None:
    held = [await judged(kb, s, [None]) for s in SEEDS]
    helped = [await judged(kb, s, [FULL_ANSWER, FULL_ANSWER]) for s in SEEDS]
    assert sum(o.rating for o in held) / len(held) + 1.5 < sum(o.rating for o in helped) / len(helped)
    assert not any(o.goal_achieved for o in held) and all(o.goal_achieved for o in helped)
    assert all(0.0 <= o.satisfaction <= 1.0 for o in held + helped)
    assert all(o.compliance.holding_replies == 1 and o.compliance.escalated for o in held)
    assert all(o.compliance.first_pass_compliant and o.compliance.advisor_turns == 2 for o in helped)


async def test_understanding_follows_what_was_actually_delivered(kb: KnowledgeBase) -> None:
    informed = [await judged(kb, s, [FULL_ANSWER, FULL_ANSWER]) for s in SEEDS]
    uninformed = [
        await judged(kb, s, [[Segment(kind="information", text="There are a few ways to take money out.")]])
        for s in SEEDS
    ]
    mean = lambda outcomes: sum(o.understanding for o in outcomes) / len(outcomes)  # noqa: E731
    assert mean(informed) >= 0.75
    assert mean(uninformed) <= 0.35
    # What it was told, it can say back: the figure it heard is its tax-free cash.
    figures = [r.answer.value for o in informed for r in o.quiz if r.question.id == "tax_free_cash"]
    assert figures.count(15000) >= len(SEEDS) * 0.7
    # Never told about Pension Wise, it cannot name it; a DB warning it never heard is a gap.
    for outcome in uninformed:
        by_id = {r.question.id: r for r in outcome.quiz}
        assert not by_id["pension_wise"].correct and not by_id["tax_free_cash"].correct
        assert "MISSING_PENSION_WISE_NUDGE" in outcome.gaps
        assert ("MISSING_DB_WARNING" in outcome.gaps) is (not by_id["db_guarantees"].correct)
    assert all(o.gaps == [] for o in informed)


async def test_a_wrong_figure_heard_is_a_wrong_answer(kb: KnowledgeBase) -> None:
    third = Segment(
        kind="figure",
        text="Across your defined contribution pensions of £60,000, usually up to 25% can be taken "
        "tax-free, which would be £20,000.",
    )
    outcomes = [await judged(kb, s, [[FULL_ANSWER[0], third]]) for s in SEEDS]
    assert not any(r.correct for o in outcomes for r in o.quiz if r.question.id == "tax_free_cash")


# -- learning reads the outcome


def record_with(
    outcome: ConsultationOutcome | None, violations: list[str] | None = None, held: bool = False
) -> ConsultationRecord:
    return ConsultationRecord(
        id="consultation-00001",
        index=1,
        customer_id="c-test",
        goal="drawdown",
        vulnerable=False,
        has_db=True,
        started_at=AT,
        ended_at=AT,
        revealed=[],
        turns=[
            TurnRecord(speaker="customer", text="Hello", at=AT),
            TurnRecord(
                speaker="advisor",
                text="Some guidance.",
                at=AT,
                first_pass_compliant=not violations,
                first_pass_violations=violations or [],
                holding=held,
                escalated=held,
            ),
        ],
        ended_by="escalation" if held else "customer",
        tokens=0,
        outcome=outcome,
    )


async def test_learning_sends_success_to_cases_and_shortfalls_to_rules(kb: KnowledgeBase) -> None:
    good = await judged(kb, 0, [FULL_ANSWER, FULL_ANSWER])
    poor = await judged(
        kb, 0, [[Segment(kind="information", text="There are a few ways to take money out.")]]
    )
    assert good.understood and not poor.understood

    kept = record_with(good)
    case_view = outcome_of(kept)
    assert case_view.satisfaction == good.satisfaction and case_view.understanding == good.understanding
    assert case_view.goal_achieved is True and case_view.first_pass_compliant is True
    assert succeeded(kept, case_view) and failure_codes(kept, case_view) == []

    # Every reply passed, but the customer left without what it needed: its gaps go to accumulation.
    short = record_with(poor)
    assert not succeeded(short, outcome_of(short))
    assert failure_codes(short, outcome_of(short)) == poor.gaps and poor.gaps
    # A held reply went to the review queue instead: nothing was missing from what was delivered.
    held = record_with(poor, held=True)
    assert not succeeded(held, outcome_of(held)) and failure_codes(held, outcome_of(held)) == []
    # A first-pass failure goes to accumulation with its own codes, whatever the outcome.
    failed = record_with(good, ["MISSING_RISK_DISCLOSURE"])
    assert failure_codes(failed, outcome_of(failed)) == ["MISSING_RISK_DISCLOSURE"]
    # A record from before outcomes were judged falls back on the transcript.
    assert outcome_of(record_with(None)).satisfaction is None

    summary = outcome_summary([kept, short, record_with(None)])
    assert summary.satisfaction == pytest.approx((good.satisfaction + poor.satisfaction) / 2)
    # The unjudged record's understanding comes from the transcript: nobody said they were confused.
    assert summary.understanding == pytest.approx((good.understanding + poor.understanding + 1.0) / 3)
    assert summary.goal_achieved_rate == pytest.approx(
        (good.goal_achieved + poor.goal_achieved + 1) / 3  # the unjudged one ran to its end
    )


def test_the_compliance_record_sums_up_the_advisor_turns() -> None:
    turns = [
        TurnRecord(speaker="advisor", text="a", at=AT, first_pass_compliant=True, refinements=0),
        TurnRecord(
            speaker="advisor",
            text="b",
            at=AT,
            first_pass_compliant=False,
            first_pass_violations=["FALSE_CERTAINTY", "MISSING_RISK_DISCLOSURE"],
            final_violations=["FALSE_CERTAINTY"],
            refinements=2,
            holding=True,
            escalated=True,
        ),
    ]
    record = compliance_record(turns)
    assert record.advisor_turns == 2 and not record.first_pass_compliant
    assert record.first_pass_violations == ["FALSE_CERTAINTY", "MISSING_RISK_DISCLOSURE"]
    assert record.final_violations == ["FALSE_CERTAINTY"] and record.refinements == 2
    assert record.holding_replies == 1 and record.escalated
    assert compliance_record([]).first_pass_compliant  # nothing said, nothing broken
