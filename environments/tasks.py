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
    # The customer felt rushed or pushed towards a choice by the adviser's last reply.
    pressured: bool = False
    ends: bool = False


class CustomerRating(BaseModel):
    """The customer's own verdict on the consultation, given once it is over."""

    satisfaction: int = Field(ge=1, le=5, description="1 very dissatisfied .. 5 very satisfied")
    goal_achieved: bool = Field(description="the customer got what it came for")
    reason: str = ""


QuizAnswerKind = Literal["amount_gbp", "yes_no", "age_years"]


class QuizAnswer(BaseModel):
    """The customer's answer to one understanding question, in its own words and as a value."""

    id: str
    answer: str = Field(description="the answer in the customer's own words")
    yes: bool | None = Field(default=None, description="for a yes/no question; null if it does not know")
    value: float | None = Field(
        default=None, description="for a question asking for an amount or an age; null if it does not know"
    )


class QuizAnswers(BaseModel):
    answers: list[QuizAnswer] = Field(default_factory=list)


ADVISOR_REPLY: Task[AdvisorDraft] = Task("advisor.reply", "v1", AdvisorDraft)
ADVISOR_REFINE: Task[AdvisorDraft] = Task("advisor.refine", "v1", AdvisorDraft)
# v2: the customer agent's retrieved memories and what it noticed in the adviser's reply.
CUSTOMER_REPLY: Task[CustomerTurn] = Task("customer.reply", "v2", CustomerTurn)
CUSTOMER_RATING: Task[CustomerRating] = Task("customer.rating", "v1", CustomerRating)
CUSTOMER_QUIZ: Task[QuizAnswers] = Task("customer.quiz", "v1", QuizAnswers)


def render_segments(segments: list[Segment]) -> str:
    return " ".join(s.text.strip() for s in segments if s.text.strip())
