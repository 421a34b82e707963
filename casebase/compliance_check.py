"""Checking rules and cases with the project's compliance validator.


A rule that says "tell people with small pots to pick drawdown" would teach the advisor to give
personal recommendations, however much it improved a replay. So the principle's text is validated
as if an advisor had said it, in a neutral setting (see data/principle_check.yaml), by whatever
`Validator` the run uses: the rule engine alone, or the full hybrid validator. Cases that did not
come from a gated consultation (knowledge-learning cases) are verified the same way before the
case base may return them.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from casebase.accumulation import PrincipleVerdict
from casebase.models import Case
from compliance.models import CustomerProfile, UtteranceContext, Validator


class PrincipleCheckSetting(BaseModel):
    model_config = ConfigDict(extra="forbid")

    customer: CustomerProfile
    customer_utterance: str


@cache
def default_setting() -> PrincipleCheckSetting:
    text = resources.files("casebase").joinpath("data/principle_check.yaml").read_text(encoding="utf-8")
    return PrincipleCheckSetting.model_validate(yaml.safe_load(text))


class ValidatorRuleCompliance:
    """Implements `RuleCompliance` with a compliance `Validator`."""

    def __init__(self, validator: Validator, setting: PrincipleCheckSetting | None = None) -> None:
        self.validator = validator
        self.setting = setting or default_setting()

    async def check_principle(self, principle: str, codes: list[str]) -> PrincipleVerdict:
        result = await self.validator.validate(
            UtteranceContext(
                customer=self.setting.customer,
                customer_utterance=self.setting.customer_utterance,
                advisor_utterance=principle,
            )
        )
        violations = [str(v) for v in result.violations]
        messages = "; ".join(f"{hit.code}: {hit.message}" for hit in result.rule_hits)
        detail = (
            f"compliant (decided by {result.decided_by})"
            if result.compliant
            else (f"not compliant (decided by {result.decided_by}): {messages or ', '.join(violations)}")
        )
        return PrincipleVerdict(compliant=result.compliant, violations=violations, detail=detail)


async def verify_cases(
    cases: list[Case], validator: Validator, setting: PrincipleCheckSetting | None = None
) -> list[Case]:
    """Copies of the cases with `compliance_verified` set by the validator.

    Each case's guidance is validated as the reply to its context, for its own customer when its
    profile is a full one, else for the neutral customer of the principle check. A refused case's
    notes record what the validator found.
    """
    setting = setting or default_setting()
    verified: list[Case] = []
    for case in cases:
        try:
            customer = CustomerProfile.model_validate(case.customer_profile)
        except ValidationError:
            customer = setting.customer
        result = await validator.validate(
            UtteranceContext(
                customer=customer, customer_utterance=case.context, advisor_utterance=case.guidance
            )
        )
        update: dict = {"compliance_verified": result.compliant}
        if not result.compliant:
            found = ", ".join(str(v) for v in result.violations)
            notes = "; ".join(
                n for n in (case.outcome.notes, f"validator ({result.decided_by}) found {found}") if n
            )
            update["outcome"] = case.outcome.model_copy(update={"notes": notes})
        verified.append(case.model_copy(update=update))
    return verified
