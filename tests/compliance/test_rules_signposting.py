"""Advice signposting: a customer who asks what to do is told a regulated adviser can recommend."""

from __future__ import annotations

import pytest

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, rule

RULE = "advice.request"
OPTIONS = "Drawdown can fall in value; an annuity usually can't be undone."


def test_identity() -> None:
    assert rule(RULE).code is ComplianceCode.MISSING_ADVICE_SIGNPOST
    assert "PERG 8.30B" in rule(RULE).source


@pytest.mark.parametrize(
    "question",
    [
        "What should I do with my pension?",
        "Do you reckon an annuity makes sense for me?",
        "Is it daft to take my tax-free cash now?",
        "Would taking drawdown be a mistake for me?",
        "What would you do in my position?",
        "Which is the better deal for me, Aviva's or L&G's quote?",
        "My pot is £68,000. What's sensible?",
        "Honestly, is drawdown a sensible move for me?",
        "What do you advise?",
    ],
)
def test_requests_for_a_recommendation_need_a_signpost(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS))
    assert (
        hits(RULE, ctx(question, f"{OPTIONS} A regulated financial adviser can give you a recommendation."))
        == []
    )
    assert hits(RULE, ctx(question, f"{OPTIONS} An independent financial adviser (IFA) can help.")) == []


@pytest.mark.parametrize(
    "question",
    [
        "What can I do with my pension pot?",
        "What paperwork should I keep?",
        "What should I be thinking about before I take anything?",
        "Is there anything I should watch out for?",
        "What is Pension Wise?",
        "Is it easy to transfer one pension into another?",
        "My brother says drawdown is the only sensible choice for someone like me.",
    ],
)
def test_questions_about_options_or_process_do_not(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS)) == []


@pytest.mark.parametrize(
    "question",
    [
        "I should be obliged if you would indicate which product you consider most suitable for my needs.",
        "I would appreciate your professional opinion on whether I ought to purchase an annuity.",
        "What course of action would you advise in my circumstances?",
        "Is it better to take the tax-free cash in one go or bit by bit?",
        "Can you just do it for me? Put it into whatever's best.",
        "I'm thinking of taking my lump sum to pay off the mortgage. Go for it?",
    ],
)
def test_requests_for_a_recommendation_in_other_registers(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS))
    assert hits(RULE, ctx(question, OPTIONS + " A regulated financial adviser can recommend.")) == []


@pytest.mark.parametrize(
    "question",
    [
        "Drawdown or annuity, which suits someone like me better?",
        "Phased drawdown or one big lump sum, which one?",
        "Me mate took all his out, reckon I should do the same?",
        "What'd you reckon I do, love?",
        "Would I be better off moving to a cheaper provider?",
        "Is it worth paying for a financial adviser?",
    ],
)
def test_blind_c_question_forms_need_a_signpost(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS))
    assert hits(RULE, ctx(question, OPTIONS + " A regulated financial adviser can recommend one.")) == []


@pytest.mark.parametrize(
    "question",
    [
        "Which provider is cheaper?",
        "Which forms do I need?",
        "I think I should check my statement first.",
        "Is it worth the paperwork. I'm not sure.",
    ],
)
def test_blind_c_question_form_counter_examples(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS)) == []


# --- Blind batch D: a verdict asked on the customer's own plan -----------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "Am I daft to cash in my little pot? It's only £9,000.",
        "Tell me straight - am I making a mistake cashing in the whole thing?",
        "Would I be mad to take it all now?",
        "Am I doing the right thing leaving it invested?",
        "Is it a mistake to buy an annuity now?",
    ],
)
def test_a_verdict_asked_on_the_customers_plan_needs_a_signpost(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS))
    assert (
        hits(RULE, ctx(question, OPTIONS + " A regulated financial adviser can give you a recommendation."))
        == []
    )


@pytest.mark.parametrize(
    "question",
    [
        "Am I able to take it all now?",
        "Am I right that the tax-free part is a quarter?",
    ],
)
def test_questions_of_fact_about_the_customer_need_no_signpost(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS)) == []


@pytest.mark.parametrize("question", ["What's my best bet?", "What's our smartest move here?"])
def test_whats_my_best_asks_for_a_recommendation(question: str) -> None:
    assert hits(RULE, ctx(question, OPTIONS))
