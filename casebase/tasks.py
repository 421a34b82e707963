"""The LLM tasks casebase defines, each a versioned template in casebase/prompts and an output model.

Outputs are small and structured so a real model's answer can be checked field by field, and so the
scripted provider can compute the same shape from the variables alone.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from casebase.models import TaskType
from simulacra.llm.types import Task

PROMPTS_DIR = Path(__file__).parent / "prompts"


class TaskClassification(BaseModel):
    task_type: TaskType
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""


class RuleReflection(BaseModel):
    """Reflect: what a better reply would have said, and the general principle behind the difference."""

    better_alternative: str = Field(min_length=1)
    principle: str = Field(min_length=1)
    codes: list[str] = Field(default_factory=list)


class RefinedPrinciple(BaseModel):
    """Refine: the principle in the one form every rule shares, so rules read and compare alike."""

    model_config = ConfigDict(str_strip_whitespace=True)

    situation: str = Field(min_length=3)
    action: str = Field(min_length=3)
    reason: str = Field(min_length=3)

    @field_validator("situation", "action", "reason")
    @classmethod
    def _no_form_words(cls, value: str) -> str:
        # The form adds "When", "because" and the full stop; a model that repeats them doubles them.
        value = value.rstrip(" .,;")
        for lead in ("when ", "because ", "then "):
            if value.lower().startswith(lead):
                value = value[len(lead) :]
        return value

    def principle(self) -> str:
        return f"When {self.situation}, {self.action}, because {self.reason}."


class RuleJudgement(BaseModel):
    """Judge: would an advisor following this rule really serve customers better?"""

    helpful: bool
    reason: str = ""


class ContradictionVerdict(BaseModel):
    """Would following both rules at once be impossible?"""

    contradicts: bool
    reason: str = ""


CLASSIFY_TASK: Task[TaskClassification] = Task("casebase.classify", "v1", TaskClassification)
REFLECT_TASK: Task[RuleReflection] = Task("casebase.reflect", "v1", RuleReflection)
REFINE_TASK: Task[RefinedPrinciple] = Task("casebase.refine", "v1", RefinedPrinciple)
JUDGE_TASK: Task[RuleJudgement] = Task("casebase.judge_rule", "v1", RuleJudgement)
CONTRADICTION_TASK: Task[ContradictionVerdict] = Task("casebase.contradiction", "v1", ContradictionVerdict)
ALL_TASKS = (CLASSIFY_TASK, REFLECT_TASK, REFINE_TASK, JUDGE_TASK, CONTRADICTION_TASK)
