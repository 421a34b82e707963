"""High-stakes situations that go to a human whatever the rules decide."""

from __future__ import annotations

from compliance.rules import RuleEngine
from compliance.stakes import HighStakesDetector
from tests.compliance.rulekit import ctx, engine, kb

OK = "Pension Wise is free and impartial."


def assess(context) -> list[str]:
    return HighStakesDetector(kb()).assess(context, engine().analyse(context))


def test_db_transfer_is_high_stakes() -> None:
    reasons = assess(ctx("Can I transfer my final salary pension?", OK, pots=[("DB", 90000, "BT")]))
    assert any("DB transfer" in r for r in reasons)


def test_vulnerable_customer_facing_an_irreversible_decision() -> None:
    reasons = assess(ctx("Should I just buy an annuity?", OK, vulnerable=True))
    assert any("vulnerable" in r for r in reasons)
    assert assess(ctx("Can you keep it simple?", OK, vulnerable=True)) == []


def test_large_pot_with_an_access_decision() -> None:
    threshold = kb().escalation.large_pot_gbp
    big = [("DC", threshold, "Fidelity")]
    assert any("pension wealth" in r for r in assess(ctx("I want to take my tax-free cash.", OK, pots=big)))
    small = [("DC", threshold - 1, "Fidelity")]
    assert assess(ctx("I want to take my tax-free cash.", OK, pots=small)) == []
    assert assess(ctx("What's the annual allowance?", OK, pots=big)) == []


def test_ordinary_questions_are_not_escalated() -> None:
    assert assess(ctx("How do I check my pension's value?", OK)) == []
    assert assess(ctx("When can I start my pension?", OK, pots=[("DB", 90000, "BT")])) == []


def test_detector_sharing_the_engines_scanner_assesses_as_one_of_its_own() -> None:
    shared_engine = RuleEngine(kb())
    automaton = shared_engine.scanner._automaton
    shared = HighStakesDetector(kb(), shared_engine.topics)
    # Binding only lexicons the engine already scans for leaves its automaton as it was.
    assert shared_engine.scanner._automaton is automaton
    own = HighStakesDetector(kb())
    threshold = kb().escalation.large_pot_gbp
    big = [("DC", threshold, "Fidelity"), ("DB", 40000, "BT")]
    customers = [
        "I want to take my tax-free cash.",
        "Should I transfer my final salary pension?",
        "What would you do in my shoes?",
        "My husband takes his pension next year.",
        "What's the annual allowance?",
    ]
    for customer in customers:
        context = ctx(customer, OK, pots=big)
        analysis = shared_engine.analyse(context)
        assert analysis.customer_scan is not None
        assert shared.assess(context, analysis) == own.assess(context) == own.assess(context, analysis)
    assert any("pension wealth" in r for r in shared.assess(ctx(customers[0], OK, pots=big)))
