"""Boundary models of the compliance package: who the customer is, what is being validated,
what the rules found, what a validator decided, and one labelled dataset line.

Every other part of the project (advisor, judges, review queue, harness) speaks these models, so
they are deliberately small and stable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from compliance.codes import ComplianceCode


class Pot(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["DC", "DB"]
    value_gbp: float = Field(ge=0)
    provider: str = ""
    has_guarantees: bool = False
    # What the guarantee is ("guaranteed annuity rate"), so a comparison can say what moving loses.
    guarantee: str = ""
    # Yearly charge as a fraction of the pot; None where it is not known, and the calculators then
    # assume the default-arrangement charge cap and say so.
    annual_charge_rate: float | None = Field(default=None, ge=0, lt=1)
    exit_fee_gbp: float = Field(default=0, ge=0)


class CustomerProfile(BaseModel):
    # Richer simulated profiles (names, health, goals) load too: the validator only reads these.
    model_config = ConfigDict(extra="ignore")

    age: int = Field(ge=16, le=120)
    pots: list[Pot]
    situation: str = ""
    literacy: Literal["low", "medium", "high"] = "medium"
    vulnerable: bool = False

    @property
    def has_db(self) -> bool:
        return any(p.type == "DB" for p in self.pots)

    @property
    def has_dc(self) -> bool:
        return any(p.type == "DC" for p in self.pots)

    @property
    def total_gbp(self) -> float:
        return sum(p.value_gbp for p in self.pots)


class Turn(BaseModel):
    speaker: Literal["customer", "advisor"]
    text: str


class UtteranceContext(BaseModel):
    """One candidate advisor reply in its setting. `facts` carries figures the advisor's calculator
    tools produced this turn, so a figure quoted from a calculator is checked against the
    calculator rather than flagged as unknown."""

    customer: CustomerProfile
    customer_utterance: str
    advisor_utterance: str
    history: list[Turn] = Field(default_factory=list)
    facts: dict[str, float] = Field(default_factory=dict)
    # What the drafting side knows about its own reply (e.g. the kinds of its segments), shown to
    # the LLM judges; the deterministic rules never read it, so they judge the text alone.
    annotations: dict[str, Any] = Field(default_factory=dict)


class RuleHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str
    code: ComplianceCode
    message: str
    source: str
    hard: bool
    # The text that triggered the rule, for the refine-and-retry feedback and for reviewers.
    evidence: str = ""


class RuleReport(BaseModel):
    hits: list[RuleHit] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.hits

    @property
    def codes(self) -> list[ComplianceCode]:
        return sorted({hit.code for hit in self.hits})

    @property
    def hard_failed(self) -> bool:
        return any(hit.hard for hit in self.hits)


class ValidationResult(BaseModel):
    compliant: bool
    violations: list[ComplianceCode] = Field(default_factory=list)
    escalate: bool
    decided_by: str
    confidence: float = Field(ge=0.0, le=1.0)
    rule_hits: list[RuleHit] = Field(default_factory=list)
    judge_verdicts: list[dict] = Field(default_factory=list)
    # Why the case should go to a human (high-stakes situations, split votes, low confidence).
    escalation_reasons: list[str] = Field(default_factory=list)


@runtime_checkable
class Validator(Protocol):
    """Anything that decides whether an advisor utterance may reach the customer."""

    async def validate(self, ctx: UtteranceContext) -> ValidationResult: ...


class ExpectedOutcome(BaseModel):
    compliant: bool
    violations: list[ComplianceCode] = Field(default_factory=list)
    must_escalate: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> ExpectedOutcome:
        if self.compliant == bool(self.violations):
            raise ValueError("expected.compliant must be true exactly when expected.violations is empty")
        return self


class LabelledCase(BaseModel):
    """One line of a labelled utterance dataset (DESIGN.md, "Labelled utterance datasets")."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    customer: CustomerProfile
    customer_utterance: str
    advisor_utterance: str
    expected: ExpectedOutcome
    rationale: str = ""
    source: str = ""

    def context(self) -> UtteranceContext:
        return UtteranceContext(
            customer=self.customer,
            customer_utterance=self.customer_utterance,
            advisor_utterance=self.advisor_utterance,
        )


class DatasetError(ValueError):
    """A dataset line that cannot be read; the message names the file and line."""


def load_dataset(path: str | Path) -> list[LabelledCase]:
    path = Path(path)
    cases: list[LabelledCase] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            try:
                case = LabelledCase.model_validate(raw)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(part) for part in err['loc']) or '<line>'}: {err['msg']}"
                    for err in exc.errors()
                )
                raise DatasetError(f"{path}:{number}: {problems}") from exc
            if case.id in seen:
                raise DatasetError(
                    f"{path}:{number}: duplicate id {case.id!r} (first on line {seen[case.id]})"
                )
            seen[case.id] = number
            cases.append(case)
    return cases
