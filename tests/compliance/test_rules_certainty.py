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
