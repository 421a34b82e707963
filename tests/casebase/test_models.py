"""The records: stable ids, validation of their fields, and exact JSON round trips."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from casebase.config import RulesBaseSettings
from casebase.models import Case, CaseOutcome, GuidanceRule, ReplayComparison, ValidationRecord
from casebase.tasks import RefinedPrinciple
from tests.casebase.builders import make_case, make_rule


def test_case_id_is_a_stable_content_hash() -> None:
    first = make_case("I have three old pots and want to combine them")
    again = make_case("I have three old pots and want to combine them")
    other = make_case("I have three old pots and want to combine them", source="consultation-2")
    assert first.id == again.id and first.id.startswith("case-")
    assert other.id != first.id


def test_case_round_trips_exactly_through_json() -> None:
    case = make_case(
        "Should I move my pots into one?", codes=["MISSING_RISK_DISCLOSURE", "MISSING_RISK_DISCLOSURE"]
    )
    case = case.model_copy(update={"created_at": datetime(2026, 5, 1, tzinfo=UTC), "merged_from": ["case-x"]})
    assert case.covered_codes == ["MISSING_RISK_DISCLOSURE"]  # duplicates dropped on validation
    assert Case.model_validate_json(case.model_dump_json()) == case


def test_case_rejects_unknown_task_type_and_provenance() -> None:
    with pytest.raises(ValidationError):
        make_case("x", task_type="mortgages")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        make_case("x", provenance="made_up")


def test_outcome_score_treats_unmeasured_parts_as_neutral() -> None:
    assert CaseOutcome().score() == 0.5
    assert (
        CaseOutcome(
            satisfaction=1.0, goal_achieved=True, understanding=1.0, first_pass_compliant=True
        ).score()
        == 1.0
    )
    with pytest.raises(ValidationError):
        CaseOutcome(satisfaction=1.5)


def test_verified_case_outranks_a_happier_unverified_one() -> None:
    verified = make_case("a", verified=True, satisfaction=0.2)
    unverified = make_case("a", verified=False, satisfaction=1.0)
    assert verified.rank() > unverified.rank()


def test_rule_round_trips_with_its_validation_records() -> None:
    rule = make_rule(
        "When a DB pension is mentioned, warn about guarantees, because they are valuable.",
        ["MISSING_DB_WARNING"],
    )
    record = ValidationRecord(
        consultation_id="c-1",
        replays=[
            ReplayComparison(situation_id="c-1", role="failed_situation", score_before=0.2, score_after=0.9)
        ],
        failed_improved=True,
        decision="kept",
        reason="validated",
        decided_at=datetime(2026, 5, 1, tzinfo=UTC),
    )
    rule = rule.model_copy(update={"validations": [record]})
    back = GuidanceRule.model_validate_json(rule.model_dump_json())
    assert back == rule
    assert back.validations[0].tested_on == ["c-1"]
    assert back.validations[0].replays[0].delta == pytest.approx(0.7)


def test_rule_confidence_is_bounded() -> None:
    with pytest.raises(ValidationError):
        make_rule("x", [], confidence=1.2)


def test_refined_principle_has_one_form_whatever_the_model_repeats() -> None:
    refined = RefinedPrinciple(
        situation="When a customer mentions a cold call",
        action="name the red flags.",
        reason="because scams cost savings.",
    )
    assert (
        refined.principle()
        == "When a customer mentions a cold call, name the red flags, because scams cost savings."
    )


def test_rules_settings_refuse_thresholds_that_would_retire_new_rules() -> None:
    with pytest.raises(ValidationError):
        RulesBaseSettings(initial_confidence=0.3, retire_below=0.4)
    with pytest.raises(ValidationError):
        RulesBaseSettings(related_threshold=0.95, duplicate_threshold=0.9)
