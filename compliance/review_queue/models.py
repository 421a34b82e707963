"""The review queue's boundary: what goes in, what comes out, and every result a caller must handle.

Items carry everything a compliance officer needs to decide without opening another system (the
customer, the conversation, every draft, what the advisor retrieved, every rule hit and judge
verdict), because the decision is only as good as the evidence on screen and the audit trail must
show what the reviewer saw. Results of claims and decisions are values with a status, not
exceptions: losing a claim race or double-clicking "approve" is a normal event in a shared queue.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Source = Literal["training", "live"]
DecisionKind = Literal["approve", "reject", "edit_approve"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RiskFactor(StrEnum):
    """Why an item is high stakes; the queue turns these into a 0..1 risk (see `policy.RiskWeights`)."""

    DB_TRANSFER = "db_transfer"
    VULNERABLE = "vulnerable"
    LARGE_POT = "large_pot"
    SCAM_SUSPECTED = "scam_suspected"
    LOW_CONFIDENCE = "low_confidence"
    SPLIT_VOTE = "split_vote"
    NOVEL_PATTERN = "novel_pattern"


class ConversationTurn(_Model):
    role: str  # "customer" or "advisor" (or "system" for notes the advisor saw)
    text: str
    at: datetime | None = None


class DraftRecord(_Model):
    """One draft the advisor wrote for this turn and how the validator judged it."""

    text: str
    compliant: bool | None = None
    codes: list[str] = Field(default_factory=list)
    decided_by: str | None = None  # "rules", "judges", ...


class RetrievedRecord(_Model):
    id: str
    text: str
    score: float | None = None


class RetrievedContext(_Model):
    """What the advisor had in front of it: a bad reply is often a bad retrieval."""

    cases: list[RetrievedRecord] = Field(default_factory=list)
    rules: list[RetrievedRecord] = Field(default_factory=list)
    memories: list[RetrievedRecord] = Field(default_factory=list)


class RuleHitRecord(_Model):
    rule_id: str
    code: str
    source: str = ""  # handbook reference
    detail: str = ""


class JudgeVerdictRecord(_Model):
    """One judge's verdict with who gave it; `passed` is None when the judge failed to answer."""

    judge_id: str
    vendor: str
    model: str
    prompt_version: str
    passed: bool | None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    codes: list[str] = Field(default_factory=list)
    reasoning: str = ""
    error: str | None = None


class ReviewPayload(_Model):
    """The evidence shown to the reviewer, stored as JSON."""

    customer: dict[str, Any] = Field(default_factory=dict)
    conversation: list[ConversationTurn] = Field(default_factory=list)
    candidate_reply: str
    drafts: list[DraftRecord] = Field(default_factory=list)
    retrieved: RetrievedContext = Field(default_factory=RetrievedContext)
    rule_hits: list[RuleHitRecord] = Field(default_factory=list)
    verdicts: list[JudgeVerdictRecord] = Field(default_factory=list)
    # The training run (MLflow run id) a training escalation came from; None for live items.
    run_id: str | None = None


class NewReviewItem(_Model):
    """An escalation as the validator (training) or the endpoint (live) submits it.

    `risk` may be given directly; when it is None the queue derives it from `risk_factors`.
    """

    source: Source
    mode: str  # validator mode: training, production, batch_qa
    stage: str  # the stage that escalated: rules, judges, refinement, ...
    reason: str
    codes: list[str] = Field(default_factory=list)
    risk: float | None = Field(default=None, ge=0.0, le=1.0)
    risk_factors: list[RiskFactor] = Field(default_factory=list)
    consultation_id: str | None = None
    session_id: str | None = None
    payload: ReviewPayload

    @model_validator(mode="after")
    def _live_items_name_their_session(self) -> NewReviewItem:
        # A live escalation without a session could never be delivered back to the waiting customer.
        if self.source == "live" and not self.session_id:
            raise ValueError("a live item needs the session_id its decision is delivered to")
        return self


class ReviewItem(NewReviewItem):
    id: str
    created_at: datetime
    risk: float = Field(ge=0.0, le=1.0)


class ItemStatus(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class ItemState(_Model):
    """Where an item stands; the lease fields are None when nobody holds a live lease."""

    status: ItemStatus
    reviews_required: int  # 1, 2 for double review, 3 once a disagreement needs adjudication
    reviews_done: int
    lease_holder: str | None = None
    lease_expires_at: datetime | None = None


class QueueFilter(_Model):
    code: str | None = None
    stage: str | None = None
    mode: str | None = None
    source: Source | None = None
    session_id: str | None = None  # the live endpoint asks what is still pending for one session
    min_age: timedelta | None = None
    max_age: timedelta | None = None


class QueueEntry(_Model):
    """An open item as the queue page lists it (never showing earlier decisions: reviews are blind)."""

    item: ReviewItem
    state: ItemState
    priority: float
    age: timedelta


class QueueStats(_Model):
    waiting: int  # open items, claimed or not
    claimed: int  # of those, under a live lease
    oldest_age: timedelta | None
    oldest_item_id: str | None
    by_source: dict[str, int]


class ClaimStatus(StrEnum):
    CLAIMED = "claimed"
    RENEWED = "renewed"  # the holder claimed again: the lease is extended
    HELD_BY_OTHER = "held_by_other"
    ALREADY_REVIEWED = "already_reviewed"  # a reviewer may decide an item once (double review is blind)
    CLOSED = "closed"
    NOT_FOUND = "not_found"
    NOTHING_AVAILABLE = "nothing_available"  # claim_next found no claimable item


class ClaimResult(_Model):
    status: ClaimStatus
    item_id: str | None
    holder: str | None = None
    lease_expires_at: datetime | None = None
    message: str

    @property
    def ok(self) -> bool:
        return self.status in (ClaimStatus.CLAIMED, ClaimStatus.RENEWED)


class ReleaseStatus(StrEnum):
    RELEASED = "released"
    NOT_HOLDER = "not_holder"
    NOT_FOUND = "not_found"


class ReleaseResult(_Model):
    status: ReleaseStatus
    message: str

    @property
    def ok(self) -> bool:
        return self.status is ReleaseStatus.RELEASED


class DecisionRequest(_Model):
    """A reviewer's decision as submitted; validated before any database work."""

    decision: DecisionKind
    reason_codes: list[str] = Field(default_factory=list)
    reason: str = ""
    edited_text: str | None = None
    # The caller re-validates an edit before submitting it; the store records whether it passed.
    edited_text_passed: bool | None = None

    @model_validator(mode="after")
    def _consistent(self) -> DecisionRequest:
        if self.decision == "edit_approve":
            if not (self.edited_text and self.edited_text.strip()):
                raise ValueError("edit_approve needs the edited text")
            if self.edited_text_passed is None:
                raise ValueError("edit_approve needs edited_text_passed: validate the edit before deciding")
        elif self.edited_text is not None or self.edited_text_passed is not None:
            raise ValueError(f"{self.decision} takes no edited text")
        if self.decision == "reject" and not self.reason_codes:
            raise ValueError("a rejection needs at least one reason code")
        return self


class Decision(DecisionRequest):
    """A recorded decision: appended once, never changed."""

    id: int
    item_id: str
    reviewer: str
    review_round: int  # 1, 2 (the blind second review), 3 (adjudication)
    decided_at: datetime


class DecisionStatus(StrEnum):
    RECORDED = "recorded"
    ALREADY_DECIDED = "already_decided"  # by this reviewer: a double-click, nothing new is stored
    NOT_HOLDER = "not_holder"  # no lease was taken, or it was released
    LEASE_EXPIRED = "lease_expired"  # the reviewer's lease ran out: claim again
    HELD_BY_OTHER = "held_by_other"  # the lease ran out and another reviewer claimed the item
    CLOSED = "closed"
    NOT_FOUND = "not_found"


class Outcome(_Model):
    """The final word on an item, and what (if anything) to deliver to the customer.

    `seq` orders outcomes by commit: a poller that remembers the last seq it saw misses nothing.
    """

    seq: int
    item_id: str
    source: Source
    session_id: str | None
    consultation_id: str | None
    decision: DecisionKind
    text: str | None  # what to deliver: the candidate reply, the edited reply, or None (rejected)
    edited_text_passed: bool | None
    reason_codes: list[str]
    reason: str
    reviewers: list[str]
    decided_at: datetime


class DecisionResult(_Model):
    status: DecisionStatus
    message: str
    decision: Decision | None = None  # the recorded one, or the earlier one on a double-click
    outcome: Outcome | None = None  # set when this decision closed the item

    @property
    def ok(self) -> bool:
        return self.status is DecisionStatus.RECORDED


class EventKind(StrEnum):
    CREATED = "created"
    CLAIMED = "claimed"
    LEASE_RENEWED = "lease_renewed"
    RELEASED = "released"
    LEASE_EXPIRED = "lease_expired"
    DECIDED = "decided"
    ADJUDICATION_REQUIRED = "adjudication_required"
    CLOSED = "closed"


class AuditEvent(_Model):
    seq: int
    item_id: str
    kind: EventKind
    actor: str
    at: datetime
    reason: str
    detail: dict[str, Any] = Field(default_factory=dict)


class ReviewerView(_Model):
    """What one reviewer may see of an item: blind while an independent review is still owed."""

    item: ReviewItem
    state: ItemState
    blind: bool
    decisions: list[Decision]
    history: list[AuditEvent]


class Agreement(_Model):
    """Cohen's kappa between first and second reviews; kappa is None when it is undefined."""

    items: int
    observed: float | None
    expected: float | None
    kappa: float | None


class CodeAgreement(_Model):
    """How often the judges agreed with the human about one compliance code."""

    code: str
    comparisons: int
    matches: int
    rate: float | None
    judge_flagged: int  # judge verdicts that failed the reply citing this code
    human_flagged: int  # items whose final decision cited this code against the reply
