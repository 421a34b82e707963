"""The pension world's LLM tasks and their structured answers.

Each task's prompt is a versioned template in `environments/prompts/`; the scripted provider's
handlers for them live in `environments/scripted/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from simulacra.llm.types import Task

PROMPTS_DIR = Path(__file__).parent / "prompts"

SegmentKind = Literal[
    "greeting",
    "question",
    "information",
    "figure",
    "risk_warning",
    "db_warning",
    "advice_signpost",
    "pension_wise",
    "scam_warning",
    "vulnerable_care",
    "closing",
    # What a weaker model slips into; the validator must catch them.
    "recommendation",
    "certainty",
    "jargon",
]
QuestionTopic = Literal["other_pensions", "db_scheme", "circumstances", "scam_contact", "retirement_plans"]


class Segment(BaseModel):
    kind: SegmentKind
    text: str


class AdvisorDraft(BaseModel):
    """One advisor utterance before the gate. `segments` let a refinement keep what was right."""

    text: str
    segments: list[Segment] = Field(default_factory=list)
    asked_topics: list[QuestionTopic] = Field(default_factory=list)
    used_rule_ids: list[str] = Field(default_factory=list)
    used_case_ids: list[str] = Field(default_factory=list)


class CustomerTurn(BaseModel):
    text: str
    revealed: list[QuestionTopic] = Field(default_factory=list)
    asks_for_recommendation: bool = False
    # The customer brought up transferring or cashing in defined-benefit rights.
    raises_db_transfer: bool = False
    confused: bool = False
    ends: bool = False


ADVISOR_REPLY: Task[AdvisorDraft] = Task("advisor.reply", "v1", AdvisorDraft)
ADVISOR_REFINE: Task[AdvisorDraft] = Task("advisor.refine", "v1", AdvisorDraft)
CUSTOMER_REPLY: Task[CustomerTurn] = Task("customer.reply", "v1", CustomerTurn)


def render_segments(segments: list[Segment]) -> str:
    return " ".join(s.text.strip() for s in segments if s.text.strip())
