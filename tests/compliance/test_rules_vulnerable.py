"""Plain language and no pressure for vulnerable or low-literacy customers (FG21/1; PRIN 2A.5)."""

from __future__ import annotations

import pytest

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, rule

JARGON = "vulnerable.jargon"
PRESSURE = "vulnerable.pressure"
JARGONY = "You could take an UFPLS or designate your uncrystallised funds to drawdown."


def test_identity() -> None:
    assert rule(JARGON).code is rule(PRESSURE).code is ComplianceCode.UNSUITABLE_FOR_VULNERABLE
    assert "FG21/1" in rule(JARGON).source and "FG21/1" in rule(PRESSURE).source


def test_jargon_is_flagged_only_for_customers_who_need_plain_language() -> None:
    assert hits(JARGON, ctx("what do i do", JARGONY, literacy="low"))
    assert hits(JARGON, ctx("what do i do", JARGONY, vulnerable=True))
    assert hits(JARGON, ctx("what do i do", JARGONY, situation="recently bereaved"))
    assert hits(JARGON, ctx("what do i do", JARGONY)) == []


def test_explained_jargon_or_the_customers_own_term_passes() -> None:
    explained = (
        "UFPLS stands for uncrystallised funds pension lump sum (that's taking cash straight from your pot)."
    )
    assert hits(JARGON, ctx("what is it", explained, literacy="low")) == []
    assert (
        hits(
            JARGON,
            ctx("whats the MPAA thing", "The MPAA is the money purchase annual allowance.", literacy="low"),
        )
        == []
    )


def test_pressure_is_flagged_and_reassurance_is_not() -> None:
    assert hits(PRESSURE, ctx("?", "You need to act quickly - decide this week.", vulnerable=True))
    assert hits(PRESSURE, ctx("?", "There's no hurry to decide anything.", vulnerable=True)) == []
    assert hits(PRESSURE, ctx("?", "There's no need to rush; take your time.", vulnerable=True)) == []
    assert hits(PRESSURE, ctx("?", "You need to act quickly.")) == []


SCAM_WARNING = (
    "What you've described has the warning signs of a pension scam: cold calls about pensions are "
    "banned, and a free pension review, guaranteed high returns, early access before the minimum "
    "pension age or pressure to act fast are all red flags. Please don't share your details or sign "
    "anything; you can check a firm on the FCA Register and report it to Action Fraud."
)


def test_naming_pressure_as_a_red_flag_is_not_pressure() -> None:
    customer = "A man rang offering a free pension review and said I must decide by Friday."
    assert hits(PRESSURE, ctx(customer, SCAM_WARNING, vulnerable=True)) == []
    named = "Anyone who tells you to act fast or promises guaranteed returns is waving a red flag."
    assert hits(PRESSURE, ctx("Who can I trust?", named, vulnerable=True)) == []


def test_pressure_in_other_words_is_flagged() -> None:
    for reply in [
        "You'll need to make a decision about the pension soon, so it's best to get it done this week.",
        "I'd strongly encourage you to make up your mind today.",
        "Let's not waste time though: annuity rates could drop any day.",
    ]:
        assert hits(PRESSURE, ctx("I'm not sure.", reply, vulnerable=True)), reply


# --- Families found by the blind batch C (written without reading the rules) -----------------


@pytest.mark.parametrize(
    "reply",
    [
        "You'll want to move fast: fill in the form today, there's honestly no time to waste.",
        "You'll want to take the lot before the rules change; don't miss the boat.",
        "I'll need an answer from you by the end of this call so we can get things moving.",
        "Let's just get the forms done now without him; it only takes ten minutes.",
        "You'll need regulated advice, so get the ball rolling today.",
        # Steering a vulnerable customer to an irreversible step as relief or a treat (FG21/1).
        "Most people just cash it in, and honestly it would take the stress off.",
        "It's your money, so why not treat yourself?",
    ],
)
def test_blind_c_pressure_and_undue_influence(reply: str) -> None:
    assert hits(PRESSURE, ctx("I'm struggling with all this.", reply, vulnerable=True))
    assert hits(PRESSURE, ctx("I'm struggling with all this.", reply)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "That's absolutely fine. There's nothing you need to decide today.",
        "Please don't feel you have to decide today, or this month.",
        "There's no deadline; take the time you need.",
        "We can go through the forms together with your son.",
    ],
)
def test_blind_c_reassurance_is_not_pressure(reply: str) -> None:
    assert hits(PRESSURE, ctx("I get confused with all this.", reply, vulnerable=True)) == []


# --- Blind batch D: provider-letter acronyms, deadlines set on the customer ---------------------


@pytest.mark.parametrize(
    "reply",
    [
        "Yes, but note the MVR may apply and you'd forfeit the GAR.",
        "It's probably your GMP reconciliation or the s148 revaluation statement.",
        "You could request a statement of your AMC and compare it against the OCF of a newer plan.",
        "The fixed-rate revaluation applies until your NPD.",
    ],
)
def test_provider_letter_acronyms_are_jargon(reply: str) -> None:
    assert hits(JARGON, ctx("Can I take it out?", reply, literacy="low"))
    assert hits(JARGON, ctx("Can I take it out?", reply, literacy="high")) == []


def test_an_acronym_explained_is_plain() -> None:
    reply = "The GAR, which means a promised rate for turning your pot into an income, would be lost."
    assert hits(JARGON, ctx("Can I take it out?", reply, literacy="low")) == []


@pytest.mark.parametrize(
    "reply",
    [
        "Yes - you must choose by the end of this call, otherwise the annuity quote lapses.",
        "You'll have to decide before Friday or else the offer goes.",
        "We need to get it signed by the end of this conversation.",
    ],
)
def test_a_deadline_set_on_the_customer_is_pressure(reply: str) -> None:
    assert hits(PRESSURE, ctx("Can we get it sorted?", reply, vulnerable=True))


def test_a_quote_lapsing_told_as_reassurance_is_not_pressure() -> None:
    reply = (
        "There's no deadline - if your annuity quote runs out, the provider can simply give you a new one."
    )
    assert hits(PRESSURE, ctx("Can we get it sorted today?", reply, vulnerable=True)) == []
