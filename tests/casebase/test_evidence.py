"""Later evidence: rules gain confidence when they help, lose it when their mistake recurs, and retire."""

from __future__ import annotations

import pytest

from casebase.evidence import apply_consultation_evidence, judge_evidence
from casebase.factory import Bases
from casebase.models import CaseOutcome
from tests.casebase.builders import make_rule

DB_RULE = "When a defined benefit transfer comes up, warn about lost guarantees, because they are valuable."
GENERAL_RULE = "When a customer seems unsure, check what they understood, because clarity matters."
GOOD = CaseOutcome(satisfaction=0.9, goal_achieved=True, understanding=0.8, first_pass_compliant=True)
BAD = CaseOutcome(satisfaction=0.2, goal_achieved=False, understanding=0.3, first_pass_compliant=False)


def active(bases: Bases, principle: str, codes: list[str], confidence: float = 0.6) -> str:
    rule = bases.rules.add_candidate(make_rule(principle, codes, confidence=confidence))
    return bases.rules.activate(rule.id, "validated in test").id


def test_what_a_consultation_says_about_a_rule() -> None:
    db = make_rule(DB_RULE, ["MISSING_DB_WARNING"])
    general = make_rule(GENERAL_RULE, [])

    def judged(rule, cited, violations, outcome=None):
        return judge_evidence(rule, cited=cited, violations=violations, outcome=outcome, good_outcome=0.5)

    assert judged(db, True, []) == (True, "cited, and MISSING_DB_WARNING not broken")
    assert judged(db, False, ["MISSING_DB_WARNING"]) == (
        False,
        "MISSING_DB_WARNING broken with the rule in the prompt",
    )
    assert judged(db, True, ["MISSING_DB_WARNING"])[0] is False  # type: ignore[index]
    assert judged(db, False, ["SCAM_RISK_IGNORED"]) is None  # in the prompt, not used, not at fault
    assert judged(general, True, [], GOOD)[0] is True  # type: ignore[index]
    bad = judged(general, True, ["FACTUAL_ERROR"], BAD)
    assert bad is not None and bad[0] is False and "not compliant at first pass" in bad[1]
    assert judged(general, True, [], None) is None and judged(general, False, [], GOOD) is None


def test_evidence_moves_confidence_and_names_the_consultation(bases: Bases) -> None:
    db = active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    general = active(bases, GENERAL_RULE, [])
    applied = apply_consultation_evidence(
        bases.rules, "consultation-7", retrieved=[db, general], cited=[db], violations=[], outcome=GOOD
    )
    assert [(e.rule_id, e.helped) for e in applied] == [(db, True)]  # general: retrieved, never cited
    assert applied[0].confidence_before == 0.6 and applied[0].confidence_after == pytest.approx(0.64)
    stored = bases.rules.get(db)
    assert stored is not None and "consultation-7" in stored.supporting_evidence
    assert stored.confidence_history[-1].evidence_id == "consultation-7"
    assert stored.confidence_history[-1].reason == "cited, and MISSING_DB_WARNING not broken"
    assert bases.rules.get(general).confidence == 0.6  # type: ignore[union-attr]


def test_a_rule_that_stops_helping_is_retired_and_then_left_alone(bases: Bases) -> None:
    db = active(bases, DB_RULE, ["MISSING_DB_WARNING"], confidence=0.5)
    seen = [
        apply_consultation_evidence(
            bases.rules, f"c-{n}", retrieved=[db], cited=[], violations=["MISSING_DB_WARNING"]
        )
        for n in range(3)
    ]
    assert [[(e.helped, e.status, e.confidence_after) for e in found] for found in seen] == [
        [(False, "active", pytest.approx(0.35))],
        [(False, "retired", pytest.approx(0.2))],
        [],  # once retired, later consultations no longer touch it
    ]
    rule = bases.rules.get(db)
    assert rule is not None and rule.status == "retired"
    assert "fell below 0.30" in rule.status_history[-1].reason and "c-1" in rule.status_history[-1].reason
    assert [c.evidence_id for c in rule.confidence_history] == ["c-0", "c-1"]
    assert bases.rules.search(DB_RULE) == []
