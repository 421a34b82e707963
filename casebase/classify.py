"""Which kind of consultation a query is: an LLM task, with a keyword classifier behind it.

The case base is searched within one task type, so a query must be classified on every retrieval.
The LLM reads meaning; the keyword classifier answers when the LLM fails or there is none, so a
broken provider degrades retrieval instead of stopping the advisor. Either way the answer says
which method decided it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from casebase.models import TASK_TYPES, TaskType
from casebase.tasks import CLASSIFY_TASK, TaskClassification
from simulacra.llm.errors import LLMChainExhausted, LLMError
from simulacra.memory.importance import LLMCaller


class TaskTypeInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str
    keywords: list[str] = Field(min_length=1)


@cache
def task_type_catalogue() -> dict[TaskType, TaskTypeInfo]:
    """The six task types with descriptions and keywords, from the package's data file."""
    text = resources.files("casebase").joinpath("data/task_types.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    if set(raw) != set(TASK_TYPES):
        raise ValueError(f"task_types.yaml must describe exactly {TASK_TYPES}, found {sorted(raw)}")
    return {name: TaskTypeInfo.model_validate(raw[name]) for name in TASK_TYPES}


class Classification(BaseModel):
    task_type: TaskType
    method: Literal["llm", "keywords"]
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""


def _pattern(keyword: str) -> re.Pattern[str]:
    return re.compile(r"(?<![a-z0-9])" + re.escape(keyword.lower()) + r"(?![a-z0-9])")


class KeywordClassifier:
    """Scores each task type by the keywords a text contains (a phrase 2, a word 1)."""

    def __init__(
        self,
        catalogue: dict[TaskType, TaskTypeInfo] | None = None,
        default: TaskType = "risk_assessment",
    ) -> None:
        self.catalogue = catalogue or task_type_catalogue()
        self.default = default
        self._patterns = {
            name: [(_pattern(k), 2.0 if " " in k.strip() else 1.0) for k in info.keywords]
            for name, info in self.catalogue.items()
        }

    def scores(self, text: str) -> dict[TaskType, float]:
        lowered = text.lower()
        return {
            name: sum(weight for pattern, weight in patterns if pattern.search(lowered))
            for name, patterns in self._patterns.items()
        }

    def classify(self, text: str) -> Classification:
        scores = self.scores(text)
        total = sum(scores.values())
        if total == 0:
            return Classification(
                task_type=self.default, method="keywords", confidence=0.0, reason="no task keyword matched"
            )
        best = max(TASK_TYPES, key=lambda name: (scores[name], -TASK_TYPES.index(name)))
        return Classification(
            task_type=best,
            method="keywords",
            confidence=round(scores[best] / total, 4),
            reason=f"keyword score {scores[best]:g} of {total:g}",
        )


class TaskClassifier:
    """Asks the LLM when there is one; falls back to keywords when it fails or is absent."""

    def __init__(self, llm: LLMCaller | None = None, keywords: KeywordClassifier | None = None) -> None:
        self.llm = llm
        self.keywords = keywords or KeywordClassifier()
        self.fallbacks = 0

    async def classify(self, query: str) -> Classification:
        if self.llm is None:
            return self.keywords.classify(query)
        variables = {
            "query": query,
            "task_types": [
                {"name": name, "description": info.description}
                for name, info in self.keywords.catalogue.items()
            ],
        }
        try:
            result = await self.llm.call(CLASSIFY_TASK, variables)
        except (LLMChainExhausted, LLMError) as exc:
            self.fallbacks += 1
            fallback = self.keywords.classify(query)
            return fallback.model_copy(update={"reason": f"LLM classifier failed ({exc}); {fallback.reason}"})
        answer: TaskClassification = result.parsed(TaskClassification)
        return Classification(
            task_type=answer.task_type, method="llm", confidence=answer.confidence, reason=answer.reason
        )
