"""The records of the dual memory: cases (what went well) and guidance rules (what was learnt).

Both are plain pydantic models so that they round-trip exactly through the vector store's
documents and through JSON Lines exports; embeddings are not part of them but live in the store,
tagged with the embedder that made them, so a base can be re-embedded by importing its export.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TaskType = Literal[
    "risk_assessment", "consolidation", "contribution_planning", "drawdown", "tax", "retirement_age"
]
TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)
GENERAL_DOMAIN = "general"
CaseProvenance = Literal["virtual_training", "human_validated_live", "knowledge_learning"]
# Consultations repeat themselves and are merged when they do; a knowledge-learning case is one
# sourced statement (one figure, one date band), so a near-identical one is a different fact.
MERGEABLE_PROVENANCE: tuple[CaseProvenance, ...] = ("virtual_training", "human_validated_live")
RuleStatus = Literal["candidate", "active", "retired"]


def content_id(prefix: str, *parts: Any) -> str:
    """A stable id from content, so seeded runs name the same record the same way in every process."""
    payload = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return f"{prefix}-{hashlib.blake2b(payload.encode('utf-8'), digest_size=8).hexdigest()}"


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


class CaseOutcome(BaseModel):
    """How the consultation ended, as judged from outside the advisor (None: not measured)."""

    model_config = ConfigDict(extra="forbid")

    satisfaction: float | None = Field(default=None, ge=0.0, le=1.0)
    goal_achieved: bool | None = None
    understanding: float | None = Field(default=None, ge=0.0, le=1.0)
    first_pass_compliant: bool | None = None
    escalated: bool = False
    notes: str = ""

    def score(self) -> float:
        """One figure to compare outcomes by when merging; unmeasured parts count as neutral (0.5)."""
        parts = [
            0.5 if self.satisfaction is None else self.satisfaction,
            0.5 if self.goal_achieved is None else float(self.goal_achieved),
            0.5 if self.understanding is None else self.understanding,
            0.5 if self.first_pass_compliant is None else float(self.first_pass_compliant),
        ]
        return sum(parts) / len(parts)


class Case(BaseModel):
    """One consultation worth learning from: the situation, what was said and why, and how it went.

    `covered_codes` are the compliance codes whose protections the guidance showed correctly (a
    case that gave the DB-transfer warning covers MISSING_DB_WARNING), so the advisor can cite a
    case as an example of doing that right.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    task_type: TaskType
    customer_profile: dict[str, Any] = Field(default_factory=dict)
    context: str = Field(min_length=1)
    guidance: str = Field(min_length=1)
    reasoning: str = ""
    outcome: CaseOutcome = Field(default_factory=CaseOutcome)
    compliance_verified: bool
    covered_codes: list[str] = Field(default_factory=list)
    provenance: CaseProvenance
    source_ids: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    merged_from: list[str] = Field(default_factory=list)

    @field_validator("covered_codes", "source_ids", "merged_from")
    @classmethod
    def _dedupe(cls, values: list[str]) -> list[str]:
        return _unique(values)

    @model_validator(mode="after")
    def _fill_id(self) -> Case:
        if not self.id:
            self.id = content_id(
                "case", self.task_type, self.context, self.guidance, self.provenance, self.source_ids
            )
        return self

    def search_text(self) -> str:
        """What a case is found by: the situation it answers, not the words of the answer."""
        return self.context

    @property
    def mergeable(self) -> bool:
        return self.provenance in MERGEABLE_PROVENANCE

    def rank(self) -> tuple[bool, float, int]:
        """Which of two near-duplicates speaks for both: verified first, then the better outcome,
        then what a human checked over what was simulated."""
        preference = {"human_validated_live": 2, "knowledge_learning": 1, "virtual_training": 0}
        return (self.compliance_verified, self.outcome.score(), preference[self.provenance])


class StatusChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: RuleStatus
    reason: str
    at: datetime | None = None


class ConfidenceChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    before: float
    after: float
    reason: str
    evidence_id: str | None = None
    at: datetime | None = None


class ReplayComparison(BaseModel):
    """One situation replayed without and with the rule: did the rule help, hurt or do nothing?"""

    model_config = ConfigDict(extra="forbid")

    situation_id: str
    role: Literal["failed_situation", "past_case"]
    score_before: float
    score_after: float
    violations_before: list[str] = Field(default_factory=list)
    violations_after: list[str] = Field(default_factory=list)
    regression: bool = False

    @property
    def delta(self) -> float:
        return self.score_after - self.score_before

    @property
    def introduced(self) -> list[str]:
        """Problems the reply had only with the rule in the prompt."""
        return [v for v in self.violations_after if v not in self.violations_before]

    @property
    def resolved(self) -> list[str]:
        """Problems the rule took away."""
        return [v for v in self.violations_before if v not in self.violations_after]


class ValidationRecord(BaseModel):
    """Why a rule was kept or refused: what it was tested on, what changed, who said what, when."""

    model_config = ConfigDict(extra="forbid")

    consultation_id: str | None = None
    replays: list[ReplayComparison] = Field(default_factory=list)
    failed_improved: bool | None = None
    regressions: list[str] = Field(default_factory=list)
    validator_compliant: bool | None = None
    validator_verdict: str = ""
    judge_helpful: bool | None = None
    judge_verdict: str = ""
    decision: Literal["kept", "refused", "merged"]
    reason: str
    decided_at: datetime | None = None

    @property
    def tested_on(self) -> list[str]:
        return [r.situation_id for r in self.replays]


class GuidanceRule(BaseModel):
    """A principle distilled from a failure, with its evidence, its life cycle and its audit trail."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    principle: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0)
    supporting_evidence: list[str] = Field(default_factory=list)
    fca_compliant: bool = False
    domain: TaskType | Literal["general"] = GENERAL_DOMAIN
    codes: list[str] = Field(default_factory=list)
    created_from: str | None = None
    version: int = Field(default=1, ge=1)
    status: RuleStatus = "candidate"
    validations: list[ValidationRecord] = Field(default_factory=list)
    confidence_history: list[ConfidenceChange] = Field(default_factory=list)
    status_history: list[StatusChange] = Field(default_factory=list)
    previous_principles: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @field_validator("codes", "supporting_evidence")
    @classmethod
    def _dedupe(cls, values: list[str]) -> list[str]:
        return _unique(values)

    @model_validator(mode="after")
    def _fill_id(self) -> GuidanceRule:
        if not self.id:
            self.id = content_id("rule", self.principle, self.domain, sorted(self.codes), self.created_from)
        return self

    def search_text(self) -> str:
        return self.principle

    @property
    def retired_reason(self) -> str | None:
        if self.status != "retired" or not self.status_history:
            return None
        return self.status_history[-1].reason
