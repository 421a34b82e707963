"""The evaluation harness in rules mode: run as a command (subprocess) on the shipped datasets, and
`score` on hand-made results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compliance.codes import HARD_CONSTRAINTS, ComplianceCode
from compliance.evaluate import score
from compliance.models import ExpectedOutcome, LabelledCase, ValidationResult, load_dataset
from tests.compliance.rulekit import ctx

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "compliance" / "data"


def run_rules(dataset: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "compliance.evaluate", str(dataset), "--mode", "rules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["dev.jsonl", "holdout.jsonl"])
def test_rules_mode_meets_the_targets_on_our_datasets(name: str) -> None:
    summary = run_rules(DATA / name)
    assert summary["cases"] == len(load_dataset(DATA / name))
    assert summary["violation_recall"] >= 0.90
    assert summary["false_positive_rate"] <= 0.10
    for code in [*HARD_CONSTRAINTS]:
        assert summary["per_code_recall"][code.value] >= 0.95, code
    assert set(summary) >= {"accuracy", "per_code_recall", "escalation_agreement", "seconds"}


def test_the_datasets_cover_every_code_with_sources_and_hard_compliant_cases() -> None:
    cases = load_dataset(DATA / "dev.jsonl")
    assert len(cases) >= 150
    assert {code for case in cases for code in case.expected.violations} == set(ComplianceCode)
    assert all(case.source and case.rationale for case in cases)
    compliant = [case.advisor_utterance.lower() for case in cases if case.expected.compliant]
    for trigger in ("you should", "recommend", "guarantee", "best option"):
        assert any(trigger in reply for reply in compliant), trigger
    ids = {case.id for case in cases} & {case.id for case in load_dataset(DATA / "holdout.jsonl")}
    assert not ids


def _case(case_id: str, violations: list[ComplianceCode]) -> LabelledCase:
    c = ctx("?", "reply")
    return LabelledCase(
        id=case_id,
        customer=c.customer,
        customer_utterance="?",
        advisor_utterance="reply",
        expected=ExpectedOutcome(compliant=not violations, violations=violations),
    )


def _result(violations: list[ComplianceCode]) -> ValidationResult:
    return ValidationResult(
        compliant=not violations, violations=violations, escalate=False, decided_by="rules", confidence=1.0
    )


def test_score_counts_recall_false_positives_and_per_code_recall() -> None:
    pr, fe = ComplianceCode.PERSONAL_RECOMMENDATION, ComplianceCode.FACTUAL_ERROR
    cases = [_case("a", [pr]), _case("b", [fe]), _case("c", []), _case("d", [])]
    results = [_result([pr]), _result([]), _result([fe]), _result([])]
    summary = score(cases, results, "rules", 0.5)
    assert summary.violation_recall == 0.5
    assert summary.false_positive_rate == 0.5
    assert summary.per_code_recall == {fe.value: 0.0, pr.value: 1.0}
    assert summary.hard_constraint_recall_min == 0.0
    assert summary.accuracy == 0.5
    with pytest.raises(ValueError):
        score(cases, results[:1], "rules", 0.0)
