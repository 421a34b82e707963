"""Small builders for cases, rules and failures used across the casebase tests."""

from __future__ import annotations

from typing import Any

from casebase.models import Case, CaseOutcome, GuidanceRule, TaskType

DC_PROFILE: dict[str, Any] = {
    "age": 58,
    "pots": [{"type": "DC", "value_gbp": 42000, "provider": "Aviva", "has_guarantees": False}],
    "situation": "",
    "literacy": "medium",
    "vulnerable": False,
}
DB_PROFILE: dict[str, Any] = {
    "age": 52,
    "pots": [{"type": "DB", "value_gbp": 180000, "provider": "Acme Pension Scheme", "has_guarantees": True}],
    "situation": "",
    "literacy": "low",
    "vulnerable": False,
}


def make_case(
    context: str,
    guidance: str = "Here are the options, with their risks; a regulated adviser can say which suits you.",
    *,
    task_type: TaskType = "consolidation",
    verified: bool = True,
    satisfaction: float = 0.8,
    codes: list[str] | None = None,
    provenance: str = "virtual_training",
    source: str = "consultation-1",
) -> Case:
    return Case(
        task_type=task_type,
        customer_profile=DC_PROFILE,
        context=context,
        guidance=guidance,
        reasoning="explained options without recommending one",
        outcome=CaseOutcome(
            satisfaction=satisfaction, goal_achieved=True, understanding=0.7, first_pass_compliant=True
        ),
        compliance_verified=verified,
        covered_codes=codes or [],
        provenance=provenance,  # type: ignore[arg-type]
        source_ids=[source],
    )


def make_rule(
    principle: str,
    codes: list[str],
    *,
    domain: str = "consolidation",
    confidence: float = 0.6,
    source: str = "consultation-9",
) -> GuidanceRule:
    return GuidanceRule(
        principle=principle,
        confidence=confidence,
        codes=codes,
        domain=domain,  # type: ignore[arg-type]
        created_from=source,
        supporting_evidence=[source],
    )
