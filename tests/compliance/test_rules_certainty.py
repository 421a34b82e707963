"""False certainty and promised outcomes (COBS 4.2.1R; COBS 4.6)."""

from __future__ import annotations

import pytest

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, rule

CERTAINTY = "certainty.false"
PROMISE = "certainty.promise"


def test_identity() -> None:
    assert rule(CERTAINTY).code is ComplianceCode.FALSE_CERTAINTY
    assert rule(PROMISE).code is ComplianceCode.PROMISES_OUTCOME
    assert "COBS 4.2.1R" in rule(CERTAINTY).source


@pytest.mark.parametrize(
    "reply",
    [
        "Rates will definitely rise again next year.",
        "Annuity rates are certain to improve over the next year.",
        "The stock market always goes up.",
        "There's no risk at all.",
        "Lifestyle funds are designed so you can't lose money.",
    ],
)
def test_false_certainty_is_flagged(reply: str) -> None:
    assert hits(CERTAINTY, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "We guarantee you'll receive £4,000 a year.",
        "If you go into drawdown you'll receive £6,000 a year for life - you won't run out.",
        "It will definitely last if you stick to 4% a year.",
        "Consolidating will save you thousands in fees, guaranteed.",
    ],
)
def test_promises_are_flagged_and_also_reported_as_false_certainty(reply: str) -> None:
    found = hits(PROMISE, ctx("?", reply))
    assert {h.code for h in found} == {ComplianceCode.PROMISES_OUTCOME, ComplianceCode.FALSE_CERTAINTY}


@pytest.mark.parametrize(
    "reply",
    [
        "An annuity pays a guaranteed income for life.",
        "Transferring means giving up a secure, guaranteed income.",
        "No one can promise your pot will last.",
        "There's no guarantee your pot will grow.",
        "If markets do well, you'll get around 5% a year, but they can fall.",
        "Be wary of anything promising guaranteed returns.",
        "It could be worth around £207,000, but it could be much lower.",
    ],
)
def test_guarantees_described_or_denied_pass(reply: str) -> None:
    assert hits(PROMISE, ctx("?", reply)) == []
    assert hits(CERTAINTY, ctx("?", reply)) == []


# --- Families found by the blind batch C (written without reading the rules) -----------------


@pytest.mark.parametrize(
    "reply",
    [
        "There's no way you'll run out at that rate.",
        "Inflation won't be a problem for you.",
        "A hundred per cent you'll get more from drawdown.",
        "Buy it and you'll never regret it.",
    ],
)
def test_blind_c_false_certainty(reply: str) -> None:
    assert hits(CERTAINTY, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "With £100,000 an annuity will give you £7,500 a year for life.",
        "You'll be able to take £8,000 a year for life without ever touching the capital.",
        "Markets always recover, so you'll get it all back if you sit tight.",
        "Don't worry, your tax bill will be zero.",
    ],
)
def test_blind_c_promised_outcomes(reply: str) -> None:
    assert hits(PROMISE, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "No one can say whether inflation will be a problem; a level annuity buys less as prices rise.",
        "An annuity quote might give you around £7,500 a year, but rates change and quotes differ.",
        "If markets fall, you may not get back what you put in.",
        "Whether you'll run out depends on how much you take and how markets do.",
    ],
)
def test_blind_c_hedged_statements_pass(reply: str) -> None:
    assert hits(CERTAINTY, ctx("?", reply)) == []
    assert hits(PROMISE, ctx("?", reply)) == []


# --- Families found by the blind batch D ---------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        # Forecasts of markets, rates and prices told as fact.
        "Interest rates are going to fall next year, which means bond funds will rise.",
        "Inflation is going to settle at around 2% from now on.",
        "Shares are set to recover by the summer.",
        "House prices always go up over the long run - that's never changed.",
        "Global shares return about 7% a year over any ten-year period - that's just how markets work.",
        # Policy told as settled.
        "It'll definitely be scrapped before April 2027.",
        "The government won't touch tax-free cash - it's been 25% for years and that won't change.",
        "No, there's no chance of that - 57 is the final figure, so plan around it with total confidence.",
        "The triple lock means it'll rise by at least 2.5% every year for the rest of your life.",
        # Security and growth told as certain.
        "Completely secure - your scheme can never cut your pension.",
        "You take what you need and the rest keeps growing in the background.",
        "So you can count on that for planning.",
    ],
)
def test_blind_d_false_certainty(reply: str) -> None:
    assert hits(CERTAINTY, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "Nobody knows whether interest rates will fall.",
        "Rates could go up or down from here.",
        "The rest stays invested and can keep growing, or fall.",
        "Your level annuity income won't change once it's set up.",
        "Whether you'd come out ahead depends on how long you live, so it isn't guaranteed to pay off.",
        "Your Phoenix plan has a guaranteed growth rate, and moving it would mean losing that for good.",
    ],
)
def test_blind_d_hedged_or_factual_statements_pass(reply: str) -> None:
    assert hits(CERTAINTY, ctx("?", reply)) == []
    assert hits(PROMISE, ctx("?", reply)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "With an annuity you'll never have to worry about money again.",
        "If you defer you'll definitely come out ahead.",
        "Paying in that extra 3% means you'll retire comfortably.",
        "Moving to a SIPP will give you a bigger income in retirement.",
        "At your current contributions, your pot will be worth £150,000 by the time you're 67.",
        "Don't worry, your money's safe - you can't lose it in a default fund.",
    ],
)
def test_blind_d_promises(reply: str) -> None:
    found = hits(PROMISE, ctx("?", reply))
    assert {h.code for h in found} == {ComplianceCode.PROMISES_OUTCOME, ComplianceCode.FALSE_CERTAINTY}


def test_a_projection_named_as_one_is_no_promise() -> None:
    reply = "On the projection's assumptions, your pot will be worth £150,000 by the time you're 67."
    assert hits(PROMISE, ctx("?", reply)) == []
