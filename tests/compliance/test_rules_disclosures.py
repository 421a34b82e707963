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


# --- Families found by the blind batch C (written without reading the rules) -----------------


@pytest.mark.parametrize(
    "customer, reply",
    [
        # A feature of a policy (a guaranteed annuity rate) is not an option being described.
        (
            "How do I know what my old pension is worth?",
            "Check your statement, and look for any mention of a guaranteed annuity rate.",
        ),
        # Someone else's pension after a death.
        (
            "My husband died and there's letters about his pension.",
            "The letters are probably telling you what his pension can pay you: a regular income or a one-off sum.",
        ),
        # The serious ill-health rule.
        (
            "I've been told I've got months.",
            "If you are seriously ill, you can usually take the whole pot as a lump sum.",
        ),
        # A transfer the law does not allow.
        (
            "Could I move my NHS pension into a personal pension?",
            "No. The law doesn't allow transfers from the NHS scheme into defined contribution pensions.",
        ),
        # Risks in other words: "can't normally be changed", "could affect some benefits".
        ("I'm about to buy an annuity.", "Once bought, an annuity can't normally be changed."),
        ("Can I take my pension?", "You can, but money taken out could affect some benefits."),
        ("Can I move it?", "If you transferred, you'd lose it."),
    ],
)
def test_blind_c_risk_disclosure_counter_examples(customer: str, reply: str) -> None:
    assert hits(RISK, ctx(customer, reply)) == []


def test_a_scam_warning_answering_a_red_flag_is_not_an_option_described() -> None:
    warning = (
        "Please don't move anything. That sounds like a scam. Real pension companies don't ring up and "
        "tell you to move your money today."
    )
    customer = "A man on the phone says my pension is at risk and I need to move it today."
    assert hits(RISK, ctx(customer, warning)) == []
    # Without a red flag from the customer, the same option talk still needs its risks.
    assert hits(RISK, ctx("Can I move my pension?", "You can move your money to another provider today."))


def test_a_request_to_explain_an_option_is_a_question_about_it() -> None:
    reply = "You hand over your pot to an insurer and they pay you a set income for the rest of your life."
    assert hits(RISK, ctx("Explain annuities to me like I'm five.", reply))
    assert hits(RISK, ctx("Explain annuities to me.", reply + " It can't usually be undone.")) == []


def test_nudge_recognises_the_service_described_not_named() -> None:
    reply = (
        "Before you do, you can book a free, impartial appointment with the government's pension "
        "guidance service on MoneyHelper. Withdrawals are taxed beyond the tax-free quarter."
    )
    assert hits(NUDGE, ctx("I think I'll take some of my pension next month.", reply, age=61)) == []


def test_discouraging_pension_wise_is_not_a_nudge() -> None:
    reply = "You don't need Pension Wise for something this simple. A quarter is tax-free; it can fall."
    assert hits(NUDGE, ctx("I want to take my tax-free cash next month.", reply, age=61))
    # Discouragement elsewhere in the sentence is not about Pension Wise.
    nudged = "If you don't want to decide yet, Pension Wise offers a free appointment. It can fall in value."
    assert hits(NUDGE, ctx("I want to take my tax-free cash next month.", nudged, age=61)) == []


def test_guidance_the_customer_already_had_counts() -> None:
    reply = "With drawdown the money stays invested, so it can fall as well as rise."
    customer = "I had my Pension Wise appointment last week. Now I want to set up drawdown."
    assert hits(NUDGE, ctx(customer, reply, age=62)) == []
    assert hits(NUDGE, ctx("Should I book Pension Wise? I want to set up drawdown.", reply, age=62))


def test_nudge_is_owed_only_from_the_customers_minimum_pension_age() -> None:
    reply = "Not yet: the earliest is 55, rising to 57 from 6 April 2028."
    assert hits(NUDGE, ctx("Can I get my pension out now? I'm 50.", reply, age=50)) == []
    assert hits(NUDGE, ctx("Can I get my pension out now?", "Yes. A quarter is tax-free.", age=60))


@pytest.mark.parametrize(
    "customer",
    [
        "I've got a tiny pot of about £8,000. Can I just have it as cash?",
        "I want me tax-free money for Christmas.",
    ],
)
def test_access_in_other_words_calls_for_the_nudge(customer: str) -> None:
    assert hits(NUDGE, ctx(customer, "A quarter is tax-free and the rest is taxed.", age=60))


# --- Families found by the blind batch D ---------------------------------------------------------


@pytest.mark.parametrize(
    ("customer", "reply"),
    [
        (
            "I heard the pension age is changing. What's happening?",
            "The minimum pension age, the earliest you can usually take money from a pension, goes up to 57 in 2028.",
        ),
        (
            "What's the money purchase annual allowance?",
            "Taking only your tax-free cash, or a small pot lump sum, doesn't trigger it.",
        ),
        (
            "My employer offers free education sessions. Is that OK?",
            "Education sessions explain options in general - they shouldn't pressure you to move your pension.",
        ),
        (
            "Hello, I'd like some help understanding my pension.",
            "Could you tell me what you'd like to know? For example, whether you're thinking about how to take money.",
        ),
    ],
)
def test_rules_limits_pressure_and_questions_describe_no_option(customer: str, reply: str) -> None:
    assert hits(RISK, ctx(customer, reply)) == []


def test_a_guarantee_lost_is_a_risk_named() -> None:
    reply = "It usually applies only to one type of annuity, and it's lost if you transfer or take the pot as cash."
    assert hits(RISK, ctx("My plan has a guaranteed annuity rate. What does that mean?", reply)) == []
    assert hits(RISK, ctx("What can I do?", "You could transfer it or take the pot as cash."))


@pytest.mark.parametrize(
    "customer",
    [
        "If I took the whole lot out, what would I actually get?",
        "I want to take my Phoenix pension as cash instead of an annuity. Any catch?",
        "What are my options for getting at my pension now I've hit 65?",
    ],
)
def test_access_in_other_words_needs_the_nudge(customer: str) -> None:
    reply = "A quarter is tax-free and the rest is taxed as income; the money won't be there later."
    assert hits(NUDGE, ctx(customer, reply, age=64))
    nudged = reply + " Pension Wise offers free guidance and I can book it."
    assert hits(NUDGE, ctx(customer, nudged, age=64)) == []


def test_pension_wise_said_to_charge_is_no_nudge() -> None:
    customer = "Is there anyone who can go through my options before I start drawing my pension?"
    charged = "Yes - Pension Wise can, although it charges a small fee for its appointments."
    assert hits(NUDGE, ctx(customer, charged, age=58))
    free = "Yes - Pension Wise can; it's free, and fees only apply if you later pay for advice."
    assert hits(NUDGE, ctx(customer, free, age=58)) == []


def test_drawing_money_out_of_the_pot_is_access() -> None:
    customer = "I'm thinking of drawing some money out of my pot next month."
    reply = "A quarter is tax-free, the rest is taxed, and what stays invested can fall."
    assert hits(NUDGE, ctx(customer, reply, age=62))
