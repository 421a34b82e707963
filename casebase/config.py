"""Settings of the case base and rules base, as one pydantic model the Hydra tree can fill in."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from casebase.models import TaskType


class StoreConfig(BaseModel):
    """Where the vectors live: an embedded folder by default, a Chroma server when a host is named.

    `path` is one folder per run, or a shared library folder that several runs build on (one run at
    a time: Chroma's embedded store is single-process; point concurrent runs at a server instead).
    """

    model_config = ConfigDict(extra="forbid")

    path: Path = Path("casebase")
    host: str | None = None
    port: int = Field(default=8000, ge=1, le=65535)
    ssl: bool = False
    collection_prefix: str = Field(default="", description="namespace collections on a shared server")
    cases_collection: str = "cases"
    rules_collection: str = "rules"
    empty_recheck_s: float = Field(
        default=0.0,
        ge=0,
        description="how long a collection found empty is taken to stay so before Chroma is asked "
        "again (0: at every query); this process's own writes are seen at once",
    )

    @property
    def remote(self) -> bool:
        return self.host is not None


class CaseBaseSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    k: int = Field(default=3, ge=1, description="similar cases retrieved per query")
    merge_threshold: float = Field(
        default=0.93,
        gt=0.0,
        le=1.0,
        description="cosine at or above which a new case of the same task merges",
    )
    default_task_type: TaskType = Field(
        default="risk_assessment", description="the keyword classifier's answer when no keyword matches"
    )


class RulesBaseSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    k: int = Field(default=4, ge=1, description="active rules retrieved per query")
    duplicate_threshold: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        description="cosine at or above which a rule with the same codes is a duplicate",
    )
    related_threshold: float = Field(
        default=0.35,
        ge=0.0,
        le=1.0,
        description="cosine above which an active rule is checked for contradiction",
    )
    related_k: int = Field(default=5, ge=1, description="active rules checked against a new one")
    initial_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    step_up: float = Field(
        default=0.1, ge=0.0, le=1.0, description="share of the distance to 1 gained on help"
    )
    step_down: float = Field(
        default=0.15, ge=0.0, le=1.0, description="confidence lost when a rule did not help"
    )
    retire_below: float = Field(default=0.3, ge=0.0, le=1.0)
    merge_boost: float = Field(default=0.05, ge=0.0, le=1.0, description="confidence gained from a duplicate")
    good_outcome: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="outcome score at or above which a cited rule without codes counts as having helped",
    )

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> RulesBaseSettings:
        if self.related_threshold > self.duplicate_threshold:
            raise ValueError("related_threshold must not exceed duplicate_threshold")
        if self.retire_below >= self.initial_confidence:
            raise ValueError("retire_below must be below initial_confidence, or new rules retire at once")
        return self


class AccumulationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    validation_cases: int = Field(
        default=4, ge=0, description="past cases of the task type replayed per rule"
    )
    min_improvement: float = Field(
        default=0.0, ge=0.0, description="the failed situation's score must rise by more than this"
    )
    regression_tolerance: float = Field(
        default=0.0,
        ge=0.0,
        description="a past case's score may fall by at most this (a new violation is never tolerated)",
    )


class CasebaseConfig(BaseModel):
    """Everything `casebase` needs from config; `open_bases` builds both bases from it."""

    model_config = ConfigDict(extra="forbid")

    store: StoreConfig = Field(default_factory=StoreConfig)
    cases: CaseBaseSettings = Field(default_factory=CaseBaseSettings)
    rules: RulesBaseSettings = Field(default_factory=RulesBaseSettings)
    accumulation: AccumulationSettings = Field(default_factory=AccumulationSettings)
