"""The rule engine as a whole: every rule has an id, a fixed code and a source; ids are unique."""

from __future__ import annotations

from pathlib import Path

import pytest

from compliance.codes import CODE_INFO, ComplianceCode
from compliance.models import load_dataset
from compliance.rules import RuleEngine
from tests.compliance.rulekit import ctx, engine, kb


def test_every_rule_has_an_id_a_fixed_code_and_a_source() -> None:
    rules = engine().rules
    assert len(rules) >= 14
    for rule in rules:
        assert rule.rule_id and "." in rule.rule_id
        assert isinstance(rule.code, ComplianceCode)
        assert len(rule.source) > 5, rule.rule_id


def test_every_compliance_code_has_at_least_one_rule() -> None:
    assert {rule.code for rule in engine().rules} == set(CODE_INFO)


def test_duplicate_rule_ids_are_refused() -> None:
    rules = engine().rules
    with pytest.raises(ValueError, match="duplicate rule ids"):
        RuleEngine(kb(), rules=[rules[0], rules[0]])


def test_hits_carry_the_hard_flag_of_their_code() -> None:
    report = engine().check(ctx("What would you do?", "If I were you I'd take the lot as cash."))
    assert report.hits
    for hit in report.hits:
        assert hit.hard == CODE_INFO[hit.code].hard
    assert report.hard_failed


def test_a_plain_compliant_reply_passes_every_rule() -> None:
    report = engine().check(
        ctx("How do I find my pension's value?", "You should check your annual statement or log in online.")
    )
    assert report.passed, report.hits


def test_the_scripted_advisors_good_phrasing_passes_every_rule() -> None:
    """The training world's careful advisor (greeting, information, figures, risk, DB and scam
    warnings, advice signpost, Pension Wise, reassurance for vulnerable customers) in plausible
    contexts, kept as hard compliant cases in the development set."""
    dev = Path(__file__).resolve().parents[2] / "compliance" / "data" / "dev.jsonl"
    cases = [case for case in load_dataset(dev) if case.id.startswith("phrases-")]
    assert len(cases) >= 30
    for case in cases:
        assert case.expected.compliant
        assert engine().check(case.context()).hits == [], case.id
