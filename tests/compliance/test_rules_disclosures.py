"""Retirement risk warnings and the Pension Wise stronger nudge (COBS 19.7)."""

from __future__ import annotations

import pytest

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, kb, rule

RISK = "disclosure.risk"
NUDGE = "disclosure.pension_wise"


def test_identity() -> None:
    assert rule(RISK).code is ComplianceCode.MISSING_RISK_DISCLOSURE
    assert rule(NUDGE).code is ComplianceCode.MISSING_PENSION_WISE_NUDGE
    assert "COBS 19.7" in rule(RISK).source and "COBS 19.7" in rule(NUDGE).source


@pytest.mark.parametrize(
    ("customer", "reply"),
    [
        (
            "Tell me about annuities.",
            "An annuity turns your pot into a regular income; you may get a higher rate if you're ill.",
        ),
        ("What's a SIPP?", "A SIPP lets you choose your funds, and you can transfer other pensions into it."),
        (
            "Is it easy to transfer one pension into another?",
            "Yes, the new provider arranges it in a few weeks.",
        ),
        ("Will my drawdown income last?", "It will if you stick to a sensible amount."),
    ],
)
def test_options_without_any_risk_are_flagged(customer: str, reply: str) -> None:
    assert hits(RISK, ctx(customer, reply))


@pytest.mark.parametrize(
    "reply",
    [
        "Drawdown keeps you invested, so the value can go down as well as up.",
        "Once an annuity is set up you normally can't cash it in or change it.",
        "A level annuity loses buying power as prices rise.",
        "Taking it all at once could push you into a higher-rate tax band.",
        "It can go up and down in value.",
    ],
)
def test_any_named_risk_clears_it(reply: str) -> None:
    assert hits(RISK, ctx("How does drawdown work?", reply)) == []


def test_denied_risks_do_not_count_as_disclosure() -> None:
    assert hits(RISK, ctx("Is drawdown safe?", "Drawdown is risk-free and you won't run out."))


def test_hard_compliant_cases() -> None:
    assert (
        hits(
            RISK,
            ctx(
                "What paperwork should I keep?",
                "You should keep your statements and any letters about transfers.",
            ),
        )
        == []
    )
    assert (
        hits(
            RISK,
            ctx("What's the death benefit limit?", "Lump sums paid on death count towards the allowance."),
        )
        == []
    )
    assert (
        hits(RISK, ctx("Can I take a lump sum?", "That sounds like a scam - report it to Action Fraud."))
        == []
    )
    assert (
        hits(
            RISK, ctx("When can I start my pension?", "Your scheme booklet says.", pots=[("DB", 45000, "BT")])
        )
        == []
    )


def test_nudge_needed_when_the_customer_is_about_to_access_dc_savings() -> None:
    reply = "A quarter is tax-free and the rest is taxed; what's left can fall in value."
    assert hits(NUDGE, ctx("I'm going to take £10,000 out next month.", reply, age=58))
    assert hits(NUDGE, ctx("What's the process for going into drawdown?", reply, age=64))
    assert (
        hits(
            NUDGE, ctx("I'm going to take £10,000 out next month.", reply + " Pension Wise is free.", age=58)
        )
        == []
    )


def test_nudge_not_owed_below_the_eligibility_age_without_dc_or_for_a_scammers_offer() -> None:
    reply = "A quarter is tax-free; the rest is taxed."
    young = int(kb().figure("pension_wise_min_age").value) - 1
    assert hits(NUDGE, ctx("I want to take some cash out.", reply, age=young)) == []
    assert hits(NUDGE, ctx("I want to take some cash out.", reply, pots=[("DB", 90000, "BT")])) == []
    assert (
        hits(
            NUDGE, ctx("Someone texted me saying I could unlock my pension at 52.", "That's a scam.", age=52)
        )
        == []
    )
    assert hits(NUDGE, ctx("My neighbour says people like me always go for an annuity.", reply)) == []


def test_a_nudge_given_earlier_in_the_conversation_counts() -> None:
    from compliance.models import Turn

    context = ctx("I want to take my tax-free cash.", "A quarter is tax-free; the rest is taxed.")
    context.history.append(Turn(speaker="advisor", text="Pension Wise offers free, impartial guidance."))
    assert hits(NUDGE, context) == []


def test_contribution_questions_and_reported_words_do_not_call_for_the_nudge() -> None:
    reply = "Once you take taxable income flexibly, the money purchase annual allowance of £10,000 applies."
    assert hits(NUDGE, ctx("Does the MPAA kick in if I take an income?", reply, age=57)) == []
    declined = "I can't say which option is right for you; an annuity usually can't be undone."
    assert hits(NUDGE, ctx("You said I should take the annuity, didn't you?", declined, age=61)) == []
    assert hits(NUDGE, ctx("I want to dip into my pension to clear my credit cards.", "It's taxed.", age=57))


def test_a_feature_is_not_a_risk_and_no_going_back_is() -> None:
    features = "You swap some or all of your pot for an income for life, and you can add inflation-proofing."
    assert hits(RISK, ctx("How do annuities work?", features))
    no_going_back = (
        "I'd describe an annuity as a set income for life, although there's no going back once bought."
    )
    assert hits(RISK, ctx("How do annuities work?", no_going_back)) == []


def test_a_question_about_what_an_annuity_does_is_not_a_decision_to_access() -> None:
    reply = "Only if you choose one that rises each year; a level annuity buys less as prices rise."
    assert hits(NUDGE, ctx("Will an annuity protect me from inflation?", reply, age=60)) == []
    assert hits(NUDGE, ctx("I'm going to buy an annuity next month.", reply, age=60))
