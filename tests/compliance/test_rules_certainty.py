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
