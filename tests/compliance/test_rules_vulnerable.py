"""Plain language and no pressure for vulnerable or low-literacy customers (FG21/1; PRIN 2A.5)."""

from __future__ import annotations

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
